// Fuzzes `strata records write`'s JSON-lines input (tools/strata/jsonl_example.h
// ExampleFromJsonLine): any line must give an Example or an InvalidArgument error, never a
// crash, an exception or undefined behaviour. An Example that parses must encode, and decode
// back to the same features (the bytes the command writes are a valid tf.train.Example), and
// every float is finite (a number beyond float's range is an error, not inf).
// Base64 is checked on its own: Decode(Encode(x)) == x for the input's bytes.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../tools/strata/jsonl_example.h"
#include "strata/record/example.h"

using namespace strata;

static void Check(bool ok) {
  if (!ok) std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  std::string raw;
  Check(cli::Base64Decode(cli::Base64Encode(line), &raw) && raw == line);
  auto ex = cli::ExampleFromJsonLine(line);
  if (!ex.ok()) {
    Check(ex.status().code() == StatusCode::kInvalidArgument);
    return 0;
  }
  // JSON has no inf or nan: a float feature holding one came from a number float cannot hold.
  for (const auto& [key, f] : ex->features)
    for (float v : f.floats) Check(std::isfinite(v));
  const std::string bytes = record::EncodeExample(*ex);
  auto back = record::DecodeExample(bytes);
  Check(back.ok() && back->features.size() == ex->features.size());
  for (const auto& [key, f] : ex->features) {
    auto it = back->features.find(key);
    Check(it != back->features.end() && it->second == f);
  }
  return 0;
}
