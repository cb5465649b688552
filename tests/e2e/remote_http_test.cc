// Remote reads over real loopback servers: nginx serving TensorFlow-written TFRecord files
// (range requests, keep-alive), and a fault-injecting server (503s, connections dropped
// mid-body): every record arrives once, in order, equal to the local read.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <sstream>
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
using testing::Nginx;
using testing::ReadAll;
using testing::RealRecordFiles;
using testing::ScopedEnv;
using testing::TempDir;
namespace fs = std::filesystem;

// Copies the real files into a served folder.
void CopyReal(const std::string& root) {
  for (const auto& n : RealRecordFiles()) fs::copy_file(std::string(STRATA_TESTDATA) + "/real/" + n, root + "/" + n);
  fs::permissions(root, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
}

TEST(RemoteHttp, NginxServesEveryRealRecordEqualToTheLocalRead) {
  TempDir root;
  CopyReal(root.path);
  Nginx nginx;
  ASSERT_TRUE(nginx.Start(root.path)) << nginx.error;
  // Small blocks: many range requests per file, records split across block boundaries.
  ScopedEnv block("STRATA_IO_BLOCK_BYTES", "4096");
  int64_t total = 0, blocks = 0;
  for (const auto& n : RealRecordFiles()) {
    blocks += static_cast<int64_t>((fs::file_size(root.path + "/" + n) + 4095) / 4096);
    auto local = ReadAll(root.path + "/" + n);
    ASSERT_TRUE(local.ok()) << local.status().ToString();
    const std::string url = "http://127.0.0.1:" + std::to_string(nginx.port) + "/" + n;
    auto remote = ReadAll(url);
    ASSERT_TRUE(remote.ok()) << remote.status().ToString();
    EXPECT_EQ(*remote, *local) << url;
    total += static_cast<int64_t>(local->size());
  }
  EXPECT_GT(total, 1000);
  // Keep-alive: the requests went over far fewer connections than there were requests.
  std::set<std::string> connections;
  int requests = 0, partial = 0;
  std::istringstream log(testing::ReadText(nginx.access_log()));
  for (std::string conn, n, status, bytes; log >> conn >> n >> status >> bytes;) {
    connections.insert(conn);
    ++requests;
    partial += status == "206";
  }
  EXPECT_EQ(requests, blocks);  // each 4 KiB block fetched exactly once (8 MB: ~1,970 requests)
  EXPECT_EQ(partial, requests);
  EXPECT_LT(connections.size() * 20, static_cast<size_t>(requests)) << connections.size() << " connections";
}

TEST(RemoteHttp, ParallelTFRecordDatasetOverHttpEqualsLocalAndCliCounts) {
  TempDir root;
  CopyReal(root.path);
  Nginx nginx;
  ASSERT_TRUE(nginx.Start(root.path)) << nginx.error;
  std::vector<std::string> local, remote;
  for (const auto& n : RealRecordFiles()) {
    local.push_back(root.path + "/" + n);
    remote.push_back("http://127.0.0.1:" + std::to_string(nginx.port) + "/" + n);
  }
  std::string table;
  double stream_mb_per_s = 0;
  auto records = [&](std::vector<std::string> files) {
    std::vector<std::string> out;
    auto it = data::TFRecordDataset(std::move(files), {.num_parallel_reads = 4}).make_iterator();
    EXPECT_TRUE(it.ok()) << it.status().ToString();
    data::Element e;
    bool end = false;
    while (true) {
      Status s = (*it)->GetNext(&e, &end);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok() || end) break;
      out.emplace_back(data::TensorToString(e[0]).value());
    }
    // Each open file is a stream; the shared "tfrecord" stage reports bytes per busy second.
    table = (*it)->StatsTable();
    for (const auto& st : (*it)->Stats())
      if (st.name == "tfrecord" && st.busy_ns > 0) stream_mb_per_s = static_cast<double>(st.bytes) * 1e3 / st.busy_ns;
    return out;
  };
  const auto a = records(local), b = records(remote);
  EXPECT_NE(table.find("MB/s/str"), std::string::npos) << table;
  EXPECT_GT(stream_mb_per_s, 0.0) << table;
  EXPECT_GT(a.size(), 1000u);
  EXPECT_EQ(a, b);  // same interleave order, same bytes

  // `strata records count` takes the URLs as they are.
  const std::string first = remote[0];
  auto r = testing::RunCommand(testing::Strata() + " records count --json " + first + " " + local[0], true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["files"][0]["records"], j["files"][1]["records"]);
  EXPECT_EQ(j["files"][0]["path"], first);

  // A missing object: the status and the URL, at open time.
  const std::string missing = "http://127.0.0.1:" + std::to_string(nginx.port) + "/no-such.tfrecord";
  auto m = record::RecordReader::Open(missing);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().code() == StatusCode::kNotFound) << m.status().ToString();
  EXPECT_NE(m.status().message().find("HTTP 404"), std::string::npos) << m.status().ToString();
  EXPECT_NE(m.status().message().find(missing), std::string::npos) << m.status().ToString();
  auto cli = testing::RunCommand(testing::Strata() + " records count " + missing, true);
  EXPECT_NE(cli.exit_code, 0);
  EXPECT_NE(cli.output.find("404"), std::string::npos) << cli.output;
}

