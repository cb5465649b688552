// Damaged records in a running pipeline, from local files, over https:// (nginx with TLS and a
// CA made here) and over s3:// (s3rver): four interleaved files (TFRecordDataset with three
// parallel reads), four damaged records among them. Without ignore_errors the error names the
// file or URL and the byte offset of a damaged record; with ignore_errors() each damaged record
// is dropped and counted, and every other record arrives exactly once.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "cli_support.h"
#include "remote_servers.h"
#include "strata/data/dataset.h"
#include "strata/data/sources.h"
#include "strata/record/example.h"
#include "strata/record/record_writer.h"

namespace strata {
namespace {

using testing::ScopedEnv;
using testing::TempDir;
namespace fs = std::filesystem;

constexpr int kFiles = 4, kRecords = 30;

// part-F.tfrecord holds Examples {id: F*100+i, pad: 300..600 bytes}, so with 4 KiB blocks
// records straddle the range requests. Damaged: a data byte of 1:4 and of 1:20 (bad data CRC),
// the length of 2:7 (bad length CRC: the reader resynchronises on 2:8), two records in a row
// in part-3 (5 and 6).
struct DamagedFiles {
  std::map<int64_t, uint64_t> offsets;  // id -> byte offset of its record
  std::set<int64_t> damaged;

