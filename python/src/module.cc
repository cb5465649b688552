// strata._strata: the extension behind `import strata` (python/strata/__init__.py).
// Each submodule's bindings live in their own file; bindings.h lists them.
#include "bindings.h"

PYBIND11_MODULE(_strata, m) {
  m.doc() = "Strata's C++ core: the compiled training step, the tf.data-style pipeline, the monitor.";
  strata::python::RegisterCore(m);
  strata::python::RegisterDevices(m);
  strata::python::RegisterIo(m);
  strata::python::RegisterData(m);
  strata::python::RegisterKeras(m);
  strata::python::RegisterDistribute(m);
  strata::python::RegisterTrain(m);
}
