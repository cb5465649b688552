// Fuzzes the Event decoder. Invariants: no crash or sanitizer report; decode -> encode is
// a fixed point after one round.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "strata/record/event.h"

using namespace strata;
using namespace strata::record;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  Event e;
  if (!DecodeEvent(in, &e).ok()) return 0;
  std::string once = EncodeEvent(e);
  Event e2;
  if (!DecodeEvent(once, &e2).ok()) std::abort();
  if (EncodeEvent(e2) != once) std::abort();
  for (const auto& v : e2.summary) {
    double d;
    (void)v.tensor.ScalarValue(&d);
  }
  return 0;
}