  void Write(const std::string& dir) {
    for (int f = 0; f < kFiles; ++f) {
      auto w = record::RecordWriter::Open(dir + "/part-" + std::to_string(f) + ".tfrecord");
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      uint64_t offset = 0;
      record::ExampleBuilder b;
      for (int i = 0; i < kRecords; ++i) {
        b.Clear();
        const int64_t id = f * 100 + i;
        b.AddInt64s("id", std::span(&id, 1));
        b.AddBytes("pad", std::string(static_cast<size_t>(300 + 11 * i), static_cast<char>('a' + i % 26)));
        const std::string rec(b.Finish());
        offsets[id] = offset;
        offset += 16 + rec.size();
        ASSERT_TRUE((*w)->WriteRecord(rec).ok());
      }
      ASSERT_TRUE((*w)->Close().ok());
    }
    for (auto [id, at] : std::vector<std::pair<int64_t, uint64_t>>{{104, 20}, {120, 30}, {207, 3}, {305, 40}, {306, 40}}) {
      damaged.insert(id);
      std::fstream f(dir + "/part-" + std::to_string(id / 100) + ".tfrecord", std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(offsets[id] + at));
      const char c = static_cast<char>(f.get());
      f.seekp(static_cast<std::streamoff>(offsets[id] + at));
      f.put(static_cast<char>(c ^ 0x21));
    }
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                             fs::perms::others_exec);
  }
  std::multiset<int64_t> Intact() const {
    std::multiset<int64_t> want;
    for (int f = 0; f < kFiles; ++f)
      for (int i = 0; i < kRecords; ++i)
        if (!damaged.count(f * 100 + i)) want.insert(f * 100 + i);
    return want;
  }
  // "<base>/part-F.tfrecord at byte N" per damaged record: what its error must contain.
  std::set<std::string> Sites(const std::string& base) const {
    std::set<std::string> out;
    for (int64_t id : damaged)
      out.insert(base + "/part-" + std::to_string(id / 100) + ".tfrecord at byte " + std::to_string(offsets.at(id)));
    return out;
  }
};

std::vector<std::string> Names(const std::string& base) {
  std::vector<std::string> out;
  for (int f = 0; f < kFiles; ++f) out.push_back(base + "/part-" + std::to_string(f) + ".tfrecord");
  return out;
}

data::Dataset Ids(const std::vector<std::string>& files, bool ignore_errors) {
  auto parse = data::ParseExampleFn({{.key = "id", .type = record::FeatureKind::kInt64}});
  EXPECT_TRUE(parse.ok());
  data::Dataset ds = data::TFRecordDataset(files, {.num_parallel_reads = 3});
  if (ignore_errors) ds = ds.ignore_errors();
  return ds.map(*parse);
}

// Runs the pipeline three ways over `base` (a folder, an https:// URL or an s3:// prefix).
void CheckDamagedPipeline(const DamagedFiles& d, const std::string& base) {
  SCOPED_TRACE(base);
  const auto sites = d.Sites(base);
  // 1. Without ignore_errors, a consumer that stops at the first error: it names the file or
  //    URL and the byte offset of a damaged record.
  {
    auto it = Ids(Names(base), false).make_iterator();
    ASSERT_TRUE(it.ok()) << it.status().ToString();
    Status first;
    while (true) {
      auto e = (*it)->Next();
      if (!e.ok()) {
        first = e.status();
        break;
      }
      ASSERT_TRUE(e->has_value()) << "the pipeline ended without an error";
    }
    EXPECT_EQ(first.code(), StatusCode::kCorruption) << first.ToString();
    bool named = false;
    for (const auto& s : sites) named |= first.message().find(s) != std::string::npos;
    EXPECT_TRUE(named) << first.ToString();
  }
  // 2. Going on after each error: one error per damaged record, each at its own offset.
  {
    auto it = Ids(Names(base), false).make_iterator();
    std::multiset<int64_t> ids;
    std::set<std::string> named;
    int errors = 0;
    while (true) {
      auto e = (*it)->Next();
      if (!e.ok()) {
        ++errors;
        for (const auto& s : sites)
          if (e.status().message().find(s) != std::string::npos) named.insert(s);
        continue;
      }
      if (!e->has_value()) break;
      ids.insert(*(*e)->Get("id")->data<int64_t>());
    }
    EXPECT_EQ(errors, static_cast<int>(d.damaged.size()));
    EXPECT_EQ(named, sites);
    EXPECT_EQ(ids, d.Intact());
  }
  // 3. ignore_errors(): the damaged records are dropped and counted, the rest arrive once.
  {
    auto it = Ids(Names(base), true).make_iterator();
    std::multiset<int64_t> ids;
    while (true) {
      auto e = (*it)->Next();
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      if (!e->has_value()) break;
      ids.insert(*(*e)->Get("id")->data<int64_t>());
    }
    EXPECT_EQ(ids, d.Intact());
    int64_t ignored = -1;
    for (const auto& s : (*it)->Stats())
      if (s.name == "ignore_errors") ignored = s.errors_ignored;
    EXPECT_EQ(ignored, static_cast<int64_t>(d.damaged.size()));
  }
}

TEST(RemoteCorruption, DamagedRecordsLocallyAndOverHttpsFromNginx) {
  TempDir root, tls;
  DamagedFiles d;
  d.Write(root.path);
  CheckDamagedPipeline(d, root.path);

  testing::TestCa ca;
  ASSERT_TRUE(ca.Make(tls.path)) << ca.error;
  testing::Nginx nginx;
  ASSERT_TRUE(nginx.Start(root.path, ca.server_cert, ca.server_key)) << nginx.error;
  ScopedEnv bundle("STRATA_CA_BUNDLE", ca.ca);
  ScopedEnv block("STRATA_IO_BLOCK_BYTES", "4096");  // records and damage straddle range requests
  CheckDamagedPipeline(d, "https://127.0.0.1:" + std::to_string(nginx.port));
}

TEST(RemoteCorruption, DamagedRecordsOverS3FromS3rver) {
  TempDir root;
  DamagedFiles d;
  d.Write(root.path);
  testing::S3rver s3rver;
  ASSERT_TRUE(s3rver.Start("bkt")) << s3rver.error;
  auto up = testing::RunCommand("python3 " + std::string(STRATA_SOURCE_DIR) + "/tests/e2e/remote/s3_upload.py " +
                                    s3rver.endpoint() + " bkt damaged " + root.path,
                                true);
  ASSERT_EQ(up.exit_code, 0) << up.output;
  ScopedEnv ep("STRATA_S3_ENDPOINT", s3rver.endpoint());
  ScopedEnv key("AWS_ACCESS_KEY_ID", "S3RVER");
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "S3RVER");
  ScopedEnv region("AWS_REGION", "us-east-1");
  ScopedEnv block("STRATA_IO_BLOCK_BYTES", "4096");
  CheckDamagedPipeline(d, "s3://bkt/damaged");
}

}  // namespace
}  // namespace strata
