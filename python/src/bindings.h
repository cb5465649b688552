// The extension strata._strata: one Register function per submodule, each in its own file
// (data.cc, io.cc, keras.cc, distribute.cc, devices.cc, train.cc), called in this order by module.cc.
// The Python package (python/strata/*.py) gives them their Keras/tf.data names and defaults.
#pragma once
#include <pybind11/pybind11.h>
// Every binding file sees the same type casters: std::vector, std::map, std::optional go as
// lists, dicts, None. One file without it would instantiate pybind11's generic caster for the
// same type, an ODR clash that -flto resolves either way ("Unregistered type: std::vector").
#include <pybind11/stl.h>

namespace strata::python {

void RegisterCore(pybind11::module_& m);        // convert.cc: version, errors' codes, tensors
void RegisterDevices(pybind11::module_& m);     // devices.cc: devices(), the monitor
void RegisterIo(pybind11::module_& m);          // io.cc: FixedLenFeature, parse_example, ...
void RegisterData(pybind11::module_& m);        // data.cc: Dataset and its stages
void RegisterKeras(pybind11::module_& m);       // keras.cc: layers, Model, fit, callbacks
void RegisterDistribute(pybind11::module_& m);  // distribute.cc: ClusterResolver, strategies
void RegisterTrain(pybind11::module_& m);       // train.cc: the training recipe and its trainer

}  // namespace strata::python
