// Where each record of an uncompressed TFRecord file ends, read from the framing's lengths alone
// (record/tfrecord_format.h: u64 length, u32 CRC of it, data, u32 CRC of the data): for tests
// that cut or damage a file at or inside a record. The last entry may lie past the bytes when
// the file is cut short.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "strata/record/tfrecord_format.h"

namespace strata::testing {

inline std::vector<size_t> RecordEnds(const std::string& bytes) {
  std::vector<size_t> ends;
  for (size_t at = 0; at + record::kLengthSize <= bytes.size();) {
    uint64_t length = 0;
    std::memcpy(&length, bytes.data() + at, record::kLengthSize);
    at += record::kHeaderSize + length + record::kFooterSize;
    ends.push_back(at);
  }
  return ends;
}

}  // namespace strata::testing
