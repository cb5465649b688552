// Learning-rate schedules: a function of the global step (Keras's LearningRateSchedule).
//
// The learning rate is an input of the compiled step, fed every step, so a schedule never
// forces a recompile. Per-epoch schedules (the flowers recipe, LearningRateScheduler) are
// step schedules that read epoch = step / steps_per_epoch.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata::keras {

struct Schedule {
  std::function<double(int64_t step)> fn;
  std::string description;  // "cosine decay 0.1 -> 0 over 4680 steps, warm-up 234 steps"
  double operator()(int64_t step) const { return fn(step); }
};

namespace schedules {

Schedule Constant(double lr);
// lr * decay_rate ^ (step / decay_steps), the exponent floored when staircase.
Schedule ExponentialDecay(double initial, int64_t decay_steps, double decay_rate, bool staircase = false);
// Keras CosineDecay with warm-up: linear from `initial` to `warmup_target` over
// `warmup_steps` (none when warmup_steps == 0), then
// peak * ((1 - alpha) * 0.5 * (1 + cos(pi * t / decay_steps)) + alpha), t clamped, where the
// peak is `warmup_target` when one is given (warm-up steps or not) and `initial` otherwise.
struct CosineDecayOptions {
  double alpha = 0;           // final lr as a fraction of the peak
  double warmup_target = -1;  // < 0: no warm-up target (peak = initial)
  int64_t warmup_steps = 0;
};
Schedule CosineDecay(double initial, int64_t decay_steps, CosineDecayOptions o = {});
// values[i] while step <= boundaries[i] (values has one more entry than boundaries).
Schedule PiecewiseConstant(std::vector<int64_t> boundaries, std::vector<double> values);

// The recipe of Kaggle's "Flower Classification with TPUs" starter notebooks, per epoch:
// linear ramp from `start` to `max` over rampup_epochs, `max` for sustain_epochs, then
// (max - min) * decay^(epoch - rampup - sustain) + min. `max` is multiplied by `replicas`
// (the linear scaling rule: LR_MAX = 0.00005 * strategy.num_replicas_in_sync).
struct RampUpDecayOptions {
  double start = 0.00001;
  double max = 0.00005;  // per replica
  double min = 0.00001;
  int rampup_epochs = 5;
  int sustain_epochs = 0;
  double decay = 0.8;
  int replicas = 1;
};
Schedule RampUpSustainDecay(RampUpDecayOptions o, int64_t steps_per_epoch);
double RampUpSustainDecayAtEpoch(const RampUpDecayOptions& o, int64_t epoch);

// A per-epoch function (Keras LearningRateScheduler's `schedule(epoch)`) as a step schedule.
Schedule PerEpoch(std::function<double(int64_t epoch)> fn, int64_t steps_per_epoch, std::string description = "per-epoch");

}  // namespace schedules
}  // namespace strata::keras

#pragma GCC visibility pop
