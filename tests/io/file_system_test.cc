// Scheme dispatch, object-store glob helpers, and remote errors that need no server.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "strata/io/file_system.h"
#include "strata/io/http.h"

namespace strata::io {
namespace {

TEST(FileSystem, SchemeChoosesTheFileSystem) {
  EXPECT_EQ(Scheme("/data/x.tfrecord"), "");
  EXPECT_EQ(Scheme("relative/x:y"), "");
  EXPECT_EQ(Scheme("https://h/x"), "https");
  EXPECT_EQ(Scheme("s3://b/k"), "s3");
  EXPECT_EQ(Scheme("gs://b/k"), "gs");
  EXPECT_FALSE(IsRemote("/tmp/a://b"));  // a colon inside a local path is not a scheme
  auto ftp = OpenFile("ftp://host/x.tfrecord");
  ASSERT_FALSE(ftp.ok());
  EXPECT_NE(ftp.status().ToString().find("ftp://"), std::string::npos) << ftp.status().ToString();
}

TEST(FileSystem, LocalGlobIsSortedAndEmptyWhenNothingMatches) {
  auto names = Glob(std::string(STRATA_TESTDATA) + "/real/tfx_*.gz");
  ASSERT_TRUE(names.ok()) << names.status().ToString();
  ASSERT_GE(names->size(), 4u);
  EXPECT_TRUE(std::is_sorted(names->begin(), names->end()));
  auto none = Glob(std::string(STRATA_TESTDATA) + "/real/*.nothing");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(FileSystem, ObjectKeysMatchLikeLocalGlob) {
  EXPECT_EQ(LiteralPrefix("data/train-*-of-00016.tfrecord"), "data/train-");
  EXPECT_EQ(LiteralPrefix("data/x.tfrecord"), "data/x.tfrecord");
  EXPECT_EQ(LiteralPrefix("data/shard-?"), "data/shard-");
  EXPECT_TRUE(GlobMatch("data/train-*.tfrecord", "data/train-00001.tfrecord"));
  EXPECT_FALSE(GlobMatch("data/*.tfrecord", "data/sub/x.tfrecord"));  // '*' stays in one folder
  EXPECT_TRUE(GlobMatch("data/shard-[0-3]", "data/shard-2"));
  EXPECT_FALSE(GlobMatch("data/shard-[0-3]", "data/shard-7"));
}

TEST(Http, ConnectionRefusedIsRetriedThenNamesTheUrl) {
  // A port nobody listens on: bound, then closed.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/x.tfrecord";
  HttpOptions o;
  o.max_retries = 2;
  o.backoff_initial_ms = 1;
  const int64_t retries0 = Counters().retries.load();
  auto f = OpenHttpFile(url, url, {}, o);
  ASSERT_FALSE(f.ok());
  const std::string m = f.status().ToString();
  EXPECT_NE(m.find(url), std::string::npos) << m;
  EXPECT_NE(m.find("gave up after 3 attempts"), std::string::npos) << m;
  EXPECT_EQ(Counters().retries.load() - retries0, 2);
}

TEST(Http, OptionsComeFromTheEnvironment) {
  ::setenv("STRATA_IO_BLOCK_BYTES", "1048576", 1);
  ::setenv("STRATA_IO_READAHEAD_BLOCKS", "4", 1);
  ::setenv("STRATA_IO_MAX_RETRIES", "oops", 1);  // not a number: the default stays
  const HttpOptions o = HttpOptions::FromEnv();
  EXPECT_EQ(o.block_bytes, 1u << 20);
  EXPECT_EQ(o.readahead_blocks, 4);
  EXPECT_EQ(o.max_retries, HttpOptions{}.max_retries);
  ::unsetenv("STRATA_IO_BLOCK_BYTES");
  ::unsetenv("STRATA_IO_READAHEAD_BLOCKS");
  ::unsetenv("STRATA_IO_MAX_RETRIES");
}

}  // namespace
}  // namespace strata::io
