// Status -> strata.errors exception; numpy array <-> Tensor (convert.h says the rules).
#include "convert.h"

#include <cstdint>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "strata/core/version.h"

namespace strata::python {

namespace {

// The class of strata.errors (python/strata/errors.py) for each code: defined in Python so that
// each can also derive from the built-in exception a Python user catches (ValueError, ...).
const char* ErrorClassName(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument: return "InvalidArgumentError";
    case StatusCode::kNotFound: return "NotFoundError";
    case StatusCode::kCorruption: return "DataLossError";
    case StatusCode::kTruncated: return "TruncatedRecordError";
    case StatusCode::kOutOfRange: return "OutOfRangeError";
    case StatusCode::kIOError: return "FileSystemError";
    case StatusCode::kUnimplemented: return "UnimplementedError";
    case StatusCode::kInternal: return "InternalError";
    case StatusCode::kOk: break;
  }
  return "StrataError";
}

}  // namespace

// A Status on its way to Python. Thrown as a plain C++ exception, so Check/Unwrap work with the
// GIL released too (inside fit, save_weights...); the translator registered by RegisterCore
// makes it the strata.errors exception once pybind11 holds the GIL again.
struct StatusException : std::exception {
  explicit StatusException(Status s) : status(std::move(s)) {}
  const char* what() const noexcept override { return status.message().c_str(); }
  Status status;
};

void ThrowStatus(const Status& status) { throw StatusException(status); }

void ThrowValueError(const std::string& message) { throw py::value_error(message); }
void ThrowTypeError(const std::string& message) { throw py::type_error(message); }

std::optional<DType> DTypeOfArray(const py::array& a) {
  const py::dtype dt = a.dtype();
  if (dt.is(py::dtype::of<float>())) return DType::kF32;
  if (dt.is(py::dtype::of<int32_t>())) return DType::kI32;
  if (dt.is(py::dtype::of<int64_t>())) return DType::kI64;
  if (dt.is(py::dtype::of<uint8_t>())) return DType::kU8;
  // dtype objects compare by value, not identity, once byte order or alignment flags differ.
  if (dt.equal(py::dtype::of<float>())) return DType::kF32;
  if (dt.equal(py::dtype::of<int32_t>())) return DType::kI32;
  if (dt.equal(py::dtype::of<int64_t>())) return DType::kI64;
  if (dt.equal(py::dtype::of<uint8_t>())) return DType::kU8;
  return std::nullopt;
}

py::dtype NumpyDType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return py::dtype::of<float>();
    case DType::kBF16: return py::dtype::of<float>();
    case DType::kI32: return py::dtype::of<int32_t>();
    case DType::kI64: return py::dtype::of<int64_t>();
    case DType::kU8: return py::dtype::of<uint8_t>();
  }
  return py::dtype::of<float>();
}

std::string ShapeText(const Shape& s) {
  std::string out = "(";
  for (int i = 0; i < s.rank(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s.dim(i));
  }
  if (s.rank() == 1) out += ",";
  return out + ")";
}

