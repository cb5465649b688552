#include "strata/keras/callbacks.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "strata/core/clock.h"
#include "strata/core/file.h"
#include "strata/core/log.h"
#include "strata/keras/checkpoint.h"
#include "strata/keras/fault_point.h"
#include "strata/record/event.h"

namespace strata::keras {
namespace {

bool Improved(Mode mode, double current, double best, double min_delta) {
  return mode == Mode::kMax ? current > best + min_delta : current < best - min_delta;
}

double Worst(Mode mode) {
  return mode == Mode::kMax ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
}

bool Find(const Logs& logs, const std::string& key, double* v) {
  for (const auto& [k, x] : logs) {
    if (k == key) {
      *v = x;
      return true;
    }
  }
  return false;
}

std::string FormatDuration(double s) {
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof(buf), "%d:%02d:%02d", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60, static_cast<int>(s) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof(buf), "%d:%02d", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof(buf), "%ds", static_cast<int>(s));
  return buf;
}

std::string FormatLogs(const Logs& logs) {
  std::string s;
  for (const auto& [k, v] : logs) {
    char buf[96];
    if (k == "lr" || k == "learning_rate") std::snprintf(buf, sizeof(buf), " - %s: %.4g", k.c_str(), v);
    else std::snprintf(buf, sizeof(buf), " - %s: %.4f", k.c_str(), v);
    s += buf;
  }
  return s;
}

}  // namespace

Mode ResolveMode(Mode m, const std::string& monitor) {
  if (m != Mode::kAuto) return m;
  return monitor.find("acc") != std::string::npos || monitor.find("f1") != std::string::npos ||
                 monitor.find("auc") != std::string::npos
             ? Mode::kMax
             : Mode::kMin;
}

// ---- progress bar -----------------------------------------------------------------------------

ProgbarLogger::ProgbarLogger(FILE* out) : out_(out) {}

Status ProgbarLogger::OnTrainBegin(const TrainInfo& info) {
  info_ = info;
  tty_ = info.verbose == 1 && ::isatty(::fileno(out_));
  return Status::OK();
}

Status ProgbarLogger::OnEpochBegin(int epoch) {
  std::fprintf(out_, "Epoch %d/%d\n", epoch + 1, info_.epochs);
  std::fflush(out_);
  epoch_start_ = NowSeconds();
  last_draw_ = 0;
  steps_seen_ = 0;
  return Status::OK();
}

std::string ProgbarLogger::Line(int64_t done, int64_t total, double elapsed, const Logs& logs, bool finished) {
  std::string line;
  char buf[64];
  if (total > 0) {
    const int width = 30;
    const int digits = static_cast<int>(std::to_string(total).size());
    std::snprintf(buf, sizeof(buf), "%*lld/%lld [", digits, static_cast<long long>(done), static_cast<long long>(total));
    line += buf;
    int filled = static_cast<int>(width * static_cast<double>(done) / static_cast<double>(total));
    if (filled > 0) {
      line += std::string(static_cast<size_t>(filled - 1), '=');
      line += done < total ? '>' : '=';
    }
    line += std::string(static_cast<size_t>(width - std::max(filled, 0)), '.');
    line += "]";
  } else {
    std::snprintf(buf, sizeof(buf), "%7lld/Unknown", static_cast<long long>(done));
    line += buf;
  }
  const double per_step = done > 0 ? elapsed / static_cast<double>(done) : 0;
  if (finished) {
    std::snprintf(buf, sizeof(buf), " - %s %.0fms/step", FormatDuration(elapsed).c_str(), per_step * 1e3);
    line += buf;
  } else if (total > 0) {
    line += " - ETA: " + FormatDuration(per_step * static_cast<double>(total - done));
  }
  return line + FormatLogs(logs);
}

Status ProgbarLogger::OnTrainBatchEnd(int64_t batch, const Logs& logs) {
  steps_seen_ = batch + 1;
  if (!tty_) return Status::OK();
  const double now = NowSeconds();
  if (now - last_draw_ < 0.05) return Status::OK();  // Keras redraws at most 20 times a second
  last_draw_ = now;
  std::string line = Line(steps_seen_, info_.steps_per_epoch, now - epoch_start_, logs, false);
  std::fprintf(out_, "\r%s\x1b[K", line.c_str());
  std::fflush(out_);
  return Status::OK();
}

