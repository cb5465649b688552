// s3:// against s3rver (an S3-compatible store from npm, started here on loopback) and gs://
// against remote/fake_object_server.py --gcs (no GCS emulator is packaged; it speaks the
// JSON list API and media download). Objects are the TensorFlow-written files of
// testdata/real; every read is compared with the local read.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "remote_servers.h"
#include "strata/data/dataset.h"
#include "strata/data/sources.h"
#include "strata/io/file_system.h"
#include "strata/io/http.h"
#include "strata/record/record_reader.h"

namespace strata {
namespace {

using testing::FakeServer;
using testing::ReadAll;
using testing::RealRecordFiles;
using testing::ScopedEnv;
using testing::TempDir;
namespace fs = std::filesystem;

std::vector<std::string> Names(const data::Dataset& ds) {
  std::vector<std::string> out;
  auto it = ds.make_iterator();
  EXPECT_TRUE(it.ok());
  data::Element e;
  bool end = false;
  while ((*it)->GetNext(&e, &end).ok() && !end) out.push_back(data::TensorToString(e[0]).value());
  return out;
}

std::string Real(const std::string& n) { return std::string(STRATA_TESTDATA) + "/real/" + n; }

TEST(RemoteS3, S3rverListReadAndSignedRequests) {
  testing::S3rver s3rver;
  ASSERT_TRUE(s3rver.Start("bkt")) << s3rver.error;
  const std::string endpoint = s3rver.endpoint();

  // Upload with boto3, an independent client.
  TempDir src;
  for (const auto& n : RealRecordFiles()) fs::copy_file(Real(n), src.path + "/" + n);
  auto up = testing::RunCommand("python3 " + std::string(STRATA_SOURCE_DIR) + "/tests/e2e/remote/s3_upload.py " +
                                    endpoint + " bkt data/real " + src.path,
                                true);
  ASSERT_EQ(up.exit_code, 0) << up.output;

  ScopedEnv ep("STRATA_S3_ENDPOINT", endpoint);
  ScopedEnv key("AWS_ACCESS_KEY_ID", "S3RVER");
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "S3RVER");
  ScopedEnv region("AWS_REGION", "us-east-1");

  // ListObjectsV2 with prefix "data/real/tfx_" and the glob applied to the keys.
  auto ds = data::list_files("s3://bkt/data/real/tfx_*.gz");
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  std::vector<std::string> want;
  for (const auto& n : RealRecordFiles())
    if (n.starts_with("tfx_") && n.ends_with(".gz")) want.push_back("s3://bkt/data/real/" + n);
  EXPECT_EQ(Names(*ds), want);
  ASSERT_GE(want.size(), 4u);

  // Every object read through signed range requests equals the local file's records.
  for (const auto& n : RealRecordFiles()) {
    auto remote = ReadAll("s3://bkt/data/real/" + n);
    ASSERT_TRUE(remote.ok()) << remote.status().ToString();
    EXPECT_EQ(*remote, *ReadAll(Real(n))) << n;
  }

  // The command takes s3:// paths as they are (credentials and endpoint from the environment).
  auto count = testing::RunCommand(testing::Strata() + " records count --json s3://bkt/data/real/" + want[0].substr(want[0].rfind('/') + 1), true);
  ASSERT_EQ(count.exit_code, 0) << count.output;
  EXPECT_EQ(nlohmann::json::parse(count.output)["total"].get<int64_t>(),
            static_cast<int64_t>(ReadAll(Real(want[0].substr(want[0].rfind('/') + 1)))->size()));

  // An unknown access key is refused by the server: the error names the object and status.
  {
    ScopedEnv bad("AWS_ACCESS_KEY_ID", "NOT-A-KEY");
    auto r = record::RecordReader::Open(want[0]);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().ToString().find("HTTP 403"), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().ToString().find(want[0]), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().ToString().find("InvalidAccessKeyId"), std::string::npos) << r.status().ToString();
  }
  // A missing key: NotFound with the s3:// name.
  auto missing = record::RecordReader::Open("s3://bkt/data/real/nope.tfrecord");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().code() == StatusCode::kNotFound) << missing.status().ToString();
  EXPECT_NE(missing.status().ToString().find("s3://bkt/data/real/nope.tfrecord"), std::string::npos);
}

