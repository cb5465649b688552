#include "strata/core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace strata {
namespace {

LogLevel LevelFromEnv() {
  LogLevel level = LogLevel::kWarn;
  if (const char* env = std::getenv("STRATA_LOG")) {
    if (!ParseLogLevel(env, &level)) {
      std::fprintf(stderr, "strata: STRATA_LOG=%s is not one of debug, info, warn, error, off; using warn\n", env);
      level = LogLevel::kWarn;
    }
  }
  return level;
}

std::atomic<int>& Level() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

}  // namespace

LogLevel GetLogLevel() { return static_cast<LogLevel>(Level().load(std::memory_order_relaxed)); }
void SetLogLevel(LogLevel level) { Level().store(static_cast<int>(level)); }

bool ParseLogLevel(std::string_view name, LogLevel* out) {
  static constexpr std::pair<std::string_view, LogLevel> kNames[] = {
      {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo}, {"warn", LogLevel::kWarn},
      {"warning", LogLevel::kWarn}, {"error", LogLevel::kError}, {"off", LogLevel::kOff}};
  for (const auto& [n, l] : kNames) {
    if (n == name) {
      *out = l;
      return true;
    }
  }
  return false;
}

void LogLine(LogLevel level, const char* file, int line, std::string_view message) {
  static std::mutex mu;
  static constexpr char kLetters[] = "DIWE";
  std::string_view path(file);
  // Show the path below src/strata/ only.
  if (auto pos = path.rfind("strata/"); pos != std::string_view::npos) path.remove_prefix(pos + 7);
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "strata %c %02d:%02d:%02d.%03d %.*s:%d] %.*s\n", kLetters[static_cast<int>(level)], tm.tm_hour,
               tm.tm_min, tm.tm_sec, ms, static_cast<int>(path.size()), path.data(), line,
               static_cast<int>(message.size()), message.data());
}

}  // namespace strata
