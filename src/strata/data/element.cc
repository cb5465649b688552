#include "strata/data/element.h"

#include <cstring>

namespace strata::data {

Result<Tensor> Element::Get(std::string_view name) const {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return tensors[i];
  std::string keys;
  for (const auto& n : names) keys += (keys.empty() ? "" : ", ") + n;
  return NotFound("element has no component '" + std::string(name) + "' (it has: " +
                  (keys.empty() ? "a tuple of " + std::to_string(size()) + " without names" : keys) + ")");
}

size_t Element::nbytes() const {
  size_t n = 0;
  for (const auto& t : tensors) n += t.defined() ? t.nbytes() : 0;
  return n;
}

std::string Element::DebugString() const {
  std::string s = is_dict() ? "{" : "(";
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i) s += ", ";
    if (is_dict()) s += names[i] + ": ";
    s += tensors[i].DebugString();
  }
  return s + (is_dict() ? "}" : ")");
}

Tensor StringTensor(std::string_view s) {
  Tensor t = Tensor::Empty(DType::kU8, Shape{static_cast<int64_t>(s.size())});  // every byte is written
  if (!s.empty()) std::memcpy(t.raw_data(), s.data(), s.size());
  return t;
}

Result<std::string> TensorToString(const Tensor& t) {
  if (t.dtype() != DType::kU8 || t.rank() > 1)
    return InvalidArgument("expected a byte string (u8 of rank 0 or 1), got " + t.DebugString());
  Tensor c = t.Contiguous();
  return std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
}

}  // namespace strata::data
