// What fit()'s loop keeps between steps and epochs, apart from the model: the input iterator
// (replaced each pass, read by the observer's statistics from another thread), the observer
// (the monitor), the learning-rate overrides callbacks set, and the position BackupAndRestore
// resumes from. Owned by Model (model.h: fit_), used by fit.cc and the learning rate.
// Internal to keras/.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "strata/data/dataset.h"
#include "strata/keras/step_observer.h"

namespace strata::keras {

struct FitState {
  data::Iterator* iterator = nullptr;
  std::mutex iterator_mu;  // the iterator's replacement vs the observer reading its statistics
  StepObserver* observer = nullptr;  // during fit, from the first compiled step
  double lr_scale = 1;      // ReduceLROnPlateau's factor
  double lr_override = -1;  // LearningRateScheduler's constant; < 0: the schedule's
  // After RestoreBackup: the next fit() restores the iterator and skips the epoch's done steps.
  bool resume_pending = false;
  int64_t resume_step_in_epoch = 0;
  std::string resume_iterator_state;
};

}  // namespace strata::keras
