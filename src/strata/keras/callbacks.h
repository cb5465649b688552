// Keras callbacks: hooks fit() calls around epochs and batches.
//
// A hook returns a Status: an error stops fit() and is returned from it. Callbacks reach the
// model through model() (stop_training, learning-rate scale, weights).
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/keras/model.h"

namespace strata::keras {

struct TrainInfo {
  int epochs = 1;
  int initial_epoch = 0;
  int64_t steps_per_epoch = -1;  // -1: unknown until the first epoch ends
  int verbose = 1;
  int64_t global_batch = 0;
  int replicas = 1;
};

class Callback {
 public:
  virtual ~Callback() = default;
  void set_model(Model* m) { model_ = m; }
  Model* model() const { return model_; }
  virtual Status OnTrainBegin(const TrainInfo& info) { return Status::OK(); }
  virtual Status OnEpochBegin(int epoch) { return Status::OK(); }
  virtual Status OnTrainBatchEnd(int64_t batch, const Logs& logs) { return Status::OK(); }
  // `logs` holds the epoch's training and validation values; callbacks may add to it.
  virtual Status OnEpochEnd(int epoch, Logs& logs) { return Status::OK(); }
  virtual Status OnTrainEnd(const Logs& logs) { return Status::OK(); }
  // Around fit's validation at the end of each epoch (Keras's on_test_begin / on_test_end);
  // `logs` holds the validation values, not yet prefixed with "val_".
  virtual Status OnTestBegin() { return Status::OK(); }
  virtual Status OnTestEnd(const Logs& logs) { return Status::OK(); }

 private:
  Model* model_ = nullptr;
};

// "min" for losses, "max" for accuracies, "auto" picks from the name.
enum class Mode { kAuto, kMin, kMax };

// The Keras progress bar (verbose 1) or one line per epoch (verbose 2, or stdout not a terminal).
class ProgbarLogger final : public Callback {
 public:
  explicit ProgbarLogger(FILE* out = stdout);
  Status OnTrainBegin(const TrainInfo& info) override;
  Status OnEpochBegin(int epoch) override;
  Status OnTrainBatchEnd(int64_t batch, const Logs& logs) override;
  Status OnEpochEnd(int epoch, Logs& logs) override;
  // Renders one progress line (tested against Keras's layout).
  static std::string Line(int64_t done, int64_t total, double elapsed_s, const Logs& logs, bool finished);

 private:
  FILE* out_;
  bool tty_ = false;
  TrainInfo info_;
  double epoch_start_ = 0, last_draw_ = 0;
  int64_t steps_seen_ = 0;
};

class ModelCheckpoint final : public Callback {
 public:
  struct Options {
    std::string monitor = "val_loss";
    bool save_best_only = false;
    Mode mode = Mode::kAuto;
    int verbose = 0;
  };
  // `filepath` may contain {epoch} (1-based, as Keras's {epoch:02d} without the format).
  explicit ModelCheckpoint(std::string filepath, Options o);
  explicit ModelCheckpoint(std::string filepath) : ModelCheckpoint(std::move(filepath), Options{}) {}
  Status OnEpochEnd(int epoch, Logs& logs) override;
  double best() const { return best_; }

 private:
  std::string path_;
  Options o_;
  double best_;
};

class EarlyStopping final : public Callback {
 public:
  struct Options {
    std::string monitor = "val_loss";
    double min_delta = 0;
    int patience = 0;
    Mode mode = Mode::kAuto;
    bool restore_best_weights = false;
    int start_from_epoch = 0;
  };
  explicit EarlyStopping(Options o);
  EarlyStopping() : EarlyStopping(Options{}) {}
  Status OnTrainBegin(const TrainInfo& info) override;
  Status OnEpochEnd(int epoch, Logs& logs) override;
  Status OnTrainEnd(const Logs& logs) override;
  int stopped_epoch() const { return stopped_epoch_; }

