// Keras's imagenet_utils.decode_predictions over the class index Keras downloads
// (imagenet_class_index.json, embedded byte for byte at build time).
#include <algorithm>
#include <numeric>

#include <nlohmann/json.hpp>

#include "strata/keras/applications/applications.h"
#include "strata/keras/applications/imagenet_class_index.h"

namespace strata::keras::applications {

const std::vector<ImagenetClass>& ImagenetClasses() {
  static const std::vector<ImagenetClass> classes = [] {
    // The embedded file is Keras's {"0": ["n01440764", "tench"], ...}; a build that embedded
    // anything else fails here at once rather than naming wrong classes.
    const nlohmann::json j = nlohmann::json::parse(kImagenetClassIndexJson);
    std::vector<ImagenetClass> v(j.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const nlohmann::json& e = j.at(std::to_string(i));
      v[i] = {e.at(0).get<std::string>(), e.at(1).get<std::string>()};
    }
    return v;
  }();
  return classes;
}

std::string_view ImagenetClassIndexJson() { return kImagenetClassIndexJson; }

Result<std::vector<std::vector<Prediction>>> DecodePredictions(const Tensor& preds, int top) {
  const Shape& s = preds.shape();
  const int64_t classes = static_cast<int64_t>(ImagenetClasses().size());
  if (s.rank() != 2 || s[1] != classes)
    return InvalidArgument("decode_predictions expects a batch of predictions (a 2D array of shape (samples, " +
                           std::to_string(classes) + ")), got shape " + s.ToString());
  if (preds.dtype() != DType::kF32)
    return InvalidArgument("decode_predictions: predictions must be float32, got " +
                           std::string(DTypeName(preds.dtype())));
  if (top < 1) return InvalidArgument("decode_predictions: top must be at least 1, got " + std::to_string(top));
  const int64_t k = std::min<int64_t>(top, classes);
  std::vector<std::vector<Prediction>> out(static_cast<size_t>(s[0]));
  std::vector<int64_t> order(static_cast<size_t>(classes));
  for (int64_t n = 0; n < s[0]; ++n) {
    const float* p = preds.data<float>() + n * classes;
    std::iota(order.begin(), order.end(), 0);
    // Highest score first; among equal scores the higher class number first (Keras's
    // argsort()[-top:][::-1] with a stable ascending sort).
    std::sort(order.begin(), order.end(), [p](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a > b); });
    for (int64_t i = 0; i < k; ++i) {
      const ImagenetClass& c = ImagenetClasses()[static_cast<size_t>(order[static_cast<size_t>(i)])];
      out[static_cast<size_t>(n)].push_back({c.id, c.name, p[order[static_cast<size_t>(i)]]});
    }
  }
  return out;
}

}  // namespace strata::keras::applications