// The largest real file, read in 4 KiB blocks through a server that fails on purpose.
class RemoteFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    CopyReal(root_.path);
    size_t best = 0;
    for (const auto& n : RealRecordFiles())
      if (fs::file_size(root_.path + "/" + n) > best) best = fs::file_size(root_.path + "/" + n), name_ = n;
    auto local = ReadAll(root_.path + "/" + name_);
    ASSERT_TRUE(local.ok()) << local.status().ToString();
    local_ = *local;
  }
  TempDir root_;
  std::string name_;
  std::vector<std::string> local_;
  ScopedEnv block_{"STRATA_IO_BLOCK_BYTES", "65536"};
  ScopedEnv backoff_{"STRATA_IO_BACKOFF_MS", "1"};
};

TEST_F(RemoteFaults, Retries503AndReturnsTheSameRecords) {
  FakeServer server;
  ASSERT_TRUE(server.Start(root_.path, {"--fail-503", "3"})) << server.error;
  const int64_t retries0 = io::Counters().retries.load();
  auto remote = ReadAll(server.url() + "/" + name_);
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(*remote, local_);
  EXPECT_GE(io::Counters().retries.load() - retries0, 3);
}

TEST_F(RemoteFaults, ConnectionDroppedMidBodyIsRetriedNothingTwiceNothingSkipped) {
  FakeServer server;
  // The first four GETs (block 0 and the read-ahead blocks) lose their connection halfway.
  ASSERT_TRUE(server.Start(root_.path, {"--drop-mid-body", "4"})) << server.error;
  const int64_t retries0 = io::Counters().retries.load();
  auto remote = ReadAll(server.url() + "/" + name_);
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(remote->size(), local_.size());
  EXPECT_EQ(*remote, local_);
  EXPECT_GE(io::Counters().retries.load() - retries0, 4);
}

TEST_F(RemoteFaults, RetryBudgetSpentIsAClearErrorNamingUrlAndStatus) {
  FakeServer server;
  ASSERT_TRUE(server.Start(root_.path, {"--fail-503", "1000"})) << server.error;
  ScopedEnv retries("STRATA_IO_MAX_RETRIES", "2");
  const std::string url = server.url() + "/" + name_;
  auto remote = ReadAll(url);
  ASSERT_FALSE(remote.ok());
  const std::string m = remote.status().ToString();
  EXPECT_NE(m.find(url), std::string::npos) << m;
  EXPECT_NE(m.find("HTTP 503"), std::string::npos) << m;
  EXPECT_NE(m.find("gave up after 3 attempts"), std::string::npos) << m;
}

// A server that sends part of a body and then nothing on an open connection: abandoned after
// STRATA_IO_STALL_TIMEOUT_S below 1 KB/s, retried, and the records are the local ones.
TEST_F(RemoteFaults, ServerStallingMidBodyIsRetriedNothingTwiceNothingSkipped) {
  FakeServer server;
  ASSERT_TRUE(server.Start(root_.path, {"--stall-mid-body", "2"})) << server.error;
  ScopedEnv stall("STRATA_IO_STALL_TIMEOUT_S", "1");
  const int64_t retries0 = io::Counters().retries.load();
  auto remote = ReadAll(server.url() + "/" + name_);
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(*remote, local_);
  EXPECT_EQ(io::Counters().retries.load() - retries0, 2);
}

