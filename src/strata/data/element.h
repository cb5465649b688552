// Element: what flows between dataset stages. A tuple of tensors, optionally named (a dict).
//
// A parsed tf.train.Example is a dict ({"image": u8[n], "class": i64[]}); after decode a
// stage usually emits a tuple (image f32[H, W, C], label i64[]). Byte strings (file names,
// serialized records, encoded JPEGs) travel as u8 tensors of rank 1: StringTensor() makes
// one, TensorToString() reads one back.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <string>
#include <string_view>
#include <vector>

#include "strata/core/status.h"
#include "strata/core/tensor.h"

namespace strata::data {

struct Element {
  std::vector<Tensor> tensors;     // the components, in order
  std::vector<std::string> names;  // empty for a tuple; one per component for a dict

  Element() = default;
  Element(std::vector<Tensor> t) : tensors(std::move(t)) {}  // NOLINT: a tuple
  Element(std::vector<std::string> n, std::vector<Tensor> t) : tensors(std::move(t)), names(std::move(n)) {}

  size_t size() const { return tensors.size(); }
  bool is_dict() const { return !names.empty(); }
  Tensor& operator[](size_t i) { return tensors[i]; }
  const Tensor& operator[](size_t i) const { return tensors[i]; }
  // The component called `name`; NotFound names the keys that exist.
  Result<Tensor> Get(std::string_view name) const;
  // Sum of the components' nbytes() (what statistics and the RAM budget count).
  size_t nbytes() const;
  // "(f32[28, 28, 1], i64[])" or "{image: u8[1234], label: i64[]}".
  std::string DebugString() const;
};

// A u8[n] tensor holding the bytes of `s`.
Tensor StringTensor(std::string_view s);
// The bytes of a u8 tensor of rank 0 or 1 (a contiguous copy).
Result<std::string> TensorToString(const Tensor& t);
// A scalar tensor.
template <typename T> Tensor Scalar(T v) {
  Tensor t(DTypeOf<T>(), Shape{});
  *t.data<T>() = v;
  return t;
}

}  // namespace strata::data

#pragma GCC visibility pop
