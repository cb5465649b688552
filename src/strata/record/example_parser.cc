#include "strata/record/example_parser.h"

#include <cstring>

#include "strata/record/feature_values.h"
#include "strata/record/wire.h"

namespace strata::record {
namespace {

uint64_t HashKey(std::string_view key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : key) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

// Writes at most `cap` values into preallocated vectors; counts all of them.
struct FixedSink {
  ParsedFeature* f;
  size_t base;  // first slot of this feature (or step)
  size_t cap;
  size_t count = 0;
  bool Floats(const char* p, size_t n) {
    if (count + n > cap) {
      count += n;
      return false;
    }
    std::memcpy(f->floats.data() + base + count, p, n * 4);
    count += n;
    return true;
  }
  bool Int64(int64_t v) {
    if (count >= cap) {
      ++count;
      return false;
    }
    f->int64s[base + count++] = v;
    return true;
  }
  bool Bytes(std::string_view v) {
    if (count >= cap) {
      ++count;
      return false;
    }
    f->bytes[base + count++] = v;
    return true;
  }
};

struct AppendSink {
  ParsedFeature* f;
  size_t count = 0;
  bool Floats(const char* p, size_t n) {
    size_t old = f->floats.size();
    f->floats.resize(old + n);
    std::memcpy(f->floats.data() + old, p, n * 4);
    count += n;
    return true;
  }
  bool Int64(int64_t v) {
    f->int64s.push_back(v);
    ++count;
    return true;
  }
  bool Bytes(std::string_view v) {
    f->bytes.push_back(v);
    ++count;
    return true;
  }
};

Status WrongType(const FeatureSpec& spec, FeatureKind found) {
  return InvalidArgument("feature '" + spec.key + "': the spec says " + std::string(FeatureKindName(spec.type)) +
                         " but the record holds a " + std::string(FeatureKindName(found)) + "_list");
}

Status WrongCount(const FeatureSpec& spec, int64_t want, size_t found, const char* where) {
  std::string shape = "[";
  for (size_t i = 0; i < spec.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(spec.shape[i]);
  shape += "]";
  return InvalidArgument("feature '" + spec.key + "': shape " + shape + " needs " + std::to_string(want) + " " +
                         std::string(FeatureKindName(spec.type)) + " values" + where + ", the record has " +
                         std::to_string(found));
}

void ResizeFor(ParsedFeature* f, FeatureKind type, size_t n) {
  switch (type) {
    case FeatureKind::kFloat: f->floats.resize(n); break;
    case FeatureKind::kInt64: f->int64s.resize(n); break;
    case FeatureKind::kBytes: f->bytes.resize(n); break;
    case FeatureKind::kNone: break;
  }
}

void ClearValues(ParsedFeature* f) {
  f->floats.clear();
  f->int64s.clear();
  f->bytes.clear();
  f->step_lengths.clear();
  f->steps = 0;
  f->from_default = false;
}

}  // namespace

size_t ParsedFeature::size() const {
  switch (type) {
    case FeatureKind::kFloat: return floats.size();
    case FeatureKind::kInt64: return int64s.size();
    case FeatureKind::kBytes: return bytes.size();
    case FeatureKind::kNone: break;
  }
  return 0;
}

int64_t ExampleParser::NumElements(const FeatureSpec& spec) {
  int64_t n = 1;
  for (int64_t d : spec.shape) n *= d;
  return n;
}

void ExampleParser::Index::Build(const std::vector<FeatureSpec>& specs) {
  size_t cap = 8;
  while (cap < 2 * specs.size()) cap *= 2;
  slots.assign(cap, -1);
  for (size_t i = 0; i < specs.size(); ++i) {
    size_t h = HashKey(specs[i].key) & (cap - 1);
    while (slots[h] != -1) h = (h + 1) & (cap - 1);
    slots[h] = static_cast<int>(i);
  }
}

int ExampleParser::Lookup(const Index& index, const std::vector<FeatureSpec>& specs, std::string_view key) {
  const size_t mask = index.slots.size() - 1;
  for (size_t h = HashKey(key) & mask;; h = (h + 1) & mask) {
    int i = index.slots[h];
    if (i < 0) return -1;
    if (specs[static_cast<size_t>(i)].key == key) return i;
  }
}

Result<ExampleParser> ExampleParser::Create(std::vector<FeatureSpec> features, std::vector<FeatureSpec> sequences) {
  ExampleParser p;
  auto check = [](std::vector<FeatureSpec>& specs, std::vector<int64_t>* elements, bool sequence) -> Status {
    for (size_t i = 0; i < specs.size(); ++i) {
      auto& s = specs[i];
      if (s.type == FeatureKind::kNone) return InvalidArgument("feature '" + s.key + "': type must be bytes, float or int64");
      for (size_t j = 0; j < i; ++j)
        if (specs[j].key == s.key) return InvalidArgument("feature '" + s.key + "' appears twice in the parse spec");
      for (int64_t d : s.shape)
        if (d < 0) return InvalidArgument("feature '" + s.key + "': shape dimensions must be >= 0");
      int64_t n = NumElements(s);
      elements->push_back(n);
      if (s.var_len && (!s.shape.empty() || s.has_default))
        return InvalidArgument("feature '" + s.key + "': a var-len feature takes no shape and no default");
      if (sequence && s.has_default) return InvalidArgument("feature '" + s.key + "': sequence features take no default");
      if (s.has_default) {
        size_t given = s.type == FeatureKind::kFloat ? s.default_floats.size()
                       : s.type == FeatureKind::kInt64 ? s.default_int64s.size()
                                                        : s.default_bytes.size();
        size_t others = s.default_floats.size() + s.default_int64s.size() + s.default_bytes.size() - given;
        if (others != 0 || (given != 1 && given != static_cast<size_t>(n)))
          return InvalidArgument("feature '" + s.key + "': the default needs 1 or " + std::to_string(n) + " " +
                                 std::string(FeatureKindName(s.type)) + " values");
      }
    }
    return Status::OK();
  };
  STRATA_RETURN_IF_ERROR(check(features, &p.feature_elements_, false));
  STRATA_RETURN_IF_ERROR(check(sequences, &p.sequence_elements_, true));
  p.features_ = std::move(features);
  p.sequences_ = std::move(sequences);
  p.feature_index_.Build(p.features_);
  p.sequence_index_.Build(p.sequences_);
  return p;
}

void ExampleParser::Reset(ParsedExample* out, bool sequence) const {
  out->seen.assign(features_.size(), 0);
  out->features.resize(features_.size());
  for (size_t i = 0; i < features_.size(); ++i) {
    ParsedFeature& f = out->features[i];
    f.type = features_[i].type;
    ClearValues(&f);
  }
  out->sequences.resize(sequence ? sequences_.size() : 0);
  for (size_t i = 0; i < out->sequences.size(); ++i) {
    ParsedFeature& f = out->sequences[i];
    f.type = sequences_[i].type;
    ClearValues(&f);
  }
}

Status ExampleParser::ParseFeatures(std::string_view message, ParsedExample* out, std::vector<uint8_t>* seen) const {
  std::string scratch;  // only used when a map entry repeats its value field
  return internal::ForEachMapEntry(message, "Features", &scratch, [&](std::string_view key, std::string_view value) -> Status {
    int i = Lookup(feature_index_, features_, key);
    if (i < 0) return Status::OK();  // not asked for: not decoded
    const FeatureSpec& spec = features_[static_cast<size_t>(i)];
    ParsedFeature& f = out->features[static_cast<size_t>(i)];
    ClearValues(&f);  // a key seen again replaces the earlier entry
    (*seen)[static_cast<size_t>(i)] = 0;
    const char* from;
    FeatureKind kind;
    STRATA_RETURN_IF_ERROR(internal::ScanFeatureKind(value, spec.key, &kind, &from));
    if (kind == FeatureKind::kNone) return Status::OK();  // empty Feature: as if missing
    if (kind != spec.type) return WrongType(spec, kind);
    if (spec.var_len) {
      AppendSink sink{&f};
      STRATA_RETURN_IF_ERROR(internal::ReadFeatureValues(value, spec.key, kind, from, sink));
    } else {
      int64_t n = feature_elements_[static_cast<size_t>(i)];
      ResizeFor(&f, spec.type, static_cast<size_t>(n));
      FixedSink sink{&f, 0, static_cast<size_t>(n)};
      STRATA_RETURN_IF_ERROR(internal::ReadFeatureValues(value, spec.key, kind, from, sink));
      if (sink.count != static_cast<size_t>(n)) return WrongCount(spec, n, sink.count, "");
    }
    (*seen)[static_cast<size_t>(i)] = 1;
    return Status::OK();
  });
}

Status ExampleParser::Finish(ParsedExample* out, const std::vector<uint8_t>& seen) const {
  for (size_t i = 0; i < features_.size(); ++i) {
    if (seen[i]) continue;
    const FeatureSpec& spec = features_[i];
    ParsedFeature& f = out->features[i];
    ClearValues(&f);
    if (spec.var_len) continue;
    if (!spec.has_default) return InvalidArgument("required feature '" + spec.key + "' is missing");
    size_t n = static_cast<size_t>(feature_elements_[i]);
    f.from_default = true;
    switch (spec.type) {
      case FeatureKind::kFloat:
        f.floats.resize(n);
        for (size_t k = 0; k < n; ++k) f.floats[k] = spec.default_floats[spec.default_floats.size() == 1 ? 0 : k];
        break;
      case FeatureKind::kInt64:
        f.int64s.resize(n);
        for (size_t k = 0; k < n; ++k) f.int64s[k] = spec.default_int64s[spec.default_int64s.size() == 1 ? 0 : k];
        break;
      case FeatureKind::kBytes:
        f.bytes.resize(n);
        for (size_t k = 0; k < n; ++k) f.bytes[k] = spec.default_bytes[spec.default_bytes.size() == 1 ? 0 : k];
        break;
      case FeatureKind::kNone: break;
    }
  }
  return Status::OK();
}

Status ExampleParser::Parse(std::string_view example, ParsedExample* out) const {
  Reset(out, false);
  std::vector<uint8_t>& seen = out->seen;
  STRATA_RETURN_IF_ERROR(internal::ForEachMessageField(example, 1, "Example", [&](std::string_view features) {
    return ParseFeatures(features, out, &seen);
  }));
  return Finish(out, seen);
}

Status ExampleParser::ParseFeatureLists(std::string_view message, ParsedExample* out) const {
  std::string scratch;
  return internal::ForEachMapEntry(message, "FeatureLists", &scratch, [&](std::string_view key, std::string_view list) -> Status {
    int i = Lookup(sequence_index_, sequences_, key);
    if (i < 0) return Status::OK();
    const FeatureSpec& spec = sequences_[static_cast<size_t>(i)];
    ParsedFeature& f = out->sequences[static_cast<size_t>(i)];
    ClearValues(&f);
    const size_t per_step = static_cast<size_t>(sequence_elements_[static_cast<size_t>(i)]);
    return internal::ForEachMessageField(list, 1, "FeatureList", [&](std::string_view feature) -> Status {
      const char* from;
      FeatureKind kind;
      STRATA_RETURN_IF_ERROR(internal::ScanFeatureKind(feature, spec.key, &kind, &from));
      if (kind != FeatureKind::kNone && kind != spec.type) return WrongType(spec, kind);
      size_t count = 0;
      if (spec.var_len) {
        AppendSink sink{&f};
        if (kind != FeatureKind::kNone) STRATA_RETURN_IF_ERROR(internal::ReadFeatureValues(feature, spec.key, kind, from, sink));
        count = sink.count;
        f.step_lengths.push_back(static_cast<int64_t>(count));
      } else {
        size_t base = static_cast<size_t>(f.steps) * per_step;
        ResizeFor(&f, spec.type, base + per_step);
        FixedSink sink{&f, base, per_step};
        if (kind != FeatureKind::kNone) STRATA_RETURN_IF_ERROR(internal::ReadFeatureValues(feature, spec.key, kind, from, sink));
        if (sink.count != per_step)
          return WrongCount(spec, static_cast<int64_t>(per_step), sink.count,
                            (" in step " + std::to_string(f.steps)).c_str());
      }
      ++f.steps;
      return Status::OK();
    });
  });
}

Status ExampleParser::ParseSequence(std::string_view sequence_example, ParsedExample* out) const {
  Reset(out, true);
  std::vector<uint8_t>& seen = out->seen;
  const char* p = sequence_example.data();
  const char* end = p + sequence_example.size();
  while (p < end) {
    uint32_t field;
    int wt;
    if (!wire::ReadTag(p, end, &field, &wt)) return Corruption("malformed SequenceExample (bad tag)");
    if ((field == 1 || field == 2) && wt == wire::kLengthDelimited) {
      std::string_view v;
      if (!wire::ReadLengthDelimited(p, end, &v)) return Corruption("SequenceExample field runs past its end");
      STRATA_RETURN_IF_ERROR(field == 1 ? ParseFeatures(v, out, &seen) : ParseFeatureLists(v, out));
      continue;
    }
    if (!wire::SkipField(p, end, field, wt)) return Corruption("malformed SequenceExample (truncated field)");
  }
  return Finish(out, seen);
}

}  // namespace strata::record
