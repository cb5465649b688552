#include "strata/record/example.h"

#include <cstring>

#include "strata/record/feature_values.h"
#include "strata/record/wire.h"

namespace strata::record {

std::string_view FeatureKindName(FeatureKind kind) {
  switch (kind) {
    case FeatureKind::kNone: return "empty";
    case FeatureKind::kBytes: return "bytes";
    case FeatureKind::kFloat: return "float";
    case FeatureKind::kInt64: return "int64";
  }
  return "?";
}

size_t Feature::size() const {
  switch (kind) {
    case FeatureKind::kBytes: return bytes.size();
    case FeatureKind::kFloat: return floats.size();
    case FeatureKind::kInt64: return int64s.size();
    case FeatureKind::kNone: break;
  }
  return 0;
}

namespace {

struct VectorSink {
  Feature* f;
  bool Floats(const char* p, size_t n) {
    size_t old = f->floats.size();
    f->floats.resize(old + n);
    std::memcpy(f->floats.data() + old, p, n * 4);
    return true;
  }
  bool Int64(int64_t v) {
    f->int64s.push_back(v);
    return true;
  }
  bool Bytes(std::string_view v) {
    f->bytes.emplace_back(v);
    return true;
  }
};

Status DecodeFeature(std::string_view serialized, std::string_view key, Feature* out) {
  *out = Feature{};
  VectorSink sink{out};
  return internal::ReadFeature(serialized, key, &out->kind, sink);
}

Status DecodeFeatures(std::string_view message, Features* out) {
  std::string scratch;
  return internal::ForEachMapEntry(message, "Features", &scratch, [&](std::string_view key, std::string_view value) {
    return DecodeFeature(value, key, &(*out)[std::string(key)]);
  });
}

// ---- encoding (protobuf's deterministic form) ----------------------------------------
size_t ListSize(const Feature& f) {
  switch (f.kind) {
    case FeatureKind::kBytes: {
      size_t n = 0;
      for (const auto& b : f.bytes) n += wire::BytesFieldSize(1, b.size());
      return n;
    }
    case FeatureKind::kFloat:
      return f.floats.empty() ? 0 : wire::BytesFieldSize(1, 4 * f.floats.size());
    case FeatureKind::kInt64: {
      if (f.int64s.empty()) return 0;
      size_t n = 0;
      for (int64_t v : f.int64s) n += wire::VarintSize(static_cast<uint64_t>(v));
      return wire::BytesFieldSize(1, n);
    }
    case FeatureKind::kNone: break;
  }
  return 0;
}

size_t FeatureSize(const Feature& f) { return f.kind == FeatureKind::kNone ? 0 : wire::BytesFieldSize(1, ListSize(f)); }

void AppendFeature(std::string* s, const Feature& f) {
  if (f.kind == FeatureKind::kNone) return;
  uint32_t field = f.kind == FeatureKind::kBytes ? 1 : f.kind == FeatureKind::kFloat ? 2 : 3;
  wire::AppendTag(s, field, wire::kLengthDelimited);
  wire::AppendVarint(s, ListSize(f));
  switch (f.kind) {
    case FeatureKind::kBytes:
      for (const auto& b : f.bytes) wire::AppendBytesField(s, 1, b);
      break;
    case FeatureKind::kFloat:
      if (!f.floats.empty())
        wire::AppendBytesField(
            s, 1, std::string_view(reinterpret_cast<const char*>(f.floats.data()), 4 * f.floats.size()));
      break;
    case FeatureKind::kInt64:
      if (!f.int64s.empty()) {
        size_t n = 0;
        for (int64_t v : f.int64s) n += wire::VarintSize(static_cast<uint64_t>(v));
        wire::AppendTag(s, 1, wire::kLengthDelimited);
        wire::AppendVarint(s, n);
        for (int64_t v : f.int64s) wire::AppendVarint(s, static_cast<uint64_t>(v));
      }
      break;
    case FeatureKind::kNone: break;
  }
}

size_t EntrySize(const std::string& key, size_t value_size) {
  return wire::BytesFieldSize(1, key.size()) + wire::BytesFieldSize(2, value_size);
}

void AppendFeatures(std::string* s, const Features& features) {
  for (const auto& [key, f] : features) {
    size_t fs = FeatureSize(f);
    wire::AppendTag(s, 1, wire::kLengthDelimited);
    wire::AppendVarint(s, EntrySize(key, fs));
    wire::AppendBytesField(s, 1, key);
    wire::AppendTag(s, 2, wire::kLengthDelimited);
    wire::AppendVarint(s, fs);
    AppendFeature(s, f);
  }
}

size_t FeaturesSize(const Features& features) {
  size_t n = 0;
  for (const auto& [key, f] : features) n += wire::BytesFieldSize(1, EntrySize(key, FeatureSize(f)));
  return n;
}

}  // namespace

Status DecodeExample(std::string_view serialized, Example* out) {
  out->features.clear();
  return internal::ForEachMessageField(serialized, 1, "Example",
                                       [&](std::string_view features) { return DecodeFeatures(features, &out->features); });
}

Result<Example> DecodeExample(std::string_view serialized) {
  Example e;
  STRATA_RETURN_IF_ERROR(DecodeExample(serialized, &e));
  return e;
}

Status DecodeSequenceExample(std::string_view serialized, SequenceExample* out) {
  out->context.clear();
  out->feature_lists.clear();
  const char* p = serialized.data();
  const char* end = p + serialized.size();
  std::string scratch;
  while (p < end) {
    uint32_t field;
    int wt;
    if (!wire::ReadTag(p, end, &field, &wt)) return Corruption("malformed SequenceExample (bad tag)");
    if ((field == 1 || field == 2) && wt == wire::kLengthDelimited) {
      std::string_view v;
      if (!wire::ReadLengthDelimited(p, end, &v)) return Corruption("SequenceExample field runs past its end");
      if (field == 1) {
        STRATA_RETURN_IF_ERROR(DecodeFeatures(v, &out->context));
      } else {
        STRATA_RETURN_IF_ERROR(internal::ForEachMapEntry(
            v, "FeatureLists", &scratch, [&](std::string_view key, std::string_view list) {
              auto& steps = out->feature_lists[std::string(key)];
              steps.clear();
              return internal::ForEachMessageField(list, 1, "FeatureList", [&](std::string_view feature) {
                steps.emplace_back();
                return DecodeFeature(feature, key, &steps.back());
              });
            }));
      }
      continue;
    }
    if (!wire::SkipField(p, end, field, wt)) return Corruption("malformed SequenceExample (truncated field)");
  }
  return Status::OK();
}

Result<SequenceExample> DecodeSequenceExample(std::string_view serialized) {
  SequenceExample e;
  STRATA_RETURN_IF_ERROR(DecodeSequenceExample(serialized, &e));
  return e;
}

std::string EncodeExample(const Example& example) {
  std::string s;
  size_t n = FeaturesSize(example.features);
  s.reserve(n + 8);
  wire::AppendTag(&s, 1, wire::kLengthDelimited);
  wire::AppendVarint(&s, n);
  AppendFeatures(&s, example.features);
  return s;
}

std::string EncodeSequenceExample(const SequenceExample& example) {
  std::string s;
  if (!example.context.empty()) {
    wire::AppendTag(&s, 1, wire::kLengthDelimited);
    wire::AppendVarint(&s, FeaturesSize(example.context));
    AppendFeatures(&s, example.context);
  }
  if (!example.feature_lists.empty()) {
    size_t lists = 0;
    auto list_size = [](const std::vector<Feature>& steps) {
      size_t n = 0;
      for (const auto& f : steps) n += wire::BytesFieldSize(1, FeatureSize(f));
      return n;
    };
    for (const auto& [key, steps] : example.feature_lists)
      lists += wire::BytesFieldSize(1, EntrySize(key, list_size(steps)));
    wire::AppendTag(&s, 2, wire::kLengthDelimited);
    wire::AppendVarint(&s, lists);
    for (const auto& [key, steps] : example.feature_lists) {
      size_t ls = list_size(steps);
      wire::AppendTag(&s, 1, wire::kLengthDelimited);
      wire::AppendVarint(&s, EntrySize(key, ls));
      wire::AppendBytesField(&s, 1, key);
      wire::AppendTag(&s, 2, wire::kLengthDelimited);
      wire::AppendVarint(&s, ls);
      for (const auto& f : steps) {
        wire::AppendTag(&s, 1, wire::kLengthDelimited);
        wire::AppendVarint(&s, FeatureSize(f));
        AppendFeature(&s, f);
      }
    }
  }
  return s;
}

// ---- ExampleBuilder --------------------------------------------------------------------
void ExampleBuilder::AddEntry(std::string_view key, uint32_t kind_field, size_t list_size) {
  size_t feature = wire::BytesFieldSize(kind_field, list_size);
  size_t entry = wire::BytesFieldSize(1, key.size()) + wire::BytesFieldSize(2, feature);
  wire::AppendTag(&body_, 1, wire::kLengthDelimited);
  wire::AppendVarint(&body_, entry);
  wire::AppendBytesField(&body_, 1, key);
  wire::AppendTag(&body_, 2, wire::kLengthDelimited);
  wire::AppendVarint(&body_, feature);
  wire::AppendTag(&body_, kind_field, wire::kLengthDelimited);
  wire::AppendVarint(&body_, list_size);
}

void ExampleBuilder::AddBytes(std::string_view key, std::span<const std::string_view> values) {
  size_t n = 0;
  for (auto v : values) n += wire::BytesFieldSize(1, v.size());
  AddEntry(key, 1, n);
  for (auto v : values) wire::AppendBytesField(&body_, 1, v);
}

void ExampleBuilder::AddFloats(std::string_view key, std::span<const float> values) {
  size_t bytes = 4 * values.size();
  AddEntry(key, 2, values.empty() ? 0 : wire::BytesFieldSize(1, bytes));
  if (!values.empty())
    wire::AppendBytesField(&body_, 1, std::string_view(reinterpret_cast<const char*>(values.data()), bytes));
}

void ExampleBuilder::AddInt64s(std::string_view key, std::span<const int64_t> values) {
  size_t n = 0;
  for (int64_t v : values) n += wire::VarintSize(static_cast<uint64_t>(v));
  AddEntry(key, 3, values.empty() ? 0 : wire::BytesFieldSize(1, n));
  if (!values.empty()) {
    wire::AppendTag(&body_, 1, wire::kLengthDelimited);
    wire::AppendVarint(&body_, n);
    for (int64_t v : values) wire::AppendVarint(&body_, static_cast<uint64_t>(v));
  }
}

std::string_view ExampleBuilder::Finish() {
  out_.clear();
  wire::AppendTag(&out_, 1, wire::kLengthDelimited);
  wire::AppendVarint(&out_, body_.size());
  out_.append(body_);
  return out_;
}

}  // namespace strata::record
