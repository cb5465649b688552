#include "strata/record/event.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "strata/core/clock.h"
#include "strata/record/wire.h"

namespace strata::record {
namespace {

using wire::kFixed32;
using wire::kFixed64;
using wire::kLengthDelimited;
using wire::kVarint;

// Iterates the fields of a message; fn(field, wire_type, p, end) consumes the value and
// returns false when it is malformed. Unhandled fields: fn returns true without advancing
// is not allowed, so fn signals "skip" by returning a Skip marker via `skip`.
template <typename Fn>
Status Walk(std::string_view msg, const char* what, Fn&& fn) {
  const char* p = msg.data();
  const char* end = p + msg.size();
  while (p < end) {
    uint32_t field;
    int wt;
    if (!wire::ReadTag(p, end, &field, &wt)) return Corruption(std::string("malformed ") + what + " (bad tag)");
    bool handled = false;
    if (!fn(field, wt, p, end, &handled))
      return Corruption(std::string("malformed ") + what + " field " + std::to_string(field));
    if (!handled && !wire::SkipField(p, end, field, wt))
      return Corruption(std::string("malformed ") + what + " (truncated field " + std::to_string(field) + ")");
  }
  return Status::OK();
}

template <typename T, typename Read>
bool ReadRepeated(int wt, int scalar_wt, const char*& p, const char* end, std::vector<T>* out, Read read) {
  if (wt == kLengthDelimited) {
    std::string_view packed;
    if (!wire::ReadLengthDelimited(p, end, &packed)) return false;
    const char* q = packed.data();
    const char* qend = q + packed.size();
    while (q < qend) {
      T v;
      if (!read(q, qend, &v)) return false;
      out->push_back(v);
    }
    return true;
  }
  if (wt == scalar_wt) {
    T v;
    if (!read(p, end, &v)) return false;
    out->push_back(v);
    return true;
  }
  return false;
}

bool ReadF32(const char*& p, const char* end, float* v) {
  uint32_t u;
  if (!wire::ReadFixed32(p, end, &u)) return false;
  std::memcpy(v, &u, 4);
  return true;
}
bool ReadF64(const char*& p, const char* end, double* v) {
  uint64_t u;
  if (!wire::ReadFixed64(p, end, &u)) return false;
  std::memcpy(v, &u, 8);
  return true;
}
bool ReadI32(const char*& p, const char* end, int32_t* v) {
  uint64_t u;
  if (!wire::ReadVarint(p, end, &u)) return false;
  *v = static_cast<int32_t>(u);
  return true;
}
bool ReadI64(const char*& p, const char* end, int64_t* v) {
  uint64_t u;
  if (!wire::ReadVarint(p, end, &u)) return false;
  *v = static_cast<int64_t>(u);
  return true;
}

Status DecodeTensor(std::string_view msg, SummaryTensor* t) {
  return Walk(msg, "TensorProto", [&](uint32_t f, int wt, const char*& p, const char* end, bool* handled) {
    *handled = true;
    std::string_view v;
    switch (f) {
      case 1: {
        if (wt != kVarint) break;
        return ReadI32(p, end, &t->dtype);
      }
      case 2: {
        if (wt != kLengthDelimited) break;
        if (!wire::ReadLengthDelimited(p, end, &v)) return false;
        t->shape.clear();
        return Walk(v, "TensorShapeProto", [&](uint32_t f2, int wt2, const char*& p2, const char* e2, bool* h2) {
                 if (f2 != 2 || wt2 != kLengthDelimited) return true;
                 *h2 = true;
                 std::string_view dim;
                 if (!wire::ReadLengthDelimited(p2, e2, &dim)) return false;
                 int64_t size = 0;
                 Status s = Walk(dim, "TensorShapeProto.Dim", [&](uint32_t f3, int wt3, const char*& p3, const char* e3, bool* h3) {
                   if (f3 != 1 || wt3 != kVarint) return true;
                   *h3 = true;
                   return ReadI64(p3, e3, &size);
                 });
                 if (!s.ok()) return false;
                 t->shape.push_back(size);
                 return true;
               }).ok();
      }
      case 4:
        if (wt != kLengthDelimited) break;
        if (!wire::ReadLengthDelimited(p, end, &v)) return false;
        t->tensor_content.assign(v);
        return true;
      case 5: if (wt != kLengthDelimited && wt != kFixed32) break; return ReadRepeated(wt, kFixed32, p, end, &t->float_val, ReadF32);
      case 6: if (wt != kLengthDelimited && wt != kFixed64) break; return ReadRepeated(wt, kFixed64, p, end, &t->double_val, ReadF64);
      case 7: if (wt != kLengthDelimited && wt != kVarint) break; return ReadRepeated(wt, kVarint, p, end, &t->int_val, ReadI32);
      case 10: if (wt != kLengthDelimited && wt != kVarint) break; return ReadRepeated(wt, kVarint, p, end, &t->int64_val, ReadI64);
      case 8:
        if (wt != kLengthDelimited) break;
        if (!wire::ReadLengthDelimited(p, end, &v)) return false;
        t->string_val.emplace_back(v);
        return true;
    }
    *handled = false;
    return true;
  });
}

Status DecodeValue(std::string_view msg, SummaryValue* v) {
  return Walk(msg, "Summary.Value", [&](uint32_t f, int wt, const char*& p, const char* end, bool* handled) {
    std::string_view s;
    *handled = true;
    if (f == 1 && wt == kLengthDelimited) {
      if (!wire::ReadLengthDelimited(p, end, &s)) return false;
      v->tag.assign(s);
      return true;
    }
    if (f == 2 && wt == kFixed32) {
      v->kind = SummaryValue::Kind::kSimpleValue;
      v->tensor = {};
      return ReadF32(p, end, &v->simple_value);
    }
    if (f == 8 && wt == kLengthDelimited) {
      if (!wire::ReadLengthDelimited(p, end, &s)) return false;
      if (v->kind != SummaryValue::Kind::kTensor) v->tensor = {};
      v->kind = SummaryValue::Kind::kTensor;
      return DecodeTensor(s, &v->tensor).ok();
    }
    if (f >= 3 && f <= 6 && wt == kLengthDelimited) {  // histogram, image, audio: kept opaque
      if (!wire::ReadLengthDelimited(p, end, &s)) return false;
      v->kind = SummaryValue::Kind::kOther;
      return true;
    }
    if (f == 9 && wt == kLengthDelimited) {
      if (!wire::ReadLengthDelimited(p, end, &s)) return false;
      return Walk(s, "SummaryMetadata", [&](uint32_t f2, int wt2, const char*& p2, const char* e2, bool* h2) {
               if (f2 != 1 || wt2 != kLengthDelimited) return true;
               *h2 = true;
               std::string_view pd;
               if (!wire::ReadLengthDelimited(p2, e2, &pd)) return false;
               return Walk(pd, "PluginData", [&](uint32_t f3, int wt3, const char*& p3, const char* e3, bool* h3) {
                        if ((f3 != 1 && f3 != 2) || wt3 != kLengthDelimited) return true;
                        *h3 = true;
                        std::string_view x;
                        if (!wire::ReadLengthDelimited(p3, e3, &x)) return false;
                        (f3 == 1 ? v->plugin_name : v->plugin_content).assign(x);
                        return true;
                      }).ok();
             }).ok();
    }
    *handled = false;
    return true;
  });
}

// ---- encoding --------------------------------------------------------------------------
void AppendMessage(std::string* s, uint32_t field, const std::string& body) { wire::AppendBytesField(s, field, body); }

std::string EncodeTensor(const SummaryTensor& t) {
  std::string s;
  if (t.dtype != 0) {
    wire::AppendTag(&s, 1, kVarint);
    wire::AppendVarint(&s, static_cast<uint64_t>(static_cast<int64_t>(t.dtype)));
  }
  std::string shape;
  for (int64_t d : t.shape) {
    std::string dim;
    if (d != 0) {
      wire::AppendTag(&dim, 1, kVarint);
      wire::AppendVarint(&dim, static_cast<uint64_t>(d));
    }
    AppendMessage(&shape, 2, dim);
  }
  AppendMessage(&s, 2, shape);
  if (!t.tensor_content.empty()) wire::AppendBytesField(&s, 4, t.tensor_content);
  if (!t.float_val.empty())
    wire::AppendBytesField(&s, 5, std::string_view(reinterpret_cast<const char*>(t.float_val.data()), 4 * t.float_val.size()));
  if (!t.double_val.empty())
    wire::AppendBytesField(&s, 6, std::string_view(reinterpret_cast<const char*>(t.double_val.data()), 8 * t.double_val.size()));
  if (!t.int_val.empty()) {
    std::string packed;
    for (int32_t v : t.int_val) wire::AppendVarint(&packed, static_cast<uint64_t>(static_cast<int64_t>(v)));
    wire::AppendBytesField(&s, 7, packed);
  }
  for (const auto& str : t.string_val) wire::AppendBytesField(&s, 8, str);
  if (!t.int64_val.empty()) {
    std::string packed;
    for (int64_t v : t.int64_val) wire::AppendVarint(&packed, static_cast<uint64_t>(v));
    wire::AppendBytesField(&s, 10, packed);
  }
  return s;
}

std::string EncodeValue(const SummaryValue& v) {
  std::string s;
  if (!v.tag.empty()) wire::AppendBytesField(&s, 1, v.tag);
  if (v.kind == SummaryValue::Kind::kSimpleValue) {
    wire::AppendTag(&s, 2, kFixed32);
    char b[4];
    std::memcpy(b, &v.simple_value, 4);
    s.append(b, 4);
  } else if (v.kind == SummaryValue::Kind::kTensor) {
    AppendMessage(&s, 8, EncodeTensor(v.tensor));
  }
  if (!v.plugin_name.empty() || !v.plugin_content.empty()) {
    std::string pd;
    if (!v.plugin_name.empty()) wire::AppendBytesField(&pd, 1, v.plugin_name);
    if (!v.plugin_content.empty()) wire::AppendBytesField(&pd, 2, v.plugin_content);
    std::string md;
    AppendMessage(&md, 1, pd);
    AppendMessage(&s, 9, md);
  }
  return s;
}

}  // namespace

bool SummaryTensor::ScalarValue(double* out) const {
  if (!float_val.empty()) return *out = float_val[0], true;
  if (!double_val.empty()) return *out = double_val[0], true;
  if (!int_val.empty()) return *out = int_val[0], true;
  if (!int64_val.empty()) return *out = static_cast<double>(int64_val[0]), true;
  const char* c = tensor_content.data();
  size_t n = tensor_content.size();
  if (dtype == kDtFloat && n >= 4) { float f; std::memcpy(&f, c, 4); return *out = f, true; }
  if (dtype == kDtDouble && n >= 8) { double d; std::memcpy(&d, c, 8); return *out = d, true; }
  if (dtype == kDtInt32 && n >= 4) { int32_t i; std::memcpy(&i, c, 4); return *out = i, true; }
  if (dtype == kDtInt64 && n >= 8) { int64_t i; std::memcpy(&i, c, 8); return *out = static_cast<double>(i), true; }
  return false;
}

Status DecodeEvent(std::string_view serialized, Event* out) {
  *out = Event{};
  return Walk(serialized, "Event", [&](uint32_t f, int wt, const char*& p, const char* end, bool* handled) {
    std::string_view s;
    *handled = true;
    if (f == 1 && wt == kFixed64) return ReadF64(p, end, &out->wall_time);
    if (f == 2 && wt == kVarint) return ReadI64(p, end, &out->step);
    if ((f == 3 || f == 4 || f == 9) && wt == kLengthDelimited) {
      if (!wire::ReadLengthDelimited(p, end, &s)) return false;
      out->summary.clear();
      out->what = f == 3 ? Event::What::kFileVersion : f == 4 ? Event::What::kGraphDef : Event::What::kMetaGraphDef;
      (f == 3 ? out->file_version : f == 4 ? out->graph_def : out->meta_graph_def).assign(s);
      return true;
    }
    if (f == 5 && wt == kLengthDelimited) {
      if (!wire::ReadLengthDelimited(p, end, &s)) return false;
      if (out->what != Event::What::kSummary) out->summary.clear();
      out->what = Event::What::kSummary;
      return Walk(s, "Summary", [&](uint32_t f2, int wt2, const char*& p2, const char* e2, bool* h2) {
               if (f2 != 1 || wt2 != kLengthDelimited) return true;
               *h2 = true;
               std::string_view v;
               if (!wire::ReadLengthDelimited(p2, e2, &v)) return false;
               out->summary.emplace_back();
               return DecodeValue(v, &out->summary.back()).ok();
             }).ok();
    }
    if ((f >= 6 && f <= 8) && wt == kLengthDelimited) {  // log_message, session_log, run metadata
      if (!wire::ReadLengthDelimited(p, end, &s)) return false;
      out->what = Event::What::kOther;
      return true;
    }
    *handled = false;
    return true;
  });
}

Result<Event> DecodeEvent(std::string_view serialized) {
  Event e;
  STRATA_RETURN_IF_ERROR(DecodeEvent(serialized, &e));
  return e;
}

std::string EncodeEvent(const Event& e) {
  std::string s;
  if (e.wall_time != 0) {
    wire::AppendTag(&s, 1, kFixed64);
    char b[8];
    std::memcpy(b, &e.wall_time, 8);
    s.append(b, 8);
  }
  if (e.step != 0) {
    wire::AppendTag(&s, 2, kVarint);
    wire::AppendVarint(&s, static_cast<uint64_t>(e.step));
  }
  switch (e.what) {
    case Event::What::kFileVersion: wire::AppendBytesField(&s, 3, e.file_version); break;
    case Event::What::kGraphDef: wire::AppendBytesField(&s, 4, e.graph_def); break;
    case Event::What::kSummary: {
      std::string sum;
      for (const auto& v : e.summary) AppendMessage(&sum, 1, EncodeValue(v));
      AppendMessage(&s, 5, sum);
      break;
    }
    case Event::What::kMetaGraphDef: wire::AppendBytesField(&s, 9, e.meta_graph_def); break;
    case Event::What::kNone:
    case Event::What::kOther: break;
  }
  return s;
}

std::string EventFileName(int64_t unix_seconds, std::string_view hostname, std::string_view suffix) {
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%010lld", static_cast<long long>(unix_seconds));
  return "events.out.tfevents." + std::string(secs) + "." + std::string(hostname) + std::string(suffix);
}

bool IsEventFileName(std::string_view filename) { return filename.find("tfevents") != std::string_view::npos; }

Result<std::unique_ptr<EventWriter>> EventWriter::Create(const std::string& dir, EventWriterOptions options) {
  double now = options.wall_time != 0 ? options.wall_time : WallSeconds();
  std::string host = options.hostname;
  if (host.empty()) {
    char buf[256] = {0};
    if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == 0) std::strcpy(buf, "localhost");
    host = buf;
  }
  std::string path = dir + "/" + EventFileName(static_cast<int64_t>(now), host, options.filename_suffix);
  STRATA_ASSIGN_OR_RETURN(auto writer, RecordWriter::Open(path, {.atomic = false}));
  std::unique_ptr<EventWriter> w(new EventWriter(path, std::move(writer)));
  Event first;
  first.wall_time = now;
  first.what = Event::What::kFileVersion;
  first.file_version = std::string(kEventFileVersion);
  STRATA_RETURN_IF_ERROR(w->WriteEvent(first));
  STRATA_RETURN_IF_ERROR(w->Flush());
  return w;
}

