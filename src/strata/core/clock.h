// Monotonic clocks for timing steps and windows, wall time for event files, and the CPU time
// this process has used.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace strata {

using MonoClock = std::chrono::steady_clock;

inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(MonoClock::now().time_since_epoch()).count();
}
inline double NowSeconds() { return static_cast<double>(NowNanos()) * 1e-9; }
// Seconds since the Unix epoch (TensorBoard's Event.wall_time).
inline double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// CPU seconds this process has used so far, all its threads, user and system: beside a step's
// wall time it says how much of a core the step had (on cores shared with other work).
inline double ProcessCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Measures elapsed time since construction or the last Reset().
class Stopwatch {
 public:
  Stopwatch() : start_(NowNanos()) {}
  void Reset() { start_ = NowNanos(); }
  int64_t ElapsedNanos() const { return NowNanos() - start_; }
  double ElapsedSeconds() const { return static_cast<double>(ElapsedNanos()) * 1e-9; }

 private:
  int64_t start_;
};

}  // namespace strata