Status ProgbarLogger::OnEpochEnd(int epoch, Logs& logs) {
  const double elapsed = NowSeconds() - epoch_start_;
  if (info_.steps_per_epoch < 0) info_.steps_per_epoch = steps_seen_;
  if (tty_) {
    std::fprintf(out_, "\r%s\x1b[K\n", Line(steps_seen_, steps_seen_, elapsed, logs, true).c_str());
  } else {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%lld/%lld - %s - %.0fms/step", static_cast<long long>(steps_seen_),
                  static_cast<long long>(steps_seen_), FormatDuration(elapsed).c_str(),
                  steps_seen_ ? elapsed * 1e3 / static_cast<double>(steps_seen_) : 0.0);
    std::fprintf(out_, "%s%s\n", buf, FormatLogs(logs).c_str());
  }
  std::fflush(out_);
  return Status::OK();
}

// ---- ModelCheckpoint ------------------------------------------------------------------------

ModelCheckpoint::ModelCheckpoint(std::string filepath, Options o)
    : path_(std::move(filepath)), o_(std::move(o)), best_(Worst(ResolveMode(o_.mode, o_.monitor))) {}

Status ModelCheckpoint::OnEpochEnd(int epoch, Logs& logs) {
  std::string path = path_;
  if (auto pos = path.find("{epoch}"); pos != std::string::npos) path.replace(pos, 7, std::to_string(epoch + 1));
  if (o_.save_best_only) {
    double v;
    if (!Find(logs, o_.monitor, &v)) {
      STRATA_LOG(kWarn) << "ModelCheckpoint: '" << o_.monitor << "' is not among the logged values; not saving";
      return Status::OK();
    }
    const Mode mode = ResolveMode(o_.mode, o_.monitor);
    if (!Improved(mode, v, best_, 0)) return Status::OK();
    if (o_.verbose)
      std::printf("\nEpoch %d: %s improved from %.5f to %.5f, saving model to %s\n", epoch + 1, o_.monitor.c_str(), best_, v,
                  path.c_str());
    best_ = v;
  }
  return model()->save_weights(path);
}

// ---- EarlyStopping --------------------------------------------------------------------------

EarlyStopping::EarlyStopping(Options o) : o_(std::move(o)), best_(Worst(ResolveMode(o_.mode, o_.monitor))) {}

Status EarlyStopping::OnTrainBegin(const TrainInfo&) {
  wait_ = 0;
  best_epoch_ = stopped_epoch_ = -1;
  best_ = Worst(ResolveMode(o_.mode, o_.monitor));
  best_state_.clear();
  return Status::OK();
}

Status EarlyStopping::OnEpochEnd(int epoch, Logs& logs) {
  double v;
  if (!Find(logs, o_.monitor, &v) || epoch < o_.start_from_epoch) return Status::OK();
  const Mode mode = ResolveMode(o_.mode, o_.monitor);
  ++wait_;
  if (Improved(mode, v, best_, std::abs(o_.min_delta))) {
    best_ = v;
    best_epoch_ = epoch;
    wait_ = 0;
    if (o_.restore_best_weights) {
      STRATA_ASSIGN_OR_RETURN(best_state_, model()->get_state());
    }
  }
  if (wait_ >= o_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    model()->stop_training = true;
  }
  return Status::OK();
}

Status EarlyStopping::OnTrainEnd(const Logs&) {
  if (stopped_epoch_ >= 0 && o_.restore_best_weights && !best_state_.empty()) {
    std::printf("Restoring model weights from the end of the best epoch: %d.\n", best_epoch_ + 1);
    return model()->set_state(best_state_);
  }
  return Status::OK();
}

// ---- ReduceLROnPlateau ----------------------------------------------------------------------

ReduceLROnPlateau::ReduceLROnPlateau(Options o) : o_(std::move(o)), best_(Worst(ResolveMode(o_.mode, o_.monitor))) {}

Status ReduceLROnPlateau::OnEpochEnd(int epoch, Logs& logs) {
  double v;
  if (!Find(logs, o_.monitor, &v)) return Status::OK();
  const Mode mode = ResolveMode(o_.mode, o_.monitor);
  if (cooldown_ > 0) {
    --cooldown_;
    wait_ = 0;
  }
  if (Improved(mode, v, best_, o_.min_delta)) {
    best_ = v;
    wait_ = 0;
  } else if (cooldown_ == 0 && ++wait_ >= o_.patience) {
    const double lr = model()->learning_rate();
    const double new_lr = std::max(lr * o_.factor, o_.min_lr);
    if (lr > 0 && new_lr < lr) {
      model()->set_learning_rate_scale(model()->learning_rate_scale() * new_lr / lr);
      if (o_.verbose) std::printf("\nEpoch %d: ReduceLROnPlateau reducing learning rate to %g.\n", epoch + 1, new_lr);
    }
    cooldown_ = o_.cooldown;
    wait_ = 0;
  }
  return Status::OK();
}

