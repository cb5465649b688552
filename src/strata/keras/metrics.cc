#include "strata/keras/metrics.h"

#include <algorithm>

namespace strata::keras {
namespace {

int64_t ArgMax(const float* row, int64_t k) { return std::max_element(row, row + k) - row; }

int64_t TrueClass(const MetricBatch& b, int64_t i) {
  return b.sparse_labels ? b.sparse_labels[i] : ArgMax(b.dense_labels + i * b.k, b.k);
}

class AccuracyMetric final : public Metric {
 public:
  explicit AccuracyMetric(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void Reset() override { correct_ = total_ = 0; }
  void Update(const MetricBatch& b) override {
    for (int64_t i = 0; i < b.n; ++i) {
      const float* row = b.outputs + i * b.k;
      int64_t pred = b.k == 1 ? (row[0] > 0.5f ? 1 : 0) : ArgMax(row, b.k);
      correct_ += pred == TrueClass(b, i);
    }
    total_ += b.n;
  }
  double Result() const override { return total_ ? static_cast<double>(correct_) / static_cast<double>(total_) : 0; }

 private:
  std::string name_;
  int64_t correct_ = 0, total_ = 0;
};

class TopKMetric final : public Metric {
 public:
  TopKMetric(std::string name, int k) : name_(std::move(name)), k_(k) {}
  std::string name() const override { return name_; }
  void Reset() override { correct_ = total_ = 0; }
  void Update(const MetricBatch& b) override {
    for (int64_t i = 0; i < b.n; ++i) {
      const float* row = b.outputs + i * b.k;
      int64_t y = TrueClass(b, i);
      if (y < 0 || y >= b.k) continue;
      // In the top k when fewer than k classes score strictly higher (ties favour the label, as tf.math.in_top_k).
      int64_t higher = 0;
      for (int64_t j = 0; j < b.k; ++j) higher += row[j] > row[y];
      correct_ += higher < k_;
    }
    total_ += b.n;
  }
  double Result() const override { return total_ ? static_cast<double>(correct_) / static_cast<double>(total_) : 0; }

 private:
  std::string name_;
  int k_;
  int64_t correct_ = 0, total_ = 0;
};

// Macro F1: the unweighted mean over classes of 2 TP / (2 TP + FP + FN); classes that never
// occur in labels or predictions are left out (scikit-learn's f1_score(average='macro')
// counts them as 0 with a warning; the flowers leaderboard used scikit-learn on all 104
// classes, each of which occurs).
class MacroF1Metric final : public Metric {
 public:
  std::string name() const override { return "f1_macro"; }
  void Reset() override { tp_.clear(); fp_.clear(); fn_.clear(); }
  void Update(const MetricBatch& b) override {
    if (static_cast<int64_t>(tp_.size()) < b.k) {
      tp_.resize(b.k); fp_.resize(b.k); fn_.resize(b.k);
    }
    for (int64_t i = 0; i < b.n; ++i) {
      int64_t pred = ArgMax(b.outputs + i * b.k, b.k);
      int64_t y = TrueClass(b, i);
      if (y < 0 || y >= b.k) continue;
      if (pred == y) {
        tp_[y]++;
      } else {
        fp_[pred]++;
        fn_[y]++;
      }
    }
  }
  double Result() const override {
    double sum = 0;
    int classes = 0;
    for (size_t c = 0; c < tp_.size(); ++c) {
      int64_t denom = 2 * tp_[c] + fp_[c] + fn_[c];
      if (denom == 0) continue;
      sum += 2.0 * static_cast<double>(tp_[c]) / static_cast<double>(denom);
      ++classes;
    }
    return classes ? sum / classes : 0;
  }

 private:
  std::vector<int64_t> tp_, fp_, fn_;
};

}  // namespace

Result<std::unique_ptr<Metric>> MakeMetric(const std::string& name, const Loss& loss) {
  if (name == "accuracy" || name == "acc") return std::unique_ptr<Metric>(new AccuracyMetric(name));
  if (name == "sparse_categorical_accuracy" || name == "categorical_accuracy" || name == "binary_accuracy")
    return std::unique_ptr<Metric>(new AccuracyMetric(name));
  if (name == "sparse_top_k_categorical_accuracy" || name == "top_k_categorical_accuracy")
    return std::unique_ptr<Metric>(new TopKMetric(name, 5));
  if (name.rfind("top", 0) == 0) {
    std::string digits = name.substr(name.find_first_of("0123456789") == std::string::npos ? name.size()
                                                                                         : name.find_first_of("0123456789"));
    int k = digits.empty() ? 5 : std::atoi(digits.c_str());
    if (k > 0) return std::unique_ptr<Metric>(new TopKMetric(name, k));
  }
  if (name == "f1_macro" || name == "macro_f1" || name == "f1") return std::unique_ptr<Metric>(new MacroF1Metric());
  (void)loss;
  return InvalidArgument("unknown metric '" + name +
                         "' (accuracy, sparse_categorical_accuracy, sparse_top_k_categorical_accuracy, top5, f1_macro)");
}

}  // namespace strata::keras