EventWriter::~EventWriter() {
  if (!closed_) (void)Close();
}

Status EventWriter::WriteEvent(const Event& event) {
  if (closed_) return Internal("write to closed event file " + path_);
  scratch_ = EncodeEvent(event);
  return writer_->WriteRecord(scratch_);
}

namespace {

// A summary event at `step` with one value tagged `tag`, whose kind and payload the caller sets.
Event OneValueSummary(std::string_view tag, int64_t step, double wall_time) {
  Event e;
  e.wall_time = wall_time != 0 ? wall_time : WallSeconds();
  e.step = step;
  e.what = Event::What::kSummary;
  e.summary.emplace_back();
  e.summary.back().tag = std::string(tag);
  return e;
}

}  // namespace

Status EventWriter::WriteScalar(std::string_view tag, int64_t step, float value, double wall_time) {
  Event e = OneValueSummary(tag, step, wall_time);
  SummaryValue& v = e.summary.back();
  v.kind = SummaryValue::Kind::kSimpleValue;
  v.simple_value = value;
  return WriteEvent(e);
}

Status EventWriter::WriteTensorScalar(std::string_view tag, int64_t step, float value, double wall_time) {
  Event e = OneValueSummary(tag, step, wall_time);
  SummaryValue& v = e.summary.back();
  v.plugin_name = "scalars";
  v.kind = SummaryValue::Kind::kTensor;
  v.tensor.dtype = kDtFloat;
  v.tensor.float_val = {value};
  return WriteEvent(e);
}

Status EventWriter::Flush() { return closed_ ? Status::OK() : writer_->Flush(); }

Status EventWriter::Close() {
  if (closed_) return Status::OK();
  closed_ = true;
  return writer_->Close();
}

Result<std::unique_ptr<EventReader>> EventReader::Open(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(auto r, RecordReader::Open(path, {.compression = Compression::kNone, .stop_at_truncated_tail = true}));
  return std::unique_ptr<EventReader>(new EventReader(std::move(r)));
}

Status EventReader::Next(Event* event) {
  std::string_view rec;
  STRATA_RETURN_IF_ERROR(reader_->ReadRecord(&rec));
  Status s = DecodeEvent(rec, event);
  if (!s.ok())
    return s.WithContext("event record at byte " + std::to_string(reader_->last_record_offset()) + " of " +
                         reader_->filename());
  return Status::OK();
}

}  // namespace strata::record
