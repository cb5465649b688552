// What every binding shares: Status to Python exception, numpy array <-> Tensor.
//
// Errors: a non-OK Status becomes the exception class of strata.errors that matches its code
// (InvalidArgumentError is a ValueError, NotFoundError a FileNotFoundError, ...), with the
// C++ message unchanged. Arrays: a C-contiguous array of a Strata dtype whose buffer is
// 64-byte aligned is borrowed, not copied (the tensor keeps the array alive); any other
// contiguous array is copied once. Tensors go out as arrays over the same storage.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
// Every binding file sees the same type casters: std::vector, std::map, std::optional go as
// lists, dicts, None. One file without it would instantiate pybind11's generic caster for the
// same type, an ODR clash that -flto resolves either way ("Unregistered type: std::vector").
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <string_view>

#include "strata/core/status.h"
#include "strata/core/tensor.h"

namespace strata::python {

namespace py = pybind11;

// Raises the strata.errors exception for `status` (which must not be OK). Safe with the GIL
// released: the exception becomes Python's when it leaves the binding.
[[noreturn]] void ThrowStatus(const Status& status);
inline void Check(const Status& status) {
  if (!status.ok()) ThrowStatus(status);
}
template <typename T> T Unwrap(Result<T> result) {
  if (!result.ok()) ThrowStatus(result.status());
  return std::move(result).value();
}
// ValueError / TypeError naming the argument, raised from C++.
[[noreturn]] void ThrowValueError(const std::string& message);
[[noreturn]] void ThrowTypeError(const std::string& message);

// numpy dtype <-> Strata dtype. bfloat16 has no numpy type: it goes out as float32.
std::optional<DType> DTypeOfArray(const py::array& a);
py::dtype NumpyDType(DType dtype);

struct ArrayOptions {
  std::optional<DType> cast_to;  // convert (copying) an array of another numeric dtype
  bool allow_copy = true;        // false: a non-borrowable array is an error
};
// `arg` names the argument in errors ("x", "y", "from_tensor_slices component 'image'").
// Accepts an ndarray or anything np.asarray takes; a non-contiguous array is a ValueError.
Tensor TensorFromArray(py::handle obj, std::string_view arg, ArrayOptions options = {});
// A numpy array over the tensor's storage (no copy), which keeps the storage alive.
py::array ArrayFromTensor(const Tensor& t);

// "(None, 28, 28, 1)"-style text of a shape, for messages.
std::string ShapeText(const Shape& s);

}  // namespace strata::python
