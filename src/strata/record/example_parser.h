// ExampleParser: the input pipeline's fast path from serialized tf.train.Example (or
// SequenceExample) bytes to typed values, driven by a parse spec like TensorFlow's
// tf.io.parse_example: FixedLenFeature(shape, default) and VarLenFeature.
//
//   ExampleParser parser = *ExampleParser::Create({
//       {.key = "image/encoded", .type = FeatureKind::kBytes},                  // scalar bytes
//       {.key = "label", .type = FeatureKind::kInt64, .has_default = true, .default_int64s = {-1}},
//       {.key = "bbox", .type = FeatureKind::kFloat, .var_len = true},
//   });
//   ParsedExample out;                       // reuse across records: no allocation once warm
//   STRATA_RETURN_IF_ERROR(parser.Parse(record, &out));
//   float* bbox = out[2].floats.data();      // out[i] follows the spec's order
//
// The wire bytes are walked once; values of features in the spec are written straight into
// the ParsedExample's typed vectors (packed floats with one memcpy), bytes values are views
// into the record (valid while the record is). Features not in the spec are skipped without
// being decoded. Errors are Corruption or InvalidArgument naming the feature key: a missing
// required feature, the wrong type, the wrong number of values for a fixed shape.
//
// A present Feature message with no list set ("empty", as TFX writes missing CSV cells)
// counts as missing: a fixed feature takes its default (or fails without one); a var-len
// feature has zero values.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/status.h"
#include "strata/record/example.h"

namespace strata::record {

struct FeatureSpec {
  std::string key;
  FeatureKind type = FeatureKind::kFloat;  // kBytes, kFloat or kInt64
  // VarLenFeature: any number of values (also per step of a sequence feature).
  bool var_len = false;
  // FixedLenFeature: the value shape; its element count is the number of values required
  // ({} = a scalar, 1 value). For a sequence feature: the shape of one step.
  std::vector<int64_t> shape;
  // Fixed features only: used when the key is absent. One value (broadcast) or one per
  // element. Without a default, a missing fixed feature is an error.
  bool has_default = false;
  std::vector<float> default_floats;
  std::vector<int64_t> default_int64s;
  std::vector<std::string> default_bytes;
};

struct ParsedFeature {
  FeatureKind type = FeatureKind::kFloat;
  std::vector<float> floats;               // type kFloat
  std::vector<int64_t> int64s;             // type kInt64
  std::vector<std::string_view> bytes;     // type kBytes: views into the record (or spec defaults)
  bool from_default = false;               // fixed: the key was missing, defaults filled in
  // Sequence features: steps (Features in the FeatureList) and, for var_len, the number
  // of values in each step. Fixed sequence values are [steps, shape...] row-major.
  int64_t steps = 0;
  std::vector<int64_t> step_lengths;
  size_t size() const;
};

struct ParsedExample {
  std::vector<ParsedFeature> features;  // context features, spec order
  std::vector<ParsedFeature> sequences; // SequenceExample feature_lists, sequence-spec order
  const ParsedFeature& operator[](size_t i) const { return features[i]; }
  std::vector<uint8_t> seen;            // parser's scratch: which features a record held
};

class ExampleParser {
 public:
  // `features` applies to Example features (or SequenceExample context); `sequences` to
  // SequenceExample feature_lists. Refuses duplicate keys, bad shapes, defaults of the wrong
  // size or type.
  static Result<ExampleParser> Create(std::vector<FeatureSpec> features, std::vector<FeatureSpec> sequences = {});

  Status Parse(std::string_view example, ParsedExample* out) const;
  Status ParseSequence(std::string_view sequence_example, ParsedExample* out) const;

  const std::vector<FeatureSpec>& features() const { return features_; }
  const std::vector<FeatureSpec>& sequences() const { return sequences_; }
  // Index of `key` in features(), or -1.
  int FeatureIndex(std::string_view key) const { return Lookup(feature_index_, features_, key); }
  // Number of values a fixed spec requires (product of its shape).
  static int64_t NumElements(const FeatureSpec& spec);

 private:
  // Open-addressing table of spec indices (-1 = empty slot), hashed by key: holds no
  // pointers, so a copied parser stays valid.
  struct Index {
    std::vector<int> slots;
    void Build(const std::vector<FeatureSpec>& specs);
  };
  static int Lookup(const Index& index, const std::vector<FeatureSpec>& specs, std::string_view key);
  void Reset(ParsedExample* out, bool sequence) const;
  Status ParseFeatures(std::string_view features_message, ParsedExample* out, std::vector<uint8_t>* seen) const;
  Status ParseFeatureLists(std::string_view lists_message, ParsedExample* out) const;
  Status Finish(ParsedExample* out, const std::vector<uint8_t>& seen) const;

  std::vector<FeatureSpec> features_, sequences_;
  std::vector<int64_t> feature_elements_, sequence_elements_;
  Index feature_index_, sequence_index_;
};

}  // namespace strata::record

#pragma GCC visibility pop