Tensor TensorFromArray(py::handle obj, std::string_view arg, ArrayOptions options) {
  py::array a = py::array::ensure(obj);
  if (!a) ThrowTypeError(std::string(arg) + ": expected a numpy array (or something np.asarray accepts), got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  std::vector<int64_t> dims(a.shape(), a.shape() + a.ndim());
  Shape shape(dims);
  std::optional<DType> dtype = DTypeOfArray(a);
  if (!(a.flags() & py::array::c_style))
    ThrowValueError(std::string(arg) + ": the array of shape " + ShapeText(shape) +
                    " is not C-contiguous; pass np.ascontiguousarray(" + std::string(arg) + ")");
  if (options.cast_to && dtype != options.cast_to) {
    const char kind = a.dtype().kind();
    if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
      ThrowTypeError(std::string(arg) + ": dtype " + std::string(py::str(a.dtype())) +
                     " cannot be converted to " + std::string(DTypeName(*options.cast_to)));
    if (!options.allow_copy)
      ThrowTypeError(std::string(arg) + ": expected dtype " + std::string(DTypeName(*options.cast_to)) + ", got " +
                     std::string(py::str(a.dtype())));
    py::array converted = a.attr("astype")(NumpyDType(*options.cast_to));
    return TensorFromArray(converted, arg, {.cast_to = options.cast_to, .allow_copy = true});
  }
  if (!dtype)
    ThrowTypeError(std::string(arg) + ": dtype " + std::string(py::str(a.dtype())) +
                   " is not one Strata holds (float32, int32, int64, uint8)");
  // Borrowed memory is only ever read (Tensor::sole_owner is false for it), so a read-only
  // array (np.frombuffer, a memory map) is borrowed as well.
  void* data = const_cast<void*>(a.data());
  const size_t bytes = static_cast<size_t>(a.nbytes());
  if (reinterpret_cast<uintptr_t>(data) % kTensorAlignment == 0) {
    // Borrow: the tensor holds a reference to the array; dropping it needs the GIL, which a
    // pipeline thread may not hold, and must not run once the interpreter is gone.
    auto* owner = new py::object(py::reinterpret_borrow<py::object>(a));
    return Tensor::Borrow(*dtype, std::move(shape), data, [owner] {
      if (!Py_IsInitialized()) return;  // at exit: leak one reference rather than crash
      py::gil_scoped_acquire gil;
      delete owner;
    });
  }
  if (!options.allow_copy)
    ThrowValueError(std::string(arg) + ": the buffer is not " + std::to_string(kTensorAlignment) +
                    "-byte aligned, so it cannot be shared without a copy");
  Tensor t = Tensor::Empty(*dtype, std::move(shape));
  if (bytes) std::memcpy(t.raw_data(), data, bytes);
  return t;
}

py::array ArrayFromTensor(const Tensor& t) {
  if (t.dtype() == DType::kBF16) {
    // numpy has no bfloat16: widen to float32 (a copy).
    Tensor c = t.Contiguous();
    py::array_t<float> out(std::vector<py::ssize_t>(c.shape().dims().begin(), c.shape().dims().end()));
    const auto* src = c.data<bf16>();
    float* dst = out.mutable_data();
    for (int64_t i = 0; i < c.num_elements(); ++i) dst[i] = ToF32(src[i]);
    return out;
  }
  const size_t item = DTypeSize(t.dtype());
  std::vector<py::ssize_t> shape(t.shape().dims().begin(), t.shape().dims().end());
  std::vector<py::ssize_t> strides;
  for (int64_t s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s * static_cast<int64_t>(item)));
  auto* keep = new Tensor(t);
  py::capsule owner(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(NumpyDType(t.dtype()), shape, strides, t.raw_data(), owner);
}

void RegisterCore(py::module_& m) {
  m.attr("__version__") = STRATA_VERSION;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusException& e) {
      py::object cls = py::module_::import("strata.errors").attr(ErrorClassName(e.status.code()));
      PyErr_SetObject(cls.ptr(), cls(e.status.message()).ptr());
    }
  });
  m.def("_array_roundtrip", [](py::handle a) { return ArrayFromTensor(TensorFromArray(a, "a")); },
        "Tests only: the array borrowed (or copied) into a Tensor and handed back as an array.");
  m.def("_raise_status", [](int code, const std::string& message) {
    ThrowStatus(Status(static_cast<StatusCode>(code), message));
  }, "Tests only: raises the exception a C++ Status with this code becomes.");
  m.def("_raise_status_without_gil", [](int code, const std::string& message) {
    py::gil_scoped_release release;
    ThrowStatus(Status(static_cast<StatusCode>(code), message));
  }, "Tests only: the same, thrown while the GIL is released (as inside fit).");
}

}  // namespace strata::python
