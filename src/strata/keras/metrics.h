// Keras metrics, accumulated on the host from each step's fetched outputs and labels.
// Streaming (Update per batch, Result at any time, Reset per epoch) as Keras's are.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/keras/losses.h"

namespace strata::keras {

class Metric {
 public:
  virtual ~Metric() = default;
  virtual std::string name() const = 0;  // the key in logs and History ("accuracy")
  virtual void Reset() = 0;
  virtual void Update(const MetricBatch& b) = 0;
  virtual double Result() const = 0;
};

// By Keras name: "accuracy"/"acc" (sparse or categorical, chosen from the loss),
// "sparse_categorical_accuracy", "categorical_accuracy",
// "sparse_top_k_categorical_accuracy" (k = 5; "top5"/"top_k:3" choose k), "f1_macro"
// (macro-averaged F1 over the classes: the flowers competition's metric).
Result<std::unique_ptr<Metric>> MakeMetric(const std::string& name, const Loss& loss);

// Weighted running mean (the loss shown in the progress bar).
class Mean {
 public:
  void Reset() { sum_ = 0; count_ = 0; }
  void Update(double value, double weight = 1) { sum_ += value * weight; count_ += weight; }
  double Result() const { return count_ > 0 ? sum_ / count_ : 0; }

 private:
  double sum_ = 0, count_ = 0;
};

}  // namespace strata::keras

#pragma GCC visibility pop
