#include "strata/keras/schedules.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace strata::keras::schedules {

Schedule Constant(double lr) {
  return {[lr](int64_t) { return lr; }, "constant " + std::to_string(lr)};
}

Schedule ExponentialDecay(double initial, int64_t decay_steps, double decay_rate, bool staircase) {
  decay_steps = std::max<int64_t>(decay_steps, 1);
  return {[=](int64_t step) {
            double p = static_cast<double>(step) / static_cast<double>(decay_steps);
            if (staircase) p = std::floor(p);
            return initial * std::pow(decay_rate, p);
          },
          "exponential decay " + std::to_string(initial) + " x " + std::to_string(decay_rate) + " per " +
              std::to_string(decay_steps) + " steps"};
}

Schedule CosineDecay(double initial, int64_t decay_steps, CosineDecayOptions o) {
  decay_steps = std::max<int64_t>(decay_steps, 1);
  // As Keras: a warmup_target is the peak the decay starts from, warm-up or not (warmup_steps
  // 0: no ramp); without one, warmup_steps is ignored and the decay starts from `initial`.
  const bool target = o.warmup_target >= 0;
  const double peak = target ? o.warmup_target : initial;
  const int64_t warmup = target ? std::max<int64_t>(o.warmup_steps, 0) : 0;
  const bool warm = warmup > 0;
  return {[=](int64_t step) {
            if (step < warmup)
              return initial + (peak - initial) * static_cast<double>(step) / static_cast<double>(warmup);
            double t = static_cast<double>(step - warmup);
            t = std::clamp(t, 0.0, static_cast<double>(decay_steps));
            double cosine = 0.5 * (1 + std::cos(std::numbers::pi * t / static_cast<double>(decay_steps)));
            return peak * ((1 - o.alpha) * cosine + o.alpha);
          },
          "cosine decay " + std::to_string(peak) + " over " + std::to_string(decay_steps) + " steps" +
              (warm ? ", linear warm-up over " + std::to_string(o.warmup_steps) + " steps" : "")};
}

Schedule PiecewiseConstant(std::vector<int64_t> boundaries, std::vector<double> values) {
  if (values.size() != boundaries.size() + 1) values.resize(boundaries.size() + 1, values.empty() ? 0 : values.back());
  return {[b = boundaries, v = values](int64_t step) {
            size_t i = 0;
            while (i < b.size() && step > b[i]) ++i;
            return v[i];
          },
          "piecewise constant"};
}

double RampUpSustainDecayAtEpoch(const RampUpDecayOptions& o, int64_t epoch) {
  const double max = o.max * std::max(1, o.replicas);
  if (epoch < o.rampup_epochs) return (max - o.start) / o.rampup_epochs * static_cast<double>(epoch) + o.start;
  if (epoch < o.rampup_epochs + o.sustain_epochs) return max;
  return (max - o.min) * std::pow(o.decay, static_cast<double>(epoch - o.rampup_epochs - o.sustain_epochs)) + o.min;
}

Schedule RampUpSustainDecay(RampUpDecayOptions o, int64_t steps_per_epoch) {
  Schedule s = PerEpoch([o](int64_t epoch) { return RampUpSustainDecayAtEpoch(o, epoch); }, steps_per_epoch);
  s.description = "ramp-up " + std::to_string(o.rampup_epochs) + " epochs to " + std::to_string(o.max * o.replicas) +
                  ", sustain " + std::to_string(o.sustain_epochs) + ", decay x" + std::to_string(o.decay) + "/epoch";
  return s;
}

Schedule PerEpoch(std::function<double(int64_t)> fn, int64_t steps_per_epoch, std::string description) {
  steps_per_epoch = std::max<int64_t>(steps_per_epoch, 1);
  return {[fn = std::move(fn), steps_per_epoch](int64_t step) { return fn(step / steps_per_epoch); },
          std::move(description)};
}

}  // namespace strata::keras::schedules
