// nlohmann::json helpers shared by the monitor's formatters (internal header).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "strata/monitor/input_report.h"
#include "strata/monitor/window.h"

namespace strata::monitor {

// Never throws: invalid UTF-8 (a stage name from user code) becomes U+FFFD.
inline std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json WindowJson(const Window& w);
nlohmann::json RunInfoJson(const RunInfo& info);
nlohmann::json ReportJson(const InputPipelineReport& r);

}  // namespace strata::monitor
