// Fuzzes the Example / SequenceExample decoders and the spec-driven parser.
// Invariants: no crash or sanitizer report; decode -> encode is a fixed point after one
// round; the fast parser agrees value for value with the allocating decoder.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "strata/record/example.h"
#include "strata/record/example_parser.h"

using namespace strata;
using namespace strata::record;

static void Check(bool ok) {
  if (!ok) std::abort();
}

static const ExampleParser& Parser() {
  static const ExampleParser p = *ExampleParser::Create(
      {{.key = "a", .type = FeatureKind::kFloat, .var_len = true},
       {.key = "b", .type = FeatureKind::kInt64, .var_len = true},
       {.key = "c", .type = FeatureKind::kBytes, .var_len = true},
       {.key = "species", .type = FeatureKind::kInt64, .has_default = true, .default_int64s = {0}},
       {.key = "x_float", .type = FeatureKind::kFloat, .shape = {10}, .has_default = true, .default_floats = {0}}},
      {{.key = "s", .type = FeatureKind::kBytes, .var_len = true},
       {.key = "frames", .type = FeatureKind::kFloat, .shape = {2}}});
  return p;
}

static void CheckAgrees(const Features& fs, const ParsedExample& out) {
  const auto& spec = Parser().features();
  for (size_t i = 0; i < 3; ++i) {
    auto it = fs.find(spec[i].key);
    const ParsedFeature& p = out.features[i];
    if (it == fs.end() || it->second.kind == FeatureKind::kNone) {
      Check(p.size() == 0);
      continue;
    }
    const Feature& f = it->second;
    Check(f.size() == p.size());
    if (f.kind == FeatureKind::kFloat) Check(std::memcmp(f.floats.data(), p.floats.data(), 4 * f.floats.size()) == 0);
    if (f.kind == FeatureKind::kInt64) Check(f.int64s == p.int64s);
    if (f.kind == FeatureKind::kBytes)
      for (size_t k = 0; k < f.bytes.size(); ++k) Check(f.bytes[k] == p.bytes[k]);
  }
}

static bool KindsMatch(const Features& fs) {
  const auto& spec = Parser().features();
  for (const auto& s : spec) {
    auto it = fs.find(s.key);
    if (it != fs.end() && it->second.kind != FeatureKind::kNone && it->second.kind != s.type) return false;
  }
  return true;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  ParsedExample out;

  Example ex;
  if (DecodeExample(in, &ex).ok()) {
    std::string once = EncodeExample(ex);
    auto again = DecodeExample(once);
    Check(again.ok());
    Check(EncodeExample(*again) == once);
    Status st = Parser().Parse(in, &out);
    // The parser may reject a fixed feature of the wrong size; var-len ones always agree.
    if (st.ok()) CheckAgrees(ex.features, out);
    else Check(!KindsMatch(ex.features) || st.code() == StatusCode::kInvalidArgument);
  } else {
    (void)Parser().Parse(in, &out);
  }

  SequenceExample se;
  if (DecodeSequenceExample(in, &se).ok()) {
    std::string once = EncodeSequenceExample(se);
    auto again = DecodeSequenceExample(once);
    Check(again.ok());
    Check(EncodeSequenceExample(*again) == once);
  }
  (void)Parser().ParseSequence(in, &out);

  ExampleBuilder b;  // the builder's bytes always decode
  b.AddBytes("c", in.substr(0, 16));
  b.AddInt64s("b", {reinterpret_cast<const int64_t*>(data), size / 8 > 4 ? 4 : size / 8});
  Check(DecodeExample(b.Finish()).ok());
  return 0;
}
