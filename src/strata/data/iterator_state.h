// Saved iterator state: a flat map from keys to byte strings.
//
// Each stage writes under its own prefix ("0/", "0/1/", ...; the prefix is the stage's
// path from the iterator's root), so nested iterators (the per-file readers inside an
// interleave, the epoch iterator inside repeat) compose without knowing each other.
//
// Serialized form (little-endian):
//
//   16 bytes "STRATA-ITERSTATE"
//   u32 entry_count
//   entry_count times: u32 key_length, key bytes, u64 value_length, value bytes
//
// Keys are unique and sorted. Parsing checks every length against the bytes remaining.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "strata/core/status.h"
#include "strata/data/element.h"

namespace strata::data {

class IteratorState {
 public:
  void SetInt(const std::string& key, int64_t v);
  void SetString(const std::string& key, std::string v);
  void SetElement(const std::string& key, const Element& e);
  void SetStatus(const std::string& key, const Status& s);

  bool Has(const std::string& key) const { return entries_.count(key) != 0; }
  Result<int64_t> GetInt(const std::string& key) const;
  Result<std::string> GetString(const std::string& key) const;
  Result<Element> GetElement(const std::string& key) const;
  // The saved Status (which may be OK) into *out; the return value is the lookup's.
  Status GetStatus(const std::string& key, Status* out) const;

  std::string Serialize() const;
  static Result<IteratorState> Parse(std::string_view bytes);
  size_t size() const { return entries_.size(); }

 private:
  std::map<std::string, std::string> entries_;
};

}  // namespace strata::data