// ---- LearningRateScheduler ------------------------------------------------------------------

LearningRateScheduler::LearningRateScheduler(std::function<double(int, double)> schedule, int verbose)
    : schedule_(std::move(schedule)), verbose_(verbose) {}

Status LearningRateScheduler::OnEpochBegin(int epoch) {
  const double lr = schedule_(epoch, model()->learning_rate());
  if (!std::isfinite(lr) || lr < 0) return InvalidArgument("LearningRateScheduler: schedule returned " + std::to_string(lr));
  model()->set_learning_rate_override(lr);
  if (verbose_) std::printf("\nEpoch %d: LearningRateScheduler setting learning rate to %g.\n", epoch + 1, lr);
  return Status::OK();
}

Status LearningRateScheduler::OnEpochEnd(int, Logs& logs) {
  if (LogValue(logs, "lr", -1) < 0) logs.emplace_back("lr", model()->learning_rate());
  return Status::OK();
}

// ---- CSVLogger ------------------------------------------------------------------------------

CSVLogger::CSVLogger(std::string filename, bool append) : path_(std::move(filename)), append_(append) {}

Status CSVLogger::OnTrainBegin(const TrainInfo&) {
  contents_.clear();
  keys_.clear();
  if (append_) {
    auto existing = ReadFileToString(path_);
    if (existing.ok()) contents_ = *existing;
  }
  return Status::OK();
}

Status CSVLogger::OnEpochEnd(int epoch, Logs& logs) {
  if (keys_.empty()) {
    for (const auto& [k, v] : logs) keys_.push_back(k);
    std::sort(keys_.begin(), keys_.end());
    if (contents_.empty()) {
      contents_ = "epoch";
      for (const auto& k : keys_) contents_ += "," + k;
      contents_ += "\n";
    }
  }
  contents_ += std::to_string(epoch);
  for (const auto& k : keys_) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), ",%.17g", LogValue(logs, k, std::nan("")));
    contents_ += buf;
  }
  contents_ += "\n";
  return WriteFileAtomic(path_, contents_);
}

// ---- TerminateOnNaN -------------------------------------------------------------------------

Status TerminateOnNaN::OnTrainBatchEnd(int64_t batch, const Logs& logs) {
  double loss;
  if (Find(logs, "loss", &loss) && !std::isfinite(loss)) {
    std::printf("Batch %lld: Invalid loss, terminating training\n", static_cast<long long>(batch));
    model()->stop_training = true;
  }
  return Status::OK();
}

// ---- BackupAndRestore -----------------------------------------------------------------------

BackupAndRestore::BackupAndRestore(std::string dir, Options o) : dir_(std::move(dir)), o_(o) {}

std::string BackupAndRestore::path() const { return dir_ + "/backup.ckpt"; }

Status BackupAndRestore::OnTrainBegin(const TrainInfo& info) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return IOError("BackupAndRestore: cannot create " + dir_ + ": " + ec.message());
  const bool exists = std::filesystem::exists(path());
  // Several workers restore from the chief's backup: all of them must see it.
  if (distribute::Strategy* s = model()->strategy(); s && s->num_workers() > 1)
    STRATA_RETURN_IF_ERROR(s->CheckWorkersAgree("BackupAndRestore in " + dir_ + " (a directory every worker must share)",
                                                exists ? "a backup" : "no backup"));
  distribute::Strategy* s = model()->strategy();
  if (!s || s->worker_index() == 0) RemoveHalfWrittenBackups(info.verbose > 0);
  if (!exists) return Status::OK();
  STRATA_RETURN_IF_ERROR(model()->RestoreBackup(path()));
  // Epochs count from 1 as in the progress lines; the step is the steps of that epoch already
  // done, so training goes on with step S + 1.
  if (info.verbose > 0)
    std::printf("BackupAndRestore: resuming from %s: resumed from epoch %d, step %lld (global step %lld)\n", path().c_str(),
                model()->current_epoch() + 1, static_cast<long long>(model()->resumed_step_in_epoch()),
                static_cast<long long>(model()->global_step()));
  return Status::OK();
}