// s3rver answers ListObjectsV2 in pages of 1,000 keys (its default max-keys, as S3's), so
// 1,010 objects take two pages: the second is asked for with the continuation token.
TEST(RemoteS3, ListingPastAThousandKeysFollowsTheContinuationToken) {
  testing::S3rver s3rver;
  ASSERT_TRUE(s3rver.Start("bkt")) << s3rver.error;
  auto up = testing::RunCommand("python3 " + std::string(STRATA_SOURCE_DIR) + "/tests/e2e/remote/s3_upload.py " +
                                    s3rver.endpoint() + " bkt many --many 1010",
                                true);
  ASSERT_EQ(up.exit_code, 0) << up.output;
  ASSERT_EQ(up.output, "1010 21\n");  // 1,010 .tfrecord keys and 21 .txt keys between them
  ScopedEnv ep("STRATA_S3_ENDPOINT", s3rver.endpoint());
  ScopedEnv key("AWS_ACCESS_KEY_ID", "S3RVER");
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "S3RVER");
  ScopedEnv region("AWS_REGION", "us-east-1");

  const int64_t requests0 = io::Counters().requests.load(), retries0 = io::Counters().retries.load();
  auto listed = io::Glob("s3://bkt/many/part-*.tfrecord");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  // Two ListObjectsV2 pages (1,031 keys under the prefix "many/part-"), no retries.
  EXPECT_EQ(io::Counters().requests.load() - requests0, 2);
  EXPECT_EQ(io::Counters().retries.load() - retries0, 0);
  std::vector<std::string> want;
  for (int i = 0; i < 1010; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "s3://bkt/many/part-%05d.tfrecord", i);
    want.push_back(name);
  }
  EXPECT_EQ(*listed, want);  // every key once, sorted; the .txt keys of both pages left out

  // Through list_files: the keys past the first thousand.
  auto ds = data::list_files("s3://bkt/many/part-01*.tfrecord");
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(Names(*ds), std::vector<std::string>(want.begin() + 1000, want.end()));
  auto txt = io::Glob("s3://bkt/many/*.txt");
  ASSERT_TRUE(txt.ok()) << txt.status().ToString();
  EXPECT_EQ(txt->size(), 21u);
  EXPECT_EQ(txt->back(), "s3://bkt/many/part-01000.txt");
}

TEST(RemoteGcs, JsonListingPagesAndBearerTokenReads) {
  TempDir root;
  fs::create_directories(root.path + "/flowers/train");
  std::vector<std::string> want;
  for (const auto& n : RealRecordFiles()) {
    fs::copy_file(Real(n), root.path + "/flowers/train/" + n);
    if (n.ends_with(".tfrecord")) want.push_back("gs://flowers-public/flowers/train/" + n);
  }
  ASSERT_GE(want.size(), 3u);  // more than one page of two
  FakeServer server;
  ASSERT_TRUE(server.Start(root.path, {"--gcs", "flowers-public", "--token", "tok-123"})) << server.error;
  ScopedEnv endpoint("STRATA_GCS_ENDPOINT", server.url());
  {
    ScopedEnv token("GOOGLE_OAUTH_ACCESS_TOKEN", "tok-123");
    auto ds = data::list_files("gs://flowers-public/flowers/train/*.tfrecord");
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    EXPECT_EQ(Names(*ds), want);
    for (const auto& g : want) {
      auto remote = ReadAll(g);
      ASSERT_TRUE(remote.ok()) << remote.status().ToString();
      EXPECT_EQ(*remote, *ReadAll(Real(g.substr(g.rfind('/') + 1)))) << g;
    }
  }
  // Without the token this bucket answers 401: a clear error, not an empty dataset.
  ::unsetenv("GOOGLE_OAUTH_ACCESS_TOKEN");
  auto r = record::RecordReader::Open(want[0]);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("HTTP 401"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().ToString().find(want[0]), std::string::npos) << r.status().ToString();
  auto ds = data::list_files("gs://flowers-public/flowers/train/*.tfrecord");
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().ToString().find("HTTP 401"), std::string::npos) << ds.status().ToString();
}

}  // namespace
}  // namespace strata
