// The trainer: runs a `Recipe` (recipe.h) as `strata train` does, from the records to the saved
// model, on every core of this process and every worker of an mpirun/srun job.
//
//   auto trainer = train::Trainer::Create(recipe);   // prepare: checks, data, model, compile; no step yet
//   auto report = (*trainer)->Run();                 // fit head, fit all, evaluate, save, report
//
// Each is a sequence of named phases (reporter.h) that the trainer tells its `Reporter` of, with
// a line for each thing it resolved, loaded or wrote; the library's console reporter prints
// them, `strata train`'s adds what to run next. Create resolves what the recipe leaves open (the
// image size and channels, the classes) from the model and the records; `recipe()` then holds
// the values used. Every worker runs both calls; the chief (worker 0) alone reports, evaluates
// and saves. With `verbose` 0 the reporter hears nothing.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/keras/model.h"
#include "strata/train/recipe.h"
#include "strata/train/reporter.h"

namespace strata::train {

struct TrainReport {
  bool chief = true;  // false on the other workers: they train, and the chief reports
  keras::History history;  // both phases of a fine-tune, one after the other
  // On `val` after training (0 without it).
  double val_loss = 0, val_accuracy = 0, val_f1_macro = 0;
  double val_accuracy_tta = 0;  // with the recipe's test-time augmentation (tta.h); 0 without one
  std::string model_path;  // where the trained model was saved
  int replicas = 0;        // in sync, over every worker
  int64_t global_batch = 0, steps_per_epoch = 0;
  // train_seconds: from fit's start (the first step's compile included) to the end of the last
  // epoch, less validation_seconds, the validation passes after each epoch; images_per_second
  // is over train_seconds.
  double wall_seconds = 0, train_seconds = 0, validation_seconds = 0, images_per_second = 0;
  std::vector<double> seconds_at_epoch_end;  // since fit began, validation included: time to accuracy
  std::string cross_host_json;  // what crossed between workers (docs/distribute.md); "" with one worker
};

class Trainer {
 public:
  // Checks the recipe (an InvalidArgument names the field as its flag), makes the default
  // dataset when `data` is empty, the strategy, the pipelines and the model, and compiles it.
  // `reporter` hears the run (nullptr: a ConsoleReporter).
  static Result<std::unique_ptr<Trainer>> Create(Recipe recipe, std::shared_ptr<Reporter> reporter = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains, evaluates on `val`, saves to `out` (recording how to rebuild the model) and reports.
  // Call once.
  Result<TrainReport> Run();

  const Recipe& recipe() const;  // with what Create resolved
  keras::Model& model();
  bool chief() const;

  struct State;

 private:
  explicit Trainer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Trainer::Create(recipe, reporter) then Run().
Result<TrainReport> Run(const Recipe& recipe, std::shared_ptr<Reporter> reporter = nullptr);

// Where worker `worker` of a multi-worker job writes its Chrome trace: the chief (0) `trace`
// itself, worker w > 0 `trace` with ".worker<w>" before its extension (t.json -> t.worker1.json).
std::string WorkerTracePath(const std::string& trace, int worker);

// The report as `strata train --summary-json` writes it.
std::string ReportJson(const Recipe& recipe, const TrainReport& report);

}  // namespace strata::train

#pragma GCC visibility pop