// docs/remote.md's bound for a request whose every attempt stalls: (1 + STRATA_IO_MAX_RETRIES)
// attempts, each ended after at most STRATA_IO_CONNECT_TIMEOUT_S + STRATA_IO_STALL_TIMEOUT_S
// + 6 s (libcurl's speed window), plus the backoffs between them. Seconds.
double DocumentedBound(int max_retries, int connect_timeout_s, int stall_timeout_s, int backoff_ms) {
  double backoff = 0;
  for (int k = 0; k < max_retries; ++k) backoff += std::min(backoff_ms * double(1 << k), 5000.0) / 1000;
  return (1 + max_retries) * double(connect_timeout_s + stall_timeout_s + 6) + backoff;
}

TEST_F(RemoteFaults, ServerStallingEveryTimeFailsWithinTheDocumentedBoundNamingTheUrl) {
  FakeServer server;
  ASSERT_TRUE(server.Start(root_.path, {"--stall-mid-body", "1000"})) << server.error;
  ScopedEnv stall("STRATA_IO_STALL_TIMEOUT_S", "1");
  ScopedEnv retries("STRATA_IO_MAX_RETRIES", "2");
  ScopedEnv connect("STRATA_IO_CONNECT_TIMEOUT_S", "5");
  const std::string url = server.url() + "/" + name_;
  const int64_t requests0 = io::Counters().requests.load();
  const auto t0 = std::chrono::steady_clock::now();
  auto remote = ReadAll(url);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(remote.ok());
  const std::string m = remote.status().ToString();
  EXPECT_NE(m.find(url), std::string::npos) << m;
  EXPECT_NE(m.find("Timeout was reached"), std::string::npos) << m;  // curl's words for the stall
  EXPECT_NE(m.find("gave up after 3 attempts"), std::string::npos) << m;
  EXPECT_EQ(io::Counters().requests.load() - requests0, 3);
  // A generous upper limit, as the issue asks: the documented bound (36 s), not a speed.
  EXPECT_LT(seconds, DocumentedBound(2, 5, 1, 1)) << m;
}

TEST_F(RemoteFaults, ServerClosingMidBodyEveryTimeFailsNamingTheUrl) {
  FakeServer server;
  ASSERT_TRUE(server.Start(root_.path, {"--drop-mid-body", "1000"})) << server.error;
  ScopedEnv retries("STRATA_IO_MAX_RETRIES", "2");
  const std::string url = server.url() + "/" + name_;
  const int64_t requests0 = io::Counters().requests.load();
  auto remote = ReadAll(url);
  ASSERT_FALSE(remote.ok());
  const std::string m = remote.status().ToString();
  EXPECT_NE(m.find(url), std::string::npos) << m;
  EXPECT_NE(m.find("gave up after 3 attempts"), std::string::npos) << m;
  EXPECT_EQ(io::Counters().requests.load() - requests0, 3);
}

TEST_F(RemoteFaults, AServerThatIgnoresRangeStillGivesEveryRecordOnce) {
  FakeServer server;
  ASSERT_TRUE(server.Start(root_.path, {"--no-range"})) << server.error;
  const int64_t requests0 = io::Counters().requests.load();
  auto remote = ReadAll(server.url() + "/" + name_);
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(*remote, local_);
  EXPECT_EQ(io::Counters().requests.load() - requests0, 1);  // the whole body once, kept as one block
}

