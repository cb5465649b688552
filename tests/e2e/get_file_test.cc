// io::GetFile (Keras's utils.get_file, behind weights="imagenet") over a real loopback server
// (remote/fake_object_server.py): a download checked against its hash, a cache hit with the
// server gone, Keras's own cache used as it is, a stale copy replaced, a wrong hash, a
// connection cut halfway once (resumed) and every time (an error), and no server at all. Every
// failure names the URL and leaves nothing in the cache.
#include <gtest/gtest.h>

#include <random>

#include "remote_servers.h"
#include "strata/io/get_file.h"

namespace strata {
namespace {

using testing::FakeServer;
using testing::ScopedEnv;
using testing::TempDir;
namespace fs = std::filesystem;

class GetFile : public ::testing::Test {
 protected:
  void SetUp() override {
    // 3 MB of random bytes (several range blocks at the 1 MB block size below).
    std::mt19937_64 rng(7);
    contents_.resize(3 << 20);
    for (char& c : contents_) c = static_cast<char>(rng());
    std::ofstream(root_.path + "/" + kName, std::ios::binary) << contents_;
    md5_ = *io::FileHash(root_.path + "/" + kName, "md5");
    cache_ = cache_dir_.path + "/models";
  }
  io::GetFileOptions Options() const {
    return {.cache_dir = cache_, .use_default_search_dirs = false, .progress = false};
  }
  // The cache holds exactly `names` (no temporary left behind).
  std::vector<std::string> CacheFiles() const {
    std::vector<std::string> out;
    if (fs::exists(cache_))
      for (const auto& e : fs::directory_iterator(cache_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  static constexpr const char* kName = "resnet_weights.h5";
  TempDir root_, cache_dir_;
  std::string contents_, md5_, cache_;
  ScopedEnv block_{"STRATA_IO_BLOCK_BYTES", std::to_string(1 << 20)};
  ScopedEnv backoff_{"STRATA_IO_BACKOFF_MS", "10"};
};

TEST_F(GetFile, DownloadsOnceChecksTheHashThenUsesTheCache) {
  std::string url;
  {
    FakeServer server;
    ASSERT_TRUE(server.Start(root_.path, {})) << server.error;
    url = server.url() + "/" + kName;
    auto path = io::GetFile(kName, url, md5_, Options());
    ASSERT_TRUE(path.ok()) << path.status().ToString();
    EXPECT_EQ(*path, cache_ + "/" + kName);
    EXPECT_EQ(testing::ReadText(*path), contents_);
    EXPECT_EQ(CacheFiles(), std::vector<std::string>{kName});
  }
  // The server is gone: the cached copy (right hash) is the answer; sha256 hashes work too.
  auto again = io::GetFile(kName, url, md5_, Options());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, cache_ + "/" + kName);
  const std::string sha = *io::FileHash(*again, "sha256");
  EXPECT_EQ(sha.size(), 64u);
  EXPECT_TRUE(io::GetFile(kName, url, sha, Options()).ok());
  // No server and no copy: an error naming the URL, nothing left behind.
  fs::remove(cache_ + "/" + kName);
  auto gone = io::GetFile(kName, url, md5_, Options());
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find(url), std::string::npos) << gone.status().ToString();
  EXPECT_TRUE(CacheFiles().empty());
}

TEST_F(GetFile, KerassCacheIsUsedAsItIsAndAStaleCopyIsReplaced) {
  TempDir keras;
  fs::copy_file(root_.path + "/" + kName, keras.path + "/" + kName);
  io::GetFileOptions o = Options();
  o.search_dirs = {keras.path};
  auto found = io::GetFile(kName, "http://127.0.0.1:9/unused", md5_, o);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, keras.path + "/" + kName);
  // A copy whose hash is wrong (cut short) is not used: downloaded again into the cache.
  fs::create_directories(cache_);
  std::ofstream(cache_ + "/" + kName, std::ios::binary) << contents_.substr(0, 1000);
  FakeServer server;
  ASSERT_TRUE(server.Start(root_.path, {})) << server.error;
  auto fresh = io::GetFile(kName, server.url() + "/" + kName, md5_, Options());
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(testing::ReadText(*fresh), contents_);
}

TEST_F(GetFile, AWrongHashIsAnErrorNamingTheUrlAndKeepsNothing) {
  FakeServer server;
  ASSERT_TRUE(server.Start(root_.path, {})) << server.error;
  const std::string url = server.url() + "/" + kName;
  auto bad = io::GetFile(kName, url, "0123456789abcdef0123456789abcdef", Options());
  ASSERT_FALSE(bad.ok());
  const std::string m = bad.status().ToString();
  EXPECT_NE(m.find(url), std::string::npos) << m;
  EXPECT_NE(m.find("md5 is " + md5_), std::string::npos) << m;
  EXPECT_TRUE(CacheFiles().empty()) << CacheFiles()[0];
  // A name with a slash would write outside the cache.
  EXPECT_FALSE(io::GetFile("../x.h5", url, md5_, Options()).ok());
}

TEST_F(GetFile, AConnectionCutHalfwayResumesAndOneCutEveryTimeFails) {
  {
    FakeServer server;  // the first two GETs send half their body, then close
    ASSERT_TRUE(server.Start(root_.path, {"--drop-mid-body", "2"})) << server.error;
    auto path = io::GetFile(kName, server.url() + "/" + kName, md5_, Options());
    ASSERT_TRUE(path.ok()) << path.status().ToString();
    EXPECT_EQ(testing::ReadText(*path), contents_);
  }
  fs::remove_all(cache_);
  FakeServer server;  // every GET is cut
  ASSERT_TRUE(server.Start(root_.path, {"--drop-mid-body", "1000"})) << server.error;
  ScopedEnv retries("STRATA_IO_MAX_RETRIES", "2");
  const std::string url = server.url() + "/" + kName;
  auto cut = io::GetFile(kName, url, md5_, Options());
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find(url), std::string::npos) << cut.status().ToString();
  EXPECT_TRUE(CacheFiles().empty());
}

}  // namespace
}  // namespace strata
