#include "strata/keras/losses.h"

#include <algorithm>
#include <cmath>

namespace strata::keras {

std::string Loss::name() const {
  switch (kind) {
    case Kind::kSparseCategoricalCrossentropy: return "sparse_categorical_crossentropy";
    case Kind::kCategoricalCrossentropy: return "categorical_crossentropy";
    case Kind::kBinaryCrossentropy: return "binary_crossentropy";
    case Kind::kMeanSquaredError: return "mean_squared_error";
  }
  return "?";
}

Result<Loss> losses::Get(const std::string& name, bool from_logits) {
  if (name == "sparse_categorical_crossentropy") return SparseCategoricalCrossentropy({.from_logits = from_logits});
  if (name == "categorical_crossentropy") return CategoricalCrossentropy({.from_logits = from_logits});
  if (name == "binary_crossentropy") return BinaryCrossentropy({.from_logits = from_logits});
  if (name == "mean_squared_error" || name == "mse") return MeanSquaredError();
  return InvalidArgument("unknown loss '" + name +
                         "' (sparse_categorical_crossentropy, categorical_crossentropy, binary_crossentropy, mse)");
}

Status HostLoss(const Loss& loss, const float* out, int64_t n, int64_t k, const int64_t* sparse, const float* dense,
                float* per_example) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = out + i * k;
    switch (loss.kind) {
      case Loss::Kind::kSparseCategoricalCrossentropy:
      case Loss::Kind::kCategoricalCrossentropy: {
        // log-probabilities of the row
        float m = row[0];
        for (int64_t j = 1; j < k; ++j) m = std::max(m, row[j]);
        double lse = 0;
        if (loss.from_logits) {
          for (int64_t j = 0; j < k; ++j) lse += std::exp(static_cast<double>(row[j] - m));
          lse = std::log(lse) + m;
        }
        auto logp = [&](int64_t j) -> double {
          if (loss.from_logits) return row[j] - lse;
          return std::log(std::clamp(static_cast<double>(row[j]), static_cast<double>(kEps), 1.0 - kEps));
        };
        double l = 0;
        if (loss.kind == Loss::Kind::kSparseCategoricalCrossentropy) {
          int64_t y = sparse[i];
          if (y < 0 || y >= k)
            return InvalidArgument("label " + std::to_string(y) + " of example " + std::to_string(i) +
                                   " is outside [0, " + std::to_string(k) + ") for " + loss.name());
          l = -logp(y);
        } else {
          const float* t = dense + i * k;
          for (int64_t j = 0; j < k; ++j) {
            double tj = t[j] * (1.0 - loss.label_smoothing) + loss.label_smoothing / static_cast<double>(k);
            if (tj != 0) l -= tj * logp(j);
          }
        }
        per_example[i] = static_cast<float>(l);
        break;
      }
      case Loss::Kind::kBinaryCrossentropy: {
        double l = 0;
        for (int64_t j = 0; j < k; ++j) {
          const double t = dense ? dense[i * k + j] : static_cast<double>(sparse[i]);
          if (loss.from_logits) {  // the stable form of -t log(sigmoid(z)) - (1 - t) log(1 - sigmoid(z))
            const double z = row[j];
            l += std::max(z, 0.0) - z * t + std::log1p(std::exp(-std::abs(z)));
            continue;
          }
          const double p = std::clamp(static_cast<double>(row[j]), static_cast<double>(kEps), 1.0 - kEps);
          l -= t * std::log(p) + (1 - t) * std::log(1 - p);
        }
        per_example[i] = static_cast<float>(l / static_cast<double>(k));
        break;
      }
      case Loss::Kind::kMeanSquaredError: {
        double l = 0;
        for (int64_t j = 0; j < k; ++j) {
          double t = dense ? dense[i * k + j] : static_cast<double>(sparse[i]);
          l += (row[j] - t) * (row[j] - t);
        }
        per_example[i] = static_cast<float>(l / static_cast<double>(k));
        break;
      }
    }
  }
  return Status::OK();
}

}  // namespace strata::keras
