// Element codec: the byte layout of an Element in a cache file and in saved iterator state.
//
// All integers are little-endian. One encoded element:
//
//   u32  num_components                   at most 4096
//   u8   has_names                        0 (tuple) or 1 (dict)
//   num_components times:
//     [u32 name_length, name bytes]       only when has_names == 1; name_length <= 4096
//     u8   dtype                          DType value: 0 f32, 1 bf16, 2 i32, 3 i64, 4 u8
//     u8   rank                           at most 8
//     i64  dims[rank]                     each >= 0
//     u64  payload_bytes                  == product(dims) * dtype size
//     payload_bytes bytes                 the tensor in row-major (C) order
//
// Example: the tuple (i64[] 7) is 01 00 00 00 | 00 | 03 | 00 | 08 00.. 00 | 07 00.. 00.
//
// A cache file (cache(path)) is a header then framed elements:
//
//   8 bytes  "STRCACH1"
//   per element: u64 length, u32 crc32 (zlib) of the encoded bytes, the encoded bytes
//   trailer:     u64 0xFFFFFFFFFFFFFFFF, u64 element_count
//
// The file is written through the atomic writer, so a cache that exists is complete; the
// trailer double-checks that. Decoding checks every length against the bytes that remain
// before it allocates, and reports the offset and the field that is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/core/status.h"
#include "strata/data/element.h"

namespace strata::data {

constexpr char kCacheMagic[9] = "STRCACH1";
constexpr uint64_t kCacheTrailerMarker = ~0ull;

// Appends the encoding of `e` to `out`.
void EncodeElement(const Element& e, std::string* out);
// Decodes one element from the front of `*in` and advances it. `what` names the source in
// errors ("cache /tmp/c.bin at byte 64").
Status DecodeElement(std::string_view* in, Element* out, std::string_view what);

// Little-endian helpers shared by the state and cache code.
void PutFixed32(std::string* out, uint32_t v);
void PutFixed64(std::string* out, uint64_t v);
bool GetFixed32(std::string_view* in, uint32_t* v);
bool GetFixed64(std::string_view* in, uint64_t* v);

}  // namespace strata::data
