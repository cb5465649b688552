#include "strata/core/file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "strata/core/clock.h"
#include "common/temp_path.h"

namespace strata {
namespace {

std::string TempPath(const std::string& name) {
  auto dir = std::filesystem::path(test::TempPath("strata-file-test"));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(File, AtomicWriteAppearsOnlyAfterClose) {
  std::string path = TempPath("atomic.bin");
  std::filesystem::remove(path);
  auto f = NewAtomicWritableFile(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("hello ").ok());
  ASSERT_TRUE((*f)->Append(std::string(200000, 'x')).ok());  // larger than the buffer
  ASSERT_TRUE((*f)->Flush().ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  ASSERT_TRUE((*f)->Close().ok());
  auto back = ReadFileToString(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->size(), 200006u);
  EXPECT_EQ(back->substr(0, 6), "hello ");
}

TEST(File, AbandonedAtomicWriteLeavesNothing) {
  std::string path = TempPath("abandoned.bin");
  std::filesystem::remove(path);
  {
    auto f = NewAtomicWritableFile(path);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append("half").ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    EXPECT_EQ(e.path().filename().string().find("abandoned.bin.tmp"), std::string::npos) << e.path();
}

TEST(File, AppendingFileIsVisibleAfterFlush) {
  std::string path = TempPath("growing.log");
  auto f = NewAppendingFile(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("abc").ok());
  ASSERT_TRUE((*f)->Flush().ok());
  EXPECT_EQ(*ReadFileToString(path), "abc");
  ASSERT_TRUE((*f)->Close().ok());
}

TEST(File, RandomAccessReadsAndErrors) {
  auto m = NewMemoryFile("mem", "0123456789");
  char buf[8];
  auto n = m->Read(6, 8, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 4u);
  EXPECT_EQ(std::string(buf, 4), "6789");
  EXPECT_EQ(*m->Read(20, 4, buf), 0u);
  EXPECT_EQ(*m->Size(), 10u);
  auto missing = OpenRandomAccessFile("/definitely/not/here");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/definitely/not/here"), std::string::npos);
  EXPECT_FALSE(OpenRandomAccessFile(::testing::TempDir()).ok());
}

TEST(Clock, StopwatchIsMonotonic) {
  Stopwatch sw;
  int64_t a = sw.ElapsedNanos();
  int64_t b = sw.ElapsedNanos();
  EXPECT_GE(b, a);
  EXPECT_GT(WallSeconds(), 1.6e9);
}

}  // namespace
}  // namespace strata
