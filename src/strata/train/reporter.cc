#include "strata/train/reporter.h"

#include <cstdio>

namespace strata::train {

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kPrepare: return "prepare";
    case Phase::kFitHead: return "fit head";
    case Phase::kFitAll: return "fit all";
    case Phase::kEvaluate: return "evaluate";
    case Phase::kSave: return "save";
    case Phase::kReport: return "report";
  }
  return "?";
}

void ConsoleReporter::Line(const std::string& line) { std::printf("%s\n", line.c_str()); }

}  // namespace strata::train
