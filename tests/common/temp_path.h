// A path under gtest's temp directory that is this process's own: ctest runs each unit test
// twice at once (as built and capped to AVX2, `avx2:`), so a fixed name is a race between the
// two copies (one once read the other's half-written checkpoint).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace strata::test {

inline std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name + "-" + std::to_string(::getpid());
}

// TempPath(name) as an empty directory: whatever an earlier run left there is removed.
inline std::filesystem::path FreshTempDir(const std::string& name) {
  const std::filesystem::path dir = TempPath(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace strata::test