TEST_F(RemoteFaults, ThreadsReadingOneFileAtRandomOffsetsGetTheLocalBytes) {
  FakeServer server;
  ASSERT_TRUE(server.Start(root_.path, {})) << server.error;
  const std::string local_path = root_.path + "/" + name_;
  auto local = OpenRandomAccessFile(local_path);
  auto remote = io::OpenFile(server.url() + "/" + name_);
  ASSERT_TRUE(local.ok() && remote.ok()) << remote.status().ToString();
  const uint64_t size = *(*local)->Size();
  ASSERT_EQ(*(*remote)->Size(), size);
  // Four threads, each seeking around its own part of the file and evicting the others'
  // read-ahead blocks (64 KiB blocks): every read returns exactly the local bytes.
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::string a(100000, '\0'), b(100000, '\0');
      for (int i = 0; i < 60; ++i) {
        const uint64_t off = rng() % size;
        const size_t n = 1 + rng() % a.size();
        auto x = (*local)->Read(off, n, a.data());
        auto y = (*remote)->Read(off, n, b.data());
        if (!x.ok() || !y.ok() || *x != *y || a.compare(0, *x, b, 0, *y) != 0) ++mismatches;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(RemoteFaults, HttpHasNoListingButANamedUrlPassesThroughListFiles) {
  FakeServer server;
  ASSERT_TRUE(server.Start(root_.path, {})) << server.error;
  auto ds = data::list_files(server.url() + "/*.tfrecord");
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().ToString().find("no directory listing"), std::string::npos) << ds.status().ToString();
  auto one = io::Glob(server.url() + "/" + name_);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, std::vector<std::string>{server.url() + "/" + name_});
}

// https:// to nginx with TLS, its certificate signed by a CA made here (openssl): verified
// against STRATA_CA_BUNDLE it reads every record equal to the local read; against another CA,
// or the system's CAs, it is refused at open with an error naming the URL.
TEST(RemoteTls, NginxWithATestCaIsVerifiedAndAWrongCaIsRefused) {
  TempDir root, tls;
  CopyReal(root.path);
  testing::TestCa ca;
  ASSERT_TRUE(ca.Make(tls.path)) << ca.error;
  Nginx nginx;
  ASSERT_TRUE(nginx.Start(root.path, ca.server_cert, ca.server_key)) << nginx.error;
  const std::string base = "https://127.0.0.1:" + std::to_string(nginx.port) + "/";
  {
    ScopedEnv bundle("STRATA_CA_BUNDLE", ca.ca);
    ScopedEnv block("STRATA_IO_BLOCK_BYTES", "65536");
    for (const auto& n : RealRecordFiles()) {
      auto remote = ReadAll(base + n);
      ASSERT_TRUE(remote.ok()) << remote.status().ToString();
      EXPECT_EQ(*remote, *ReadAll(root.path + "/" + n)) << n;
    }
    // The command line takes the same variable.
    auto r = testing::RunCommand("STRATA_CA_BUNDLE=" + ca.ca + " " + testing::Strata() + " records count --json " +
                                     base + RealRecordFiles()[0],
                                 true);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(nlohmann::json::parse(r.output)["total"].get<int64_t>(),
              static_cast<int64_t>(ReadAll(root.path + "/" + RealRecordFiles()[0])->size()));
  }
  const std::string url = base + RealRecordFiles()[0];
  {
    // The wrong CA: refused at once (not retried), naming the URL and the bundle.
    ScopedEnv bundle("STRATA_CA_BUNDLE", ca.other_ca);
    const int64_t requests0 = io::Counters().requests.load();
    auto r = record::RecordReader::Open(url);
    ASSERT_FALSE(r.ok());
    const std::string m = r.status().ToString();
    EXPECT_NE(m.find(url), std::string::npos) << m;
    EXPECT_NE(m.find("certificate"), std::string::npos) << m;
    EXPECT_NE(m.find("checked against the CAs in " + ca.other_ca), std::string::npos) << m;
    EXPECT_EQ(io::Counters().requests.load() - requests0, 1);
    auto cli = testing::RunCommand("STRATA_CA_BUNDLE=" + ca.other_ca + " " + testing::Strata() + " records count " + url,
                                   true);
    EXPECT_NE(cli.exit_code, 0);
    EXPECT_NE(cli.output.find(url), std::string::npos) << cli.output;
    EXPECT_NE(cli.output.find("certificate"), std::string::npos) << cli.output;
  }
  {
    // No bundle named: the system's CAs, which do not hold the test CA; the error says what to set.
    ScopedEnv none("STRATA_CA_BUNDLE", ""), none_either("CURL_CA_BUNDLE", "");  // empty = not set
    auto r = record::RecordReader::Open(url);
    ASSERT_FALSE(r.ok());
    const std::string m = r.status().ToString();
    EXPECT_NE(m.find(url), std::string::npos) << m;
    EXPECT_NE(m.find("set STRATA_CA_BUNDLE"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace strata