 private:
  Options o_;
  double best_;
  int wait_ = 0, best_epoch_ = -1, stopped_epoch_ = -1;
  std::vector<float> best_state_;
};

class ReduceLROnPlateau final : public Callback {
 public:
  struct Options {
    std::string monitor = "val_loss";
    double factor = 0.1;
    int patience = 10;
    Mode mode = Mode::kAuto;
    double min_delta = 1e-4;
    int cooldown = 0;
    double min_lr = 0;
    int verbose = 0;
  };
  explicit ReduceLROnPlateau(Options o);
  ReduceLROnPlateau() : ReduceLROnPlateau(Options{}) {}
  Status OnEpochEnd(int epoch, Logs& logs) override;

 private:
  Options o_;
  double best_;
  int wait_ = 0, cooldown_ = 0;
};

// Sets the learning rate at the start of each epoch to schedule(epoch, current_lr).
class LearningRateScheduler final : public Callback {
 public:
  explicit LearningRateScheduler(std::function<double(int epoch, double lr)> schedule, int verbose = 0);
  Status OnEpochBegin(int epoch) override;
  Status OnEpochEnd(int epoch, Logs& logs) override;

 private:
  std::function<double(int, double)> schedule_;
  int verbose_;
};

// One CSV row per epoch: epoch,<sorted keys>; written atomically after every epoch.
class CSVLogger final : public Callback {
 public:
  explicit CSVLogger(std::string filename, bool append = false);
  Status OnTrainBegin(const TrainInfo& info) override;
  Status OnEpochEnd(int epoch, Logs& logs) override;

 private:
  std::string path_;
  bool append_;
  std::string contents_;
  std::vector<std::string> keys_;
};

class TerminateOnNaN final : public Callback {
 public:
  Status OnTrainBatchEnd(int64_t batch, const Logs& logs) override;
};

// Resumes a killed run: on train begin, a backup in `backup_dir` restores weights, optimizer
// state, epoch, step and the input iterator's position ("resumed from epoch E, step S (global
// step G)"); a backup is written (atomically) every `save_freq` steps and at each epoch end,
// and deleted when training finishes. A write killed halfway leaves the previous backup whole;
// its temporary is removed at the next start.
class BackupAndRestore final : public Callback {
 public:
  struct Options {
    int64_t save_freq = 0;   // steps; 0: at epoch ends only
    bool delete_checkpoint = true;
  };
  BackupAndRestore(std::string backup_dir, Options o);
  explicit BackupAndRestore(std::string backup_dir) : BackupAndRestore(std::move(backup_dir), Options{}) {}
  Status OnTrainBegin(const TrainInfo& info) override;
  Status OnTrainBatchEnd(int64_t batch, const Logs& logs) override;
  Status OnEpochEnd(int epoch, Logs& logs) override;
  Status OnTrainEnd(const Logs& logs) override;
  std::string path() const;

 private:
  Status Save(int64_t next_epoch, int64_t step_in_epoch);
  void RemoveHalfWrittenBackups(bool verbose) const;
  std::string dir_;
  Options o_;
  int epoch_ = 0;
};

// TensorBoard logs as Keras writes them: <log_dir>/train and <log_dir>/validation hold event
// files (events.out.tfevents.<secs>.<host>.v2) with epoch_loss, epoch_<metric> and
// epoch_learning_rate per epoch, and batch_loss / batch_<metric> every `update_freq` steps.
class TensorBoard final : public Callback {
 public:
  struct Options {
    int64_t update_freq = 0;  // steps between batch-level scalars; 0: per epoch only (Keras's "epoch")
  };
  TensorBoard(std::string log_dir, Options o);
  explicit TensorBoard(std::string log_dir) : TensorBoard(std::move(log_dir), Options{}) {}
  ~TensorBoard() override;
  Status OnTrainBegin(const TrainInfo& info) override;
  Status OnTrainBatchEnd(int64_t batch, const Logs& logs) override;
  Status OnEpochEnd(int epoch, Logs& logs) override;
  Status OnTrainEnd(const Logs& logs) override;

 private:
  std::string dir_;
  Options o_;
  struct Writers;
  std::unique_ptr<Writers> w_;
};

// Resolves "auto" against the monitored key (accuracy-like keys are maximised).
Mode ResolveMode(Mode m, const std::string& monitor);

}  // namespace strata::keras

#pragma GCC visibility pop
