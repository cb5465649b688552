// Fuzzes the monitor's JSON parser (window.h WindowFromJson), which reads what a remote
// /api/v1/monitor answers in `strata monitor URL`: any bytes must give a Window or a clear
// error, never a crash, an exception or undefined behaviour. A parsed window must survive a
// round trip through WindowToJson and the console/Prometheus formatters.
#include <cstdint>
#include <string>

#include "strata/monitor/window.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto w = strata::monitor::WindowFromJson(text);
  if (!w.ok()) return 0;
  const std::string again = strata::monitor::WindowToJson(*w);
  auto back = strata::monitor::WindowFromJson(again);
  if (!back.ok() || back->index != w->index || back->replicas.size() != w->replicas.size() ||
      back->stages.size() != w->stages.size())
    __builtin_trap();
  (void)strata::monitor::FormatConsoleLine(*w, "img");
  (void)strata::monitor::FormatPrometheus(strata::monitor::RunInfo{}, *w);
  return 0;
}
