// What keras.cc and keras_fit.cc share: the model's and the callbacks' registrations live in
// two files so that the 2 cores compile them in parallel (pybind11 is heavy).
#pragma once
#include <pybind11/pybind11.h>

#include <vector>

#include "strata/core/tensor.h"
#include "strata/keras/model.h"

namespace strata::python {

// keras_fit.cc: fit / evaluate / predict, the callbacks (built-in and Python-defined), Ctrl-C.
void RegisterKerasFit(pybind11::module_& k);

// The model inputs as tensors (f32, copied or borrowed) from one array or a list of arrays,
// each checked against the model's input shape; `arg` names the argument ("x").
std::vector<Tensor> ModelInputs(const keras::Model& model, pybind11::handle x, const char* arg);
// The labels: integer or f32 arrays as they are, other numeric dtypes converted.
Tensor ModelLabels(pybind11::handle y, const char* arg);

}  // namespace strata::python
