#include "strata/data/iterator_state.h"

#include "strata/data/element_codec.h"

namespace strata::data {
namespace {
constexpr std::string_view kMagic = "STRATA-ITERSTATE";
}

void IteratorState::SetInt(const std::string& key, int64_t v) {
  std::string s;
  PutFixed64(&s, static_cast<uint64_t>(v));
  entries_[key] = std::move(s);
}

void IteratorState::SetString(const std::string& key, std::string v) { entries_[key] = std::move(v); }

void IteratorState::SetElement(const std::string& key, const Element& e) {
  std::string s;
  EncodeElement(e, &s);
  entries_[key] = std::move(s);
}

void IteratorState::SetStatus(const std::string& key, const Status& st) {
  std::string s;
  PutFixed32(&s, static_cast<uint32_t>(st.code()));
  s += st.message();
  entries_[key] = std::move(s);
}

Result<std::string> IteratorState::GetString(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return NotFound("iterator state has no key '" + key + "'");
  return it->second;
}

Result<int64_t> IteratorState::GetInt(const std::string& key) const {
  STRATA_ASSIGN_OR_RETURN(std::string s, GetString(key));
  std::string_view v = s;
  uint64_t u = 0;
  if (s.size() != 8 || !GetFixed64(&v, &u)) return Corruption("iterator state key '" + key + "' is not an integer");
  return static_cast<int64_t>(u);
}

Result<Element> IteratorState::GetElement(const std::string& key) const {
  STRATA_ASSIGN_OR_RETURN(std::string s, GetString(key));
  std::string_view v = s;
  Element e;
  STRATA_RETURN_IF_ERROR(DecodeElement(&v, &e, "iterator state key '" + key + "'"));
  if (!v.empty()) return Corruption("iterator state key '" + key + "' has trailing bytes");
  return e;
}

Status IteratorState::GetStatus(const std::string& key, Status* out) const {
  STRATA_ASSIGN_OR_RETURN(std::string s, GetString(key));
  std::string_view v = s;
  uint32_t code = 0;
  if (!GetFixed32(&v, &code) || code > static_cast<uint32_t>(StatusCode::kInternal))
    return Corruption("iterator state key '" + key + "' is not a status");
  *out = code == 0 ? Status::OK() : Status(static_cast<StatusCode>(code), std::string(v));
  return Status::OK();
}

std::string IteratorState::Serialize() const {
  std::string out(kMagic);
  PutFixed32(&out, static_cast<uint32_t>(entries_.size()));
  for (const auto& [k, v] : entries_) {
    PutFixed32(&out, static_cast<uint32_t>(k.size()));
    out += k;
    PutFixed64(&out, v.size());
    out += v;
  }
  return out;
}

Result<IteratorState> IteratorState::Parse(std::string_view in) {
  const size_t total = in.size();
  auto err = [&](const std::string& m) {
    return Corruption("iterator state: " + m + " at byte " + std::to_string(total - in.size()));
  };
  if (in.substr(0, kMagic.size()) != kMagic) return Corruption("iterator state: bad magic (not a saved iterator state)");
  in.remove_prefix(kMagic.size());
  uint32_t n = 0;
  if (!GetFixed32(&in, &n)) return err("truncated entry count");
  IteratorState st;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t klen = 0;
    uint64_t vlen = 0;
    if (!GetFixed32(&in, &klen) || klen > in.size()) return err("bad key length in entry " + std::to_string(i));
    std::string key(in.substr(0, klen));
    in.remove_prefix(klen);
    if (!GetFixed64(&in, &vlen) || vlen > in.size()) return err("bad value length for key '" + key + "'");
    if (!st.entries_.emplace(key, std::string(in.substr(0, vlen))).second) return err("duplicate key '" + key + "'");
    in.remove_prefix(vlen);
  }
  if (!in.empty()) return err("trailing bytes");
  return st;
}

}  // namespace strata::data
