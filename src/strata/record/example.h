// tf.train.Example and tf.train.SequenceExample (tensorflow/core/example/{example,feature}.proto).
//
//   Example         { Features features = 1; }
//   SequenceExample { Features context = 1; FeatureLists feature_lists = 2; }
//   Features        { map<string, Feature> feature = 1; }     // entry: { key = 1; value = 2; }
//   FeatureLists    { map<string, FeatureList> feature_list = 1; }
//   FeatureList     { repeated Feature feature = 1; }
//   Feature         { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
//                                  Int64List int64_list = 3; } }   // none set = "empty"
//   BytesList { repeated bytes value = 1; }
//   FloatList { repeated float value = 1 [packed = true]; }  // fixed32, little-endian
//   Int64List { repeated int64 value = 1 [packed = true]; }  // varint, two's complement
//
// Readers accept what protobuf accepts: packed and unpacked lists, fields in any order,
// repeated messages merged (a map key seen twice: the last wins), unknown fields skipped.
// Writers emit what protobuf's deterministic serialization emits (keys sorted, lists
// packed), so files round-trip byte for byte. docs/formats/example.md has a worked example.
//
// This header is the simple, allocating form (one object per feature) for tools, tests and
// writing. The training input path uses ExampleParser (example_parser.h), which parses
// straight into preallocated typed buffers.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/status.h"

namespace strata::record {

enum class FeatureKind { kNone, kBytes, kFloat, kInt64 };
// "empty", "bytes", "float", "int64".
std::string_view FeatureKindName(FeatureKind kind);

struct Feature {
  FeatureKind kind = FeatureKind::kNone;
  std::vector<std::string> bytes;  // kind == kBytes
  std::vector<float> floats;       // kind == kFloat
  std::vector<int64_t> int64s;     // kind == kInt64

  static Feature Bytes(std::vector<std::string> v) { return {FeatureKind::kBytes, std::move(v), {}, {}}; }
  static Feature Floats(std::vector<float> v) { return {FeatureKind::kFloat, {}, std::move(v), {}}; }
  static Feature Int64s(std::vector<int64_t> v) { return {FeatureKind::kInt64, {}, {}, std::move(v)}; }
  size_t size() const;  // number of values
  bool operator==(const Feature&) const = default;
};

using Features = std::map<std::string, Feature>;  // sorted: deterministic encoding

struct Example {
  Features features;
  bool operator==(const Example&) const = default;
};

struct SequenceExample {
  Features context;
  std::map<std::string, std::vector<Feature>> feature_lists;
  bool operator==(const SequenceExample&) const = default;
};

// Decoders: errors are Corruption naming the feature key where one is known; callers add
// the file and record ("in train.tfrecord record 12 at byte 3456").
Status DecodeExample(std::string_view serialized, Example* out);
Status DecodeSequenceExample(std::string_view serialized, SequenceExample* out);
Result<Example> DecodeExample(std::string_view serialized);
Result<SequenceExample> DecodeSequenceExample(std::string_view serialized);

std::string EncodeExample(const Example& example);
std::string EncodeSequenceExample(const SequenceExample& example);

// Builds a serialized Example feature by feature without building an Example first (the
// writer side of make-records): no allocation once its buffers have grown. Features are
// written in the order added; a key added twice is written twice (the reader keeps the
// last).
class ExampleBuilder {
 public:
  void Clear() { body_.clear(); }
  void AddBytes(std::string_view key, std::span<const std::string_view> values);
  void AddBytes(std::string_view key, std::string_view value) { AddBytes(key, std::span(&value, 1)); }
  void AddFloats(std::string_view key, std::span<const float> values);
  void AddInt64s(std::string_view key, std::span<const int64_t> values);
  // The serialized Example; valid until the builder changes.
  std::string_view Finish();

 private:
  void AddEntry(std::string_view key, uint32_t kind_field, size_t list_size);
  std::string body_;  // Features payload: map entries
  std::string out_;
};

}  // namespace strata::record

#pragma GCC visibility pop
