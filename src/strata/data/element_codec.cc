#include "strata/data/element_codec.h"

#include <cstring>
#include <limits>

namespace strata::data {
namespace {
constexpr uint32_t kMaxComponents = 4096;
constexpr uint32_t kMaxNameLength = 4096;
constexpr int kMaxRank = 8;

// The one little-endian layout of the fixed-width integers below, whatever their width.
template <typename T>
void PutFixed(std::string* out, T v) {
  char b[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, sizeof(T));
}

template <typename T>
bool GetFixed(std::string_view* in, T* v) {
  if (in->size() < sizeof(T)) return false;
  T r = 0;
  for (size_t i = 0; i < sizeof(T); ++i) r |= static_cast<T>(static_cast<uint8_t>((*in)[i])) << (8 * i);
  *v = r;
  in->remove_prefix(sizeof(T));
  return true;
}
}  // namespace

void PutFixed32(std::string* out, uint32_t v) { PutFixed(out, v); }
void PutFixed64(std::string* out, uint64_t v) { PutFixed(out, v); }
bool GetFixed32(std::string_view* in, uint32_t* v) { return GetFixed(in, v); }
bool GetFixed64(std::string_view* in, uint64_t* v) { return GetFixed(in, v); }

void EncodeElement(const Element& e, std::string* out) {
  PutFixed32(out, static_cast<uint32_t>(e.size()));
  out->push_back(e.is_dict() ? 1 : 0);
  for (size_t i = 0; i < e.size(); ++i) {
    if (e.is_dict()) {
      PutFixed32(out, static_cast<uint32_t>(e.names[i].size()));
      out->append(e.names[i]);
    }
    const Tensor t = e.tensors[i].defined() ? e.tensors[i].Contiguous() : Tensor(DType::kF32, Shape{0});
    out->push_back(static_cast<char>(t.dtype()));
    out->push_back(static_cast<char>(t.rank()));
    for (int d = 0; d < t.rank(); ++d) PutFixed64(out, static_cast<uint64_t>(t.shape().dim(d)));
    PutFixed64(out, t.nbytes());
    out->append(static_cast<const char*>(t.raw_data()), t.nbytes());
  }
}

Status DecodeElement(std::string_view* in, Element* out, std::string_view what) {
  const size_t start_size = in->size();
  auto err = [&](const std::string& m) {
    return Corruption(std::string(what) + ": " + m + " at element byte " + std::to_string(start_size - in->size()));
  };
  uint32_t n = 0;
  if (!GetFixed32(in, &n)) return err("truncated component count");
  if (n > kMaxComponents) return err("component count " + std::to_string(n) + " exceeds " + std::to_string(kMaxComponents));
  if (in->empty()) return err("truncated has_names flag");
  const uint8_t has_names = static_cast<uint8_t>((*in)[0]);
  in->remove_prefix(1);
  if (has_names > 1) return err("has_names flag is " + std::to_string(has_names));
  out->tensors.clear();
  out->names.clear();
  for (uint32_t i = 0; i < n; ++i) {
    const std::string comp = " of component " + std::to_string(i);
    if (has_names) {
      uint32_t len = 0;
      if (!GetFixed32(in, &len)) return err("truncated name length" + comp);
      if (len > kMaxNameLength || len > in->size()) return err("name length " + std::to_string(len) + " too large" + comp);
      out->names.emplace_back(in->substr(0, len));
      in->remove_prefix(len);
    }
    if (in->size() < 2) return err("truncated dtype/rank" + comp);
    const uint8_t dt = static_cast<uint8_t>((*in)[0]);
    const uint8_t rank = static_cast<uint8_t>((*in)[1]);
    in->remove_prefix(2);
    if (dt > static_cast<uint8_t>(DType::kU8)) return err("unknown dtype " + std::to_string(dt) + comp);
    if (rank > kMaxRank) return err("rank " + std::to_string(rank) + " exceeds " + std::to_string(kMaxRank) + comp);
    const DType dtype = static_cast<DType>(dt);
    std::vector<int64_t> dims(rank);
    uint64_t elements = 1;
    bool overflow = false;
    for (int d = 0; d < rank; ++d) {
      uint64_t v = 0;
      if (!GetFixed64(in, &v)) return err("truncated dims" + comp);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return err("negative dimension" + comp);
      dims[d] = static_cast<int64_t>(v);
      if (v != 0 && elements > std::numeric_limits<uint64_t>::max() / v) overflow = true;
      elements *= v;
    }
    uint64_t payload = 0;
    if (!GetFixed64(in, &payload)) return err("truncated payload size" + comp);
    if (overflow || elements > std::numeric_limits<uint64_t>::max() / DTypeSize(dtype) ||
        payload != elements * DTypeSize(dtype))
      return err("payload size " + std::to_string(payload) + " does not match shape " + Shape(dims).ToString() + comp);
    if (payload > in->size())
      return err("payload of " + std::to_string(payload) + " bytes but only " + std::to_string(in->size()) + " remain" + comp);
    Tensor t(dtype, Shape(std::move(dims)));
    if (payload) std::memcpy(t.raw_data(), in->data(), payload);
    in->remove_prefix(payload);
    out->tensors.push_back(std::move(t));
  }
  return Status::OK();
}

}  // namespace strata::data
