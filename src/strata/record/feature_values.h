// Internal to record/: walks the values of one serialized Feature, honouring protobuf's
// merge rules, and hands them to a sink without allocating. Shared by the allocating
// decoder (example.cc) and the spec-driven parser (example_parser.cc).
#pragma once

#include <cstring>
#include <string>
#include <string_view>

#include "strata/core/status.h"
#include "strata/record/example.h"
#include "strata/record/wire.h"

namespace strata::record::internal {

inline Status FeatureError(std::string_view key, const std::string& what) {
  return Corruption("feature '" + std::string(key) + "': " + what);
}

// Determines which list a Feature holds. The oneof means a later field of another kind
// replaces earlier ones, while repeats of the same kind merge (values append), so the
// values are those of `kind` fields after the last field of a different kind: `*from`.
inline Status ScanFeatureKind(std::string_view feature, std::string_view key, FeatureKind* kind, const char** from) {
  const char* p = feature.data();
  const char* end = p + feature.size();
  *kind = FeatureKind::kNone;
  *from = p;
  while (p < end) {
    const char* field_start = p;
    uint32_t field;
    int wt;
    if (!wire::ReadTag(p, end, &field, &wt)) return FeatureError(key, "malformed Feature (bad tag)");
    if (field >= 1 && field <= 3 && wt == wire::kLengthDelimited) {
      FeatureKind k = field == 1 ? FeatureKind::kBytes : field == 2 ? FeatureKind::kFloat : FeatureKind::kInt64;
      if (k != *kind) {
        *kind = k;
        *from = field_start;
      }
    }
    if (!wire::SkipField(p, end, field, wt)) return FeatureError(key, "malformed Feature (truncated field)");
  }
  return Status::OK();
}

// Sink concept:
//   bool Floats(const char* little_endian, size_t count);   // packed run of floats
//   bool Int64(int64_t v);
//   bool Bytes(std::string_view v);
// Each returns false to stop (the sink records why).
template <typename Sink>
Status ReadListValues(std::string_view list, std::string_view key, FeatureKind kind, Sink& sink) {
  const char* p = list.data();
  const char* end = p + list.size();
  while (p < end) {
    uint32_t field;
    int wt;
    if (!wire::ReadTag(p, end, &field, &wt)) return FeatureError(key, "malformed value list (bad tag)");
    if (field == 1) {
      if (kind == FeatureKind::kFloat && wt == wire::kLengthDelimited) {
        std::string_view packed;
        if (!wire::ReadLengthDelimited(p, end, &packed)) return FeatureError(key, "float_list runs past its end");
        if (packed.size() % 4 != 0)
          return FeatureError(key, "packed float_list of " + std::to_string(packed.size()) +
                                       " bytes is not a multiple of 4");
        if (!sink.Floats(packed.data(), packed.size() / 4)) return Status::OK();
        continue;
      }
      if (kind == FeatureKind::kFloat && wt == wire::kFixed32) {
        if (end - p < 4) return FeatureError(key, "float value runs past its end");
        if (!sink.Floats(p, 1)) return Status::OK();
        p += 4;
        continue;
      }
      if (kind == FeatureKind::kInt64 && wt == wire::kLengthDelimited) {
        std::string_view packed;
        if (!wire::ReadLengthDelimited(p, end, &packed)) return FeatureError(key, "int64_list runs past its end");
        const char* q = packed.data();
        const char* qend = q + packed.size();
        while (q < qend) {
          uint64_t v;
          if (!wire::ReadVarint(q, qend, &v)) return FeatureError(key, "malformed varint in packed int64_list");
          if (!sink.Int64(static_cast<int64_t>(v))) return Status::OK();
        }
        continue;
      }
      if (kind == FeatureKind::kInt64 && wt == wire::kVarint) {
        uint64_t v;
        if (!wire::ReadVarint(p, end, &v)) return FeatureError(key, "malformed int64 varint");
        if (!sink.Int64(static_cast<int64_t>(v))) return Status::OK();
        continue;
      }
      if (kind == FeatureKind::kBytes && wt == wire::kLengthDelimited) {
        std::string_view v;
        if (!wire::ReadLengthDelimited(p, end, &v)) return FeatureError(key, "bytes value runs past its end");
        if (!sink.Bytes(v)) return Status::OK();
        continue;
      }
    }
    if (!wire::SkipField(p, end, field, wt)) return FeatureError(key, "malformed value list (truncated field)");
  }
  return Status::OK();
}

// Reads the values of a Feature already scanned by ScanFeatureKind (kind != kNone).
template <typename Sink>
Status ReadFeatureValues(std::string_view feature, std::string_view key, FeatureKind kind, const char* from,
                         Sink& sink) {
  const uint32_t want = kind == FeatureKind::kBytes ? 1 : kind == FeatureKind::kFloat ? 2 : 3;
  const char* p = from;
  const char* end = feature.data() + feature.size();
  while (p < end) {
    uint32_t field = 0;
    int wt = 0;
    wire::ReadTag(p, end, &field, &wt);  // validated by the scan
    if (field == want && wt == wire::kLengthDelimited) {
      std::string_view list;
      wire::ReadLengthDelimited(p, end, &list);
      STRATA_RETURN_IF_ERROR(ReadListValues(list, key, kind, sink));
    } else {
      wire::SkipField(p, end, field, wt);
    }
  }
  return Status::OK();
}

// Reads every value of a serialized Feature into `sink`; `*kind` gets its kind.
template <typename Sink>
Status ReadFeature(std::string_view feature, std::string_view key, FeatureKind* kind, Sink& sink) {
  const char* from;
  STRATA_RETURN_IF_ERROR(ScanFeatureKind(feature, key, kind, &from));
  if (*kind == FeatureKind::kNone) return Status::OK();
  return ReadFeatureValues(feature, key, *kind, from, sink);
}

// Walks a map entry { key = 1; value = 2; }: the last key wins; several value fields
// merge, which for a message means parsing their concatenation (into `*scratch`).
inline Status ReadMapEntry(std::string_view entry, std::string_view* key, std::string_view* value,
                           std::string* scratch) {
  const char* p = entry.data();
  const char* end = p + entry.size();
  *key = {};
  *value = {};
  int values = 0;
  while (p < end) {
    uint32_t field;
    int wt;
    if (!wire::ReadTag(p, end, &field, &wt)) return Corruption("malformed map entry (bad tag)");
    if ((field == 1 || field == 2) && wt == wire::kLengthDelimited) {
      std::string_view v;
      if (!wire::ReadLengthDelimited(p, end, &v)) return Corruption("map entry field runs past its end");
      if (field == 1) {
        *key = v;
      } else if (values++ == 0) {
        *value = v;
      } else {
        if (values == 2) scratch->assign(value->data(), value->size());
        scratch->append(v.data(), v.size());
        *value = *scratch;
      }
      continue;
    }
    if (!wire::SkipField(p, end, field, wt)) return Corruption("malformed map entry (truncated field)");
  }
  return Status::OK();
}

// Calls fn(key, value) for each entry of a Features / FeatureLists message (field 1).
template <typename Fn>
Status ForEachMapEntry(std::string_view message, const char* what, std::string* scratch, Fn&& fn) {
  const char* p = message.data();
  const char* end = p + message.size();
  while (p < end) {
    uint32_t field;
    int wt;
    if (!wire::ReadTag(p, end, &field, &wt)) return Corruption(std::string("malformed ") + what + " (bad tag)");
    if (field == 1 && wt == wire::kLengthDelimited) {
      std::string_view entry, key, value;
      if (!wire::ReadLengthDelimited(p, end, &entry))
        return Corruption(std::string(what) + " entry runs past its end");
      STRATA_RETURN_IF_ERROR(ReadMapEntry(entry, &key, &value, scratch));
      STRATA_RETURN_IF_ERROR(fn(key, value));
      continue;
    }
    if (!wire::SkipField(p, end, field, wt)) return Corruption(std::string("malformed ") + what + " (truncated field)");
  }
  return Status::OK();
}

// Calls fn(payload) for each length-delimited field `number` of a message, skipping others.
template <typename Fn>
Status ForEachMessageField(std::string_view message, uint32_t number, const char* what, Fn&& fn) {
  const char* p = message.data();
  const char* end = p + message.size();
  while (p < end) {
    uint32_t field;
    int wt;
    if (!wire::ReadTag(p, end, &field, &wt)) return Corruption(std::string("malformed ") + what + " (bad tag)");
    if (field == number && wt == wire::kLengthDelimited) {
      std::string_view v;
      if (!wire::ReadLengthDelimited(p, end, &v)) return Corruption(std::string(what) + " field runs past its end");
      STRATA_RETURN_IF_ERROR(fn(v));
      continue;
    }
    if (!wire::SkipField(p, end, field, wt)) return Corruption(std::string("malformed ") + what + " (truncated field)");
  }
  return Status::OK();
}

}  // namespace strata::record::internal
