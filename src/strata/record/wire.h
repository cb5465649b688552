// Protocol-buffer wire format, the little of it the Example and Event codecs need.
//
//   message := field*          field := tag value        tag := varint(number << 3 | wire_type)
//   wire_type 0 varint, 1 fixed64, 2 length-delimited (varint length + bytes), 3/4 group
//   start/end (deprecated, skipped), 5 fixed32. Fields may come in any order and repeat;
//   unknown fields are skipped. A repeated scalar may be "packed" (one length-delimited
//   field holding the values back to back) or not (one field per value).
// Every reader here checks each length against the bytes that remain before using it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace strata::record::wire {

enum WireType : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// All readers advance `p` and return false on malformed or short input.
inline bool ReadVarint(const char*& p, const char* end, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 70 && p < end; shift += 7) {
    uint8_t b = static_cast<uint8_t>(*p++);
    if (shift == 63 && b > 1) return false;  // more than 64 bits
    result |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

inline bool ReadTag(const char*& p, const char* end, uint32_t* field, int* wire_type) {
  uint64_t t;
  if (!ReadVarint(p, end, &t) || t > 0xffffffffu) return false;
  *field = static_cast<uint32_t>(t >> 3);
  *wire_type = static_cast<int>(t & 7);
  return *field != 0;
}

inline bool ReadLengthDelimited(const char*& p, const char* end, std::string_view* out) {
  uint64_t len;
  if (!ReadVarint(p, end, &len) || len > static_cast<uint64_t>(end - p)) return false;
  *out = std::string_view(p, static_cast<size_t>(len));
  p += len;
  return true;
}

inline bool ReadFixed32(const char*& p, const char* end, uint32_t* v) {
  if (end - p < 4) return false;
  std::memcpy(v, p, 4);
  p += 4;
  return true;
}

inline bool ReadFixed64(const char*& p, const char* end, uint64_t* v) {
  if (end - p < 8) return false;
  std::memcpy(v, p, 8);
  p += 8;
  return true;
}

// Skips the value of a field whose tag was just read. Groups are skipped to their
// matching end tag, nested at most `depth` deep.
bool SkipField(const char*& p, const char* end, uint32_t field, int wire_type, int depth = 32);

inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
inline void AppendVarint(std::string* s, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  s->append(buf, n);
}
inline void AppendTag(std::string* s, uint32_t field, int wire_type) {
  AppendVarint(s, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}
inline size_t TagSize(uint32_t field) { return VarintSize(static_cast<uint64_t>(field) << 3); }
// tag + length + bytes.
inline void AppendBytesField(std::string* s, uint32_t field, std::string_view bytes) {
  AppendTag(s, field, kLengthDelimited);
  AppendVarint(s, bytes.size());
  s->append(bytes);
}
inline size_t BytesFieldSize(uint32_t field, size_t len) { return TagSize(field) + VarintSize(len) + len; }

}  // namespace strata::record::wire
