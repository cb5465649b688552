// Fuzzes RecordReader over arbitrary bytes in every compression mode and error mode.
// Invariants: no crash, no sanitizer report, no record larger than the input could hold
// (uncompressed), every outcome one of the documented codes, and errors sticky.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "strata/record/record_reader.h"

using namespace strata;
using namespace strata::record;

static void Check(bool ok) {
  if (!ok) std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const Compression modes[] = {Compression::kAuto, Compression::kNone, Compression::kZlib, Compression::kGzip};
  for (Compression c : modes) {
    for (int mode = 0; mode < 3; ++mode) {
      RecordReaderOptions o;
      o.compression = c;
      o.stop_at_truncated_tail = mode == 1;
      o.ignore_errors = mode == 2;
      o.buffer_bytes = 4096;                    // exercise compaction and growth
      o.max_record_bytes = uint64_t{1} << 24;  // compressed streams may expand
      int reports = 0;
      o.reporter = [&](const Status& s) { Check(!s.ok()); ++reports; };
      auto r = RecordReader::Open(NewMemoryFile("fuzz", bytes), o);
      if (!r.ok()) continue;
      std::string_view v;
      Status st;
      int64_t n = 0;
      while ((st = (*r)->ReadRecord(&v)).ok()) {
        if ((*r)->compression() == Compression::kNone) Check(v.size() + 16 <= size);
        if (++n > 1000000) break;
      }
      StatusCode code = st.code();
      Check(st.ok() || code == StatusCode::kOutOfRange || code == StatusCode::kTruncated ||
            code == StatusCode::kCorruption);
      if (o.ignore_errors) Check(st.ok() || code == StatusCode::kOutOfRange);
      if (!st.ok()) Check((*r)->ReadRecord(&v).code() == code);  // sticky
      Check((*r)->stats().records == n);
    }
  }
  return 0;
}
