// How a training run tells what it does: `train::Trainer` (trainer.h) runs in named phases and
// hands its account of them to a `Reporter`, so the library decides nothing about where the
// words go. `strata train` prints them and adds what to run next (tools/strata/cmd_train.cc);
// Python's `strata.train(...)` prints the same lines without the command's hints; a caller that
// wants none passes a `SilentReporter` (or `verbose` 0).
//
//   class Log : public train::Reporter {
//     void Line(const std::string& line) override { lines.push_back(line); }
//     std::vector<std::string> lines;
//   };
//   auto log = std::make_shared<Log>();
//   auto report = train::Run(recipe, log);
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <string>

namespace strata::train {

struct Recipe;
struct TrainReport;

// A run's phases, in the order they run. Create is `kPrepare` (checks, data, model, compile);
// Run fits (`kFitHead` while layers are frozen: the first phase of a fine-tune, or the whole fit
// with `freeze_until` alone; `kFitAll` with every layer trainable), then on the chief evaluates
// on `val` (with one), saves and reports.
enum class Phase { kPrepare, kFitHead, kFitAll, kEvaluate, kSave, kReport };
// "prepare", "fit head", "fit all", "evaluate", "save", "report".
const char* PhaseName(Phase phase);

// Hears the chief's account of a run (the other workers' is silent, as is every run with
// `verbose` 0). Each call comes from the thread that called Create or Run. The base class hears
// and does nothing.
class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void PhaseBegin(Phase) {}
  // `seconds`: the phase's wall time. A phase that fails does not end: its error is Run's.
  virtual void PhaseEnd(Phase, double /*seconds*/) {}
  // One line of the run's account, without its newline (the model's summary is one line of
  // several): what was resolved, loaded and trained, where the model went, `val`'s metrics.
  virtual void Line(const std::string&) {}
  // The run is over and saved: the recipe as run (resolved) and its report. Last of all.
  virtual void Finished(const Recipe&, const TrainReport&) {}
};

// Says nothing.
class SilentReporter final : public Reporter {};

// Prints each line to stdout: what `strata train` prints, less its hints of what to run next.
class ConsoleReporter : public Reporter {
 public:
  void Line(const std::string& line) override;
};

}  // namespace strata::train

#pragma GCC visibility pop
