// strata records count|inspect|verify|write: look inside TFRecord files, check them, make them.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "jsonl_example.h"
#include "strata/record/example.h"
#include "strata/record/record_reader.h"
#include "strata/record/record_writer.h"
#include "strata/record/wire.h"

namespace strata::cli {
namespace {

using record::Compression;
using record::Feature;
using record::FeatureKind;

// "12 bytes "JFIF\x00..."": length and a printable prefix.
std::string BytesPreview(std::string_view b) {
  std::string s = std::to_string(b.size()) + " bytes \"";
  for (size_t i = 0; i < b.size() && i < 32; ++i) {
    unsigned char c = static_cast<unsigned char>(b[i]);
    if (std::isprint(c) && c != '"' && c != '\\') {
      s += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      s += buf;
    }
  }
  s += b.size() > 32 ? "\"..." : "\"";
  return s;
}

Result<std::unique_ptr<record::RecordReader>> OpenReader(const std::string& path, record::RecordReaderOptions o = {}) {
  return record::RecordReader::Open(path, o);
}

// ---- count -------------------------------------------------------------------------------
int Count(const std::vector<std::string>& args) {
  bool json = false;
  FlagParser flags("records count", "FILE... [--json]",
                   "Counts the records of each TFRecord file (compression detected) and the total.");
  flags.Bool("json", &json, "one JSON object: {files: [{path, records, compression}], total}");
  std::vector<std::string> files;
  if (int rc = flags.Parse(args, &files); rc >= 0) return rc;
  if (files.empty()) return Fail("records count", "no files given (usage: strata records count FILE...)", kExitUsage);
  int64_t total = 0;
  nlohmann::json out = {{"files", nlohmann::json::array()}};
  for (const auto& f : files) {
    auto r = OpenReader(f);
    if (!r.ok()) return Fail("records count", r.status().ToString());
    std::string_view v;
    Status st;
    while ((st = (*r)->ReadRecord(&v)).ok()) {
    }
    if (!st.IsOutOfRange()) return Fail("records count", st.ToString());
    int64_t n = (*r)->stats().records;
    total += n;
    if (json)
      out["files"].push_back({{"path", f}, {"records", n}, {"compression", record::CompressionName((*r)->compression())}});
    else
      std::printf("%12lld  %s (%s)\n", static_cast<long long>(n), f.c_str(),
                  std::string(record::CompressionName((*r)->compression())).c_str());
  }
  if (json) {
    out["total"] = total;
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("%12lld  total in %zu file%s\n", static_cast<long long>(total), files.size(), files.size() == 1 ? "" : "s");
  }
  return kExitOk;
}

// ---- inspect -----------------------------------------------------------------------------
nlohmann::json FeatureJson(const Feature& f) {
  nlohmann::json j = {{"type", record::FeatureKindName(f.kind)}};
  nlohmann::json values = nlohmann::json::array();
  for (const auto& b : f.bytes) values.push_back({{"b64", Base64Encode(b)}, {"length", b.size()}});
  for (float v : f.floats) values.push_back(v);
  for (int64_t v : f.int64s) values.push_back(v);
  j["values"] = values;
  return j;
}

std::string FeatureText(const Feature& f) {
  std::string s = std::string(record::FeatureKindName(f.kind)) + "[" + std::to_string(f.size()) + "]";
  if (f.kind == FeatureKind::kNone) return s;
  s += " ";
  size_t shown = 0;
  auto more = [&](size_t n) { return n > shown ? " ... (" + std::to_string(n - shown) + " more)" : std::string(); };
  for (; shown < f.bytes.size() && shown < 4; ++shown) s += (shown ? ", " : "") + BytesPreview(f.bytes[shown]);
  if (f.kind == FeatureKind::kBytes) return s + more(f.bytes.size());
  char buf[64];
  for (; shown < f.floats.size() && shown < 10; ++shown) {
    std::snprintf(buf, sizeof(buf), "%s%.9g", shown ? ", " : "", f.floats[shown]);
    s += buf;
  }
  if (f.kind == FeatureKind::kFloat) return s + more(f.floats.size());
  for (; shown < f.int64s.size() && shown < 10; ++shown) s += (shown ? ", " : "") + std::to_string(f.int64s[shown]);
  return s + more(f.int64s.size());
}

// A SequenceExample has a feature_lists field (2) at the top level; an Example never does.
bool LooksLikeSequenceExample(std::string_view rec) {
  const char* p = rec.data();
  const char* end = p + rec.size();
  while (p < end) {
    uint32_t field;
    int wt;
    if (!record::wire::ReadTag(p, end, &field, &wt)) return false;
    if (field == 2 && wt == record::wire::kLengthDelimited) return true;
    if (!record::wire::SkipField(p, end, field, wt)) return false;
  }
  return false;
}

int Inspect(const std::vector<std::string>& args) {
  bool json = false;
  int64_t limit = 10;
  FlagParser flags("records inspect", "FILE [--limit N] [--json]",
                   "Prints each record's features with their type and values (tf.train.Example or\n"
                   "SequenceExample; other payloads as raw bytes). Bytes show as length and a printable\n"
                   "prefix, or base64 in JSON (one object per line).");
  flags.Int("limit", &limit, "records to show (default 10; 0 = all)");
  flags.Bool("json", &json, "one JSON object per record");
  std::vector<std::string> files;
  if (int rc = flags.Parse(args, &files); rc >= 0) return rc;
  if (files.size() != 1) return Fail("records inspect", "give exactly one FILE", kExitUsage);
  if (limit < 0) return Fail("records inspect", "--limit must be >= 0", kExitUsage);
  auto r = OpenReader(files[0]);
  if (!r.ok()) return Fail("records inspect", r.status().ToString());
  std::string_view rec;
  Status st;
  int64_t n = 0;
  while ((limit == 0 || n < limit) && (st = (*r)->ReadRecord(&rec)).ok()) {
    uint64_t off = (*r)->last_record_offset();
    nlohmann::json j = {{"record", n}, {"offset", off}, {"bytes", rec.size()}};
    if (!json) std::printf("record %lld at byte %llu (%zu bytes)", static_cast<long long>(n), static_cast<unsigned long long>(off), rec.size());
    record::SequenceExample se;
    record::Example ex;
    if (LooksLikeSequenceExample(rec) && record::DecodeSequenceExample(rec, &se).ok()) {
      j["type"] = "SequenceExample";
      if (!json) std::printf(" SequenceExample\n  context:\n");
      for (const auto& [k, f] : se.context) {
        j["context"][k] = FeatureJson(f);
        if (!json) std::printf("    %s: %s\n", k.c_str(), FeatureText(f).c_str());
      }
      if (!json) std::printf("  feature_lists:\n");
      for (const auto& [k, steps] : se.feature_lists) {
        nlohmann::json list = nlohmann::json::array();
        if (!json) std::printf("    %s: %zu steps\n", k.c_str(), steps.size());
        for (size_t s = 0; s < steps.size(); ++s) {
          list.push_back(FeatureJson(steps[s]));
          if (!json && s < 5) std::printf("      [%zu] %s\n", s, FeatureText(steps[s]).c_str());
        }
        j["feature_lists"][k] = list;
      }
    } else if (record::DecodeExample(rec, &ex).ok() && !(ex.features.empty() && !rec.empty())) {
      j["type"] = "Example";
      j["features"] = nlohmann::json::object();
      if (!json) std::printf(" Example, %zu features\n", ex.features.size());
      for (const auto& [k, f] : ex.features) {
        j["features"][k] = FeatureJson(f);
        if (!json) std::printf("  %s: %s\n", k.c_str(), FeatureText(f).c_str());
      }
    } else {
      j["type"] = "raw";
      j["b64"] = Base64Encode(rec);
      if (!json) std::printf(" raw: %s\n", BytesPreview(rec).c_str());
    }
    if (json) std::printf("%s\n", j.dump().c_str());
    ++n;
  }
  if (!st.ok() && !st.IsOutOfRange()) return Fail("records inspect", st.ToString());
  return kExitOk;
}

// ---- verify ------------------------------------------------------------------------------
int Verify(const std::vector<std::string>& args) {
  bool all = false;
  FlagParser flags("records verify", "FILE... [--all]",
                   "Checks every record's framing and CRCs. Exits 1 at the first problem, naming the file and\n"
                   "byte offset; with --all, reads on past problems (skipping what it can) and lists every one.");
  flags.Bool("all", &all, "report every problem instead of stopping at the first");
  std::vector<std::string> files;
  if (int rc = flags.Parse(args, &files); rc >= 0) return rc;
  if (files.empty()) return Fail("records verify", "no files given", kExitUsage);
  int64_t problems = 0;
  for (const auto& f : files) {
    record::RecordReaderOptions o;
    if (all) {
      o.ignore_errors = true;
      o.reporter = [&](const Status& s) {
        ++problems;
        std::fprintf(stderr, "strata records verify: %s\n", s.ToString().c_str());
      };
    }
    auto r = OpenReader(f, o);
    if (!r.ok()) {
      if (!all) return Fail("records verify", r.status().ToString());
      ++problems;
      std::fprintf(stderr, "strata records verify: %s\n", r.status().ToString().c_str());
      continue;
    }
    std::string_view v;
    Status st;
    while ((st = (*r)->ReadRecord(&v)).ok()) {
    }
    if (!st.IsOutOfRange()) {
      if (!all) return Fail("records verify", st.ToString());
      ++problems;
      std::fprintf(stderr, "strata records verify: %s\n", st.ToString().c_str());
    }
    const auto& s = (*r)->stats();
    std::printf("%s: %lld records ok", f.c_str(), static_cast<long long>(s.records));
    if (all && (s.skipped_records || s.truncated_tails))
      std::printf(", %lld skipped, %lld bytes passed over%s", static_cast<long long>(s.skipped_records),
                  static_cast<long long>(s.skipped_bytes), s.truncated_tails ? ", truncated tail" : "");
    std::printf("\n");
  }
  if (problems > 0) {
    std::printf("%lld problem%s\n", static_cast<long long>(problems), problems == 1 ? "" : "s");
    return kExitFailure;
  }
  return kExitOk;
}

// ---- write -------------------------------------------------------------------------------
int Write(const std::vector<std::string>& args) {
  std::string from, out, compression = "none";
  FlagParser flags("records write", "--from FILE.jsonl --out FILE [--compression gzip|zlib|none]",
                   "Writes one tf.train.Example per JSON line: integers -> int64_list, other numbers ->\n"
                   "float_list, strings -> bytes_list, {\"b64\": ...} -> binary bytes; a list of such values\n"
                   "gives a list feature, null or [] an empty Feature. The output appears atomically.");
  flags.String("from", &from, "JSON lines file, one object per Example");
  flags.String("out", &out, "TFRecord file to write");
  flags.String("compression", &compression, "none (default), gzip or zlib");
  if (int rc = flags.Parse(args); rc >= 0) return rc;
  if (from.empty() || out.empty()) return Fail("records write", "--from and --out are required", kExitUsage);
  auto comp = record::ParseCompression(compression);
  if (!comp.ok() || *comp == Compression::kAuto)
    return Fail("records write", "--compression must be none, gzip or zlib, got '" + compression + "'", kExitUsage);
  std::ifstream in(from);
  if (!in) return Fail("records write", "cannot open " + from);
  auto w = record::RecordWriter::Open(out, {.compression = *comp});
  if (!w.ok()) return Fail("records write", w.status().ToString());
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Result<record::Example> ex = ExampleFromJsonLine(line);
    if (!ex.ok()) return Fail("records write", from + " line " + std::to_string(lineno) + ": " + ex.status().message());
    Status s = (*w)->WriteRecord(record::EncodeExample(*ex));
    if (!s.ok()) return Fail("records write", s.ToString());
  }
  int64_t n = (*w)->records_written();
  Status s = (*w)->Close();
  if (!s.ok()) return Fail("records write", s.ToString());
  std::printf("wrote %lld examples to %s (%s)\n", static_cast<long long>(n), out.c_str(), compression.c_str());
  return kExitOk;
}

int RunRecords(const std::vector<std::string>& args) {
  const char* usage =
      "usage: strata records <count|inspect|verify|write> ...\n"
      "  count FILE...                         records per file and in total\n"
      "  inspect FILE [--limit N] [--json]     each record's features, types and values\n"
      "  verify FILE... [--all]                check framing and CRCs; exit 1 on a problem\n"
      "  write --from F.jsonl --out FILE [--compression gzip|zlib|none]\n"
      "Compression is detected on read.\n";
  if (args.empty()) {
    std::fputs(usage, stderr);
    return kExitUsage;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(usage, stdout);
    return kExitOk;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "count") return Count(rest);
  if (args[0] == "inspect") return Inspect(rest);
  if (args[0] == "verify") return Verify(rest);
  if (args[0] == "write") return Write(rest);
  return Fail("records", "unknown subcommand '" + args[0] + "' (count, inspect, verify, write)", kExitUsage);
}

const Registrar kRecords({"records", "count, inspect, verify and write TFRecord files", RunRecords});

}  // namespace
}  // namespace strata::cli