// A backup write killed before its rename leaves its temporary ("backup.ckpt.tmp-PID-N") beside
// the backup, which it never touched; the chief removes such leftovers when training starts.
void BackupAndRestore::RemoveHalfWrittenBackups(bool verbose) const {
  std::error_code ec;
  const std::string prefix = std::filesystem::path(path()).filename().string() + ".tmp-";
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    std::error_code rm;
    std::filesystem::remove(entry.path(), rm);
    if (verbose && !rm) std::printf("BackupAndRestore: removed %s, a backup write that never finished\n", entry.path().c_str());
  }
}

Status BackupAndRestore::Save(int64_t next_epoch, int64_t step_in_epoch) {
  // Every worker takes part (its input position goes into the backup); the chief writes it.
  return model()->SaveBackup(path(), next_epoch, step_in_epoch);
}

Status BackupAndRestore::OnTrainBatchEnd(int64_t batch, const Logs&) {
  if (o_.save_freq > 0 && (model()->global_step() % o_.save_freq) == 0)
    STRATA_RETURN_IF_ERROR(Save(model()->current_epoch(), batch + 1));
  // The recovery tests' kill -9 at a chosen step lands here (keras/fault_point.h).
  const distribute::Strategy* s = model()->strategy();
  PauseAtFaultPoint(FaultPoint::kAfterStep, model()->global_step(), s ? s->worker_index() : 0,
                    "after global step " + std::to_string(model()->global_step()));
  return Status::OK();
}

Status BackupAndRestore::OnEpochEnd(int epoch, Logs&) { return Save(epoch + 1, 0); }

Status BackupAndRestore::OnTrainEnd(const Logs&) {
  distribute::Strategy* s = model()->strategy();
  if (o_.delete_checkpoint && (!s || s->worker_index() == 0)) {  // only reached when fit() completes; the chief's file
    std::error_code ec;
    std::filesystem::remove(path(), ec);
  }
  return Status::OK();
}

// ---- TensorBoard ---------------------------------------------------------------------------

struct TensorBoard::Writers {
  std::unique_ptr<record::EventWriter> train, validation;
};

TensorBoard::TensorBoard(std::string dir, Options o) : dir_(std::move(dir)), o_(o) {}
TensorBoard::~TensorBoard() = default;

Status TensorBoard::OnTrainBegin(const TrainInfo&) {
  w_ = std::make_unique<Writers>();
  for (const char* sub : {"train", "validation"}) {
    std::error_code ec;
    std::filesystem::create_directories(dir_ + "/" + sub, ec);
    if (ec) return IOError("TensorBoard: cannot create " + dir_ + "/" + sub + ": " + ec.message());
    STRATA_ASSIGN_OR_RETURN(auto w, record::EventWriter::Create(dir_ + "/" + sub, {.filename_suffix = ".v2"}));
    (std::string(sub) == "train" ? w_->train : w_->validation) = std::move(w);
  }
  return Status::OK();
}

Status TensorBoard::OnTrainBatchEnd(int64_t, const Logs& logs) {
  if (o_.update_freq <= 0 || !w_ || model()->global_step() % o_.update_freq != 0) return Status::OK();
  for (const auto& [k, v] : logs)
    STRATA_RETURN_IF_ERROR(w_->train->WriteScalar("batch_" + k, model()->global_step(), static_cast<float>(v)));
  return Status::OK();
}

Status TensorBoard::OnEpochEnd(int epoch, Logs& logs) {
  if (!w_) return Status::OK();
  for (const auto& [k, v] : logs) {
    const bool val = k.rfind("val_", 0) == 0;
    const std::string tag = "epoch_" + (val ? k.substr(4) : k);
    STRATA_RETURN_IF_ERROR((val ? w_->validation : w_->train)->WriteScalar(tag, epoch, static_cast<float>(v)));
  }
  STRATA_RETURN_IF_ERROR(w_->train->WriteScalar("epoch_learning_rate", epoch, static_cast<float>(model()->learning_rate())));
  STRATA_RETURN_IF_ERROR(w_->train->Flush());
  return w_->validation->Flush();
}

Status TensorBoard::OnTrainEnd(const Logs&) {
  if (!w_) return Status::OK();
  STRATA_RETURN_IF_ERROR(w_->train->Close());
  return w_->validation->Close();
}

}  // namespace strata::keras
