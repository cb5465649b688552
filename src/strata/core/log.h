// A small leveled logger. The level comes from STRATA_LOG (debug, info, warn, error, off;
// default warn) and can be changed at run time. Lines go to stderr:
//   "strata W 13:02:11.123 record/reader.cc:88] message"
#pragma once

#include <sstream>
#include <string_view>

namespace strata {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

LogLevel GetLogLevel();
void SetLogLevel(LogLevel level);
bool ParseLogLevel(std::string_view name, LogLevel* out);
void LogLine(LogLevel level, const char* file, int line, std::string_view message);

namespace internal {
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  ~LogMessage() { LogLine(level_, file_, line_, stream_.str()); }
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};
}  // namespace internal

}  // namespace strata

// STRATA_LOG(kInfo) << "read " << n << " records";  (nothing is formatted below the level)
#define STRATA_LOG(level)                                             \
  if (::strata::LogLevel::level < ::strata::GetLogLevel()) {          \
  } else                                                              \
    ::strata::internal::LogMessage(::strata::LogLevel::level, __FILE__, __LINE__).stream()
