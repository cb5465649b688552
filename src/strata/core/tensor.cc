#include "strata/core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

namespace strata {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
  }
  return "?";
}

bool ParseDType(std::string_view name, DType* out) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kI32, DType::kI64, DType::kU8}) {
    if (DTypeName(t) == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

std::vector<int64_t> Shape::ContiguousStrides() const {
  std::vector<int64_t> s(dims_.size());
  int64_t stride = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    s[i] = stride;
    stride *= dims_[i];
  }
  return s;
}

std::string Shape::ToString() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

Storage::Storage(size_t bytes, bool zero) : bytes_(bytes) {
  size_t rounded = (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  if (rounded == 0) rounded = kTensorAlignment;
  data_ = std::aligned_alloc(kTensorAlignment, rounded);
  if (!data_) throw std::bad_alloc();
  if (zero) std::memset(data_, 0, rounded);
}

Storage::Storage(void* external, size_t bytes, std::function<void()> release)
    : data_(external), bytes_(bytes), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) {
    release_();
  } else {
    std::free(data_);
  }
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype),
      shape_(std::move(shape)),
      strides_(shape_.ContiguousStrides()),
      storage_(std::make_shared<Storage>(static_cast<size_t>(shape_.num_elements()) * DTypeSize(dtype))) {}

Tensor Tensor::Empty(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = t.shape_.ContiguousStrides();
  t.storage_ = std::make_shared<Storage>(static_cast<size_t>(t.shape_.num_elements()) * DTypeSize(dtype), false);
  return t;
}

Tensor Tensor::Borrow(DType dtype, Shape shape, void* data, std::function<void()> release) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = t.shape_.ContiguousStrides();
  t.storage_ = std::make_shared<Storage>(data, static_cast<size_t>(t.shape_.num_elements()) * DTypeSize(dtype),
                                         std::move(release));
  return t;
}

int64_t Tensor::Offset(std::initializer_list<int64_t> idx) const {
  assert(static_cast<int>(idx.size()) == rank());
  int64_t off = 0;
  int i = 0;
  for (int64_t v : idx) {
    assert(v >= 0 && v < shape_.dim(i));
    off += v * strides_[i++];
  }
  return off;
}

Result<Tensor> Tensor::Slice(int dim, int64_t begin, int64_t end) const {
  if (dim < 0) dim += rank();
  if (dim < 0 || dim >= rank())
    return InvalidArgument("Slice: dimension " + std::to_string(dim) + " out of range for shape " + shape_.ToString());
  if (begin < 0 || end < begin || end > shape_.dim(dim))
    return InvalidArgument("Slice: [" + std::to_string(begin) + ", " + std::to_string(end) +
                           ") out of range for dimension " + std::to_string(dim) + " of shape " + shape_.ToString());
  Tensor t = *this;
  std::vector<int64_t> dims = shape_.dims();
  dims[dim] = end - begin;
  t.shape_ = Shape(std::move(dims));
  t.offset_ += static_cast<size_t>(begin * strides_[dim]) * DTypeSize(dtype_);
  return t;
}

Result<Tensor> Tensor::Reshape(Shape new_shape) const {
  if (new_shape.num_elements() != num_elements())
    return InvalidArgument("Reshape: cannot view " + shape_.ToString() + " (" + std::to_string(num_elements()) +
                           " elements) as " + new_shape.ToString());
  if (!is_contiguous()) return InvalidArgument("Reshape: the view " + shape_.ToString() + " is not contiguous");
  Tensor t = *this;
  t.shape_ = std::move(new_shape);
  t.strides_ = t.shape_.ContiguousStrides();
  t.dim_names_.clear();
  return t;
}

Result<Tensor> Tensor::Permute(const std::vector<int>& order) const {
  if (static_cast<int>(order.size()) != rank())
    return InvalidArgument("Permute: order has " + std::to_string(order.size()) + " entries for rank " +
                           std::to_string(rank()));
  std::vector<bool> seen(rank(), false);
  std::vector<int64_t> dims(rank()), strides(rank());
  std::vector<std::string> names;
  for (int i = 0; i < rank(); ++i) {
    int o = order[i];
    if (o < 0 || o >= rank() || seen[o]) return InvalidArgument("Permute: order is not a permutation");
    seen[o] = true;
    dims[i] = shape_.dim(o);
    strides[i] = strides_[o];
    if (!dim_names_.empty()) names.push_back(dim_names_[o]);
  }
  Tensor t = *this;
  t.shape_ = Shape(std::move(dims));
  t.strides_ = std::move(strides);
  t.dim_names_ = std::move(names);
  return t;
}

Tensor Tensor::Contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out(dtype_, shape_);
  out.dim_names_ = dim_names_;
  const size_t es = DTypeSize(dtype_);
  const char* src = static_cast<const char*>(raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  std::vector<int64_t> idx(rank(), 0);
  const int64_t n = num_elements();
  for (int64_t linear = 0; linear < n; ++linear) {
    int64_t off = 0;
    for (int d = 0; d < rank(); ++d) off += idx[d] * strides_[d];
    std::memcpy(dst + linear * es, src + off * es, es);
    for (int d = rank() - 1; d >= 0; --d) {
      if (++idx[d] < shape_.dim(d)) break;
      idx[d] = 0;
    }
  }
  return out;
}

float Tensor::ValueAsFloat(int64_t linear) const {
  int64_t off = 0;
  for (int d = rank() - 1; d >= 0; --d) {
    off += (linear % shape_.dim(d)) * strides_[d];
    linear /= shape_.dim(d);
  }
  switch (dtype_) {
    case DType::kF32: return data<float>()[off];
    case DType::kBF16: return ToF32(data<bf16>()[off]);
    case DType::kI32: return static_cast<float>(data<int32_t>()[off]);
    case DType::kI64: return static_cast<float>(data<int64_t>()[off]);
    case DType::kU8: return data<uint8_t>()[off];
  }
  return 0;
}

std::string Tensor::DebugString(int max_values) const {
  std::ostringstream os;
  os << DTypeName(dtype_) << "[";
  for (int i = 0; i < rank(); ++i) {
    if (i) os << ", ";
    if (i < static_cast<int>(dim_names_.size()) && !dim_names_[i].empty()) os << dim_names_[i] << "=";
    os << shape_.dim(i);
  }
  os << "]";
  if (max_values > 0 && defined()) {
    os << " {";
    int64_t n = std::min<int64_t>(num_elements(), max_values);
    for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << ValueAsFloat(i);
    if (n < num_elements()) os << ", ...";
    os << "}";
  }
  return os.str();
}

}  // namespace strata
