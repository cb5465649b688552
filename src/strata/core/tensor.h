// Tensor: a typed, shaped view of 64-byte-aligned storage.
//
// Storage is reference counted and shared between views; a view has its own shape,
// strides (in elements) and byte offset, so Slice/Transpose-like views never copy.
// Dimension names ("B", "H", "W", "C") are optional and only appear in debug output.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/dtype.h"
#include "strata/core/shape.h"
#include "strata/core/status.h"

namespace strata {

constexpr size_t kTensorAlignment = 64;  // one cache line, one AVX-512 register

// One aligned allocation. Never resized: allocate once, reuse.
class Storage {
 public:
  // Zeroed unless `zero` is false (then the bytes are whatever the allocator returns).
  explicit Storage(size_t bytes, bool zero = true);
  // Memory another owner keeps (a numpy array's buffer): never freed here; `release` runs
  // once, when the last tensor viewing it lets go, so the owner lives as long as any view.
  Storage(void* external, size_t bytes, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool borrowed() const { return static_cast<bool>(release_); }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::function<void()> release_;  // set: external memory
};

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-initialised contiguous storage.
  Tensor(DType dtype, Shape shape);
  // Contiguous storage left uninitialised (np.empty, torch.empty): for outputs written in
  // full before anyone reads them, such as a decoded image or a batch, where zeroing would
  // be a second pass over memory.
  static Tensor Empty(DType dtype, Shape shape);
  // A contiguous view of memory that `release` gives back when the last view is gone (no copy).
  // The caller guarantees `data` holds shape.num_elements() elements of `dtype`.
  static Tensor Borrow(DType dtype, Shape shape, void* data, std::function<void()> release);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int rank() const { return shape_.rank(); }
  int64_t num_elements() const { return shape_.num_elements(); }
  size_t nbytes() const { return static_cast<size_t>(num_elements()) * DTypeSize(dtype_); }
  bool defined() const { return storage_ != nullptr; }
  bool is_contiguous() const { return strides_ == shape_.ContiguousStrides(); }
  // No other tensor (view or copy) shares this storage, so its owner may overwrite it and
  // hand it out again: how a stage recycles a buffer its consumer has let go of.
  // Borrowed memory (Borrow) is never anyone's to overwrite.
  bool sole_owner() const { return storage_ != nullptr && storage_.use_count() == 1 && !storage_->borrowed(); }

  void* raw_data() const { return static_cast<char*>(storage_->data()) + offset_; }
  template <typename T> T* data() const { return static_cast<T*>(raw_data()); }
  // Element at a multi-index, honouring strides.
  template <typename T> T& at(std::initializer_list<int64_t> idx) const {
    return data<T>()[Offset(idx)];
  }

  // Views (no copy). Errors name the dimension and the extents involved.
  Result<Tensor> Slice(int dim, int64_t begin, int64_t end) const;   // [begin, end) along dim
  Result<Tensor> Reshape(Shape new_shape) const;                      // contiguous only
  Result<Tensor> Permute(const std::vector<int>& order) const;        // strided view
  Tensor Contiguous() const;  // a compact copy, or this tensor if already compact

  void set_dim_names(std::vector<std::string> names) { dim_names_ = std::move(names); }
  const std::vector<std::string>& dim_names() const { return dim_names_; }
  // "f32[B=128, H=28, W=28, C=1]", plus the first values when `max_values` > 0.
  std::string DebugString(int max_values = 0) const;

 private:
  int64_t Offset(std::initializer_list<int64_t> idx) const;
  float ValueAsFloat(int64_t linear_index) const;  // for DebugString

  DType dtype_ = DType::kF32;
  Shape shape_;
  std::vector<int64_t> strides_;
  std::vector<std::string> dim_names_;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
};

}  // namespace strata

#pragma GCC visibility pop
