// strata evaluate: loss, accuracy and macro F1 of a saved model on labelled TFRecords; for
// the flowers classes also per-class F1 with names and the worst classes' confusions.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "model_io.h"
#include "strata/core/clock.h"
#include "strata/core/file.h"
#include "strata/train/tta.h"

namespace strata::cli {
namespace {

struct ClassScore {
  int64_t index = 0, support = 0, predicted = 0, tp = 0;
  double precision = 0, recall = 0, f1 = 0;
};

int RunEvaluate(const std::vector<std::string>& args) {
  std::string model_arg, weights, data_glob, json_out, image_key, label_key, tta;
  int64_t batch = 64, worst = 10;
  bool summary = false, no_per_class = false;
  FlagParser flags("evaluate", "--model CKPT|SPEC [--weights CKPT] --data GLOB [--batch N] [--worst N] [--tta flip] [--json FILE]",
                   "Evaluates a model on labelled TFRecords: loss, accuracy and macro F1 (the flowers competition's\n"
                   "metric), then F1, precision and recall per class with the class names, and the classes with the\n"
                   "lowest F1 with what they were mistaken for. --model takes a checkpoint from `strata train --out`\n"
                   "(it records its spec and input settings) or a spec (built-in name or JSON file) with --weights.\n"
                   "With --summary, prints the model's summary() and exits (no data needed).");
  flags.String("model", &model_arg, "a checkpoint from strata train, or a spec (with --weights)");
  flags.String("weights", &weights, "checkpoint holding the weights of a --model SPEC");
  flags.String("data", &data_glob, "labelled TFRecord files (glob), e.g. 'DIR/val/*.tfrec'");
  flags.String("image-key", &image_key, "feature holding the encoded image (default: the checkpoint's, else image)");
  flags.String("label-key", &label_key, "feature holding the int64 class (default: the checkpoint's, else label)");
  flags.Int("batch", &batch, "images per forward pass (default 64)");
  flags.Int("worst", &worst, "how many of the lowest-F1 classes to explain (default 10)");
  flags.String("tta", &tta,
               "flip: also report the accuracy with test-time augmentation, each image's prediction the mean of the "
               "model's outputs for it and its mirror image (docs/fashion_mnist.md)");
  flags.Bool("summary", &summary, "print model.summary() and exit");
  flags.Bool("no-per-class", &no_per_class, "do not print the per-class table");
  flags.String("json", &json_out, "also write the metrics (and per-class scores) as JSON here");
  if (int rc = flags.Parse(args); rc >= 0) return rc;
  if (model_arg.empty()) return Fail("evaluate", "--model is required", kExitUsage);
  if (batch < 1 || worst < 0) return Fail("evaluate", "--batch must be positive and --worst >= 0", kExitUsage);
  if (Status s = train::CheckTta(tta); !s.ok()) return Fail("evaluate", s.message(), kExitUsage);
  auto loaded = LoadModelForInference(model_arg, weights);
  if (!loaded.ok()) return Fail("evaluate", loaded.status().ToString());
  keras::Model& model = *loaded->model;
  if (summary) {
    model.summary();
    return kExitOk;
  }
  if (data_glob.empty()) return Fail("evaluate", "--data is required", kExitUsage);
  train::ModelInfo info = loaded->info;
  if (!image_key.empty()) info.image_key = image_key;
  if (!label_key.empty()) info.label_key = label_key;
  auto ds = train::InferenceDataset(info, data_glob, batch, /*labels=*/true);
  if (!ds.ok()) return Fail("evaluate", ds.status().ToString());

  Stopwatch clock;
  int64_t k = 0, n = 0, correct = 0;
  double loss_sum = 0;
  std::vector<int64_t> confusion;  // [k, k]: row = true class, column = predicted
  Status st = ForEachPrediction(model, *ds, [&](const data::Element& b, const std::vector<float>& p, int64_t rows, int64_t kk) -> Status {
    if (k == 0) {
      k = kk;
      confusion.assign(static_cast<size_t>(k * k), 0);
    }
    if (b.size() < 2) return InvalidArgument("evaluate: records of " + data_glob + " have no label");
    const Tensor labels = b[1].Contiguous();  // i64 [B]
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t y = labels.data<int64_t>()[r];
      if (y < 0 || y >= k)
        return InvalidArgument("evaluate: label " + std::to_string(y) + " in " + data_glob + " is outside the model's " +
                               std::to_string(k) + " classes");
      const float* row = p.data() + r * k;
      const int64_t guess = std::max_element(row, row + k) - row;
      loss_sum -= std::log(std::max(row[y], 1e-7f));
      correct += guess == y;
      ++confusion[static_cast<size_t>(y * k + guess)];
      ++n;
    }
    return Status::OK();
  });
  if (!st.ok()) return Fail("evaluate", st.ToString());
  if (n == 0) return Fail("evaluate", "no records in " + data_glob);
  const double seconds = clock.ElapsedSeconds();
  double accuracy_tta = 0;
  if (!tta.empty()) {
    auto a = train::TtaAccuracy(model, *ds, -1, tta);
    if (!a.ok()) return Fail("evaluate", a.status().ToString());
    accuracy_tta = *a;
  }

  // Per class: support (true), predicted, true positives; macro F1 over the classes that
  // occur in the labels or the predictions (scikit-learn's f1_score(average='macro')).
  std::vector<ClassScore> scores(static_cast<size_t>(k));
  double f1_sum = 0;
  int64_t present = 0;
  for (int64_t c = 0; c < k; ++c) {
    ClassScore& s = scores[static_cast<size_t>(c)];
    s.index = c;
    s.tp = confusion[static_cast<size_t>(c * k + c)];
    for (int64_t j = 0; j < k; ++j) {
      s.support += confusion[static_cast<size_t>(c * k + j)];
      s.predicted += confusion[static_cast<size_t>(j * k + c)];
    }
    s.precision = s.predicted ? static_cast<double>(s.tp) / static_cast<double>(s.predicted) : 0;
    s.recall = s.support ? static_cast<double>(s.tp) / static_cast<double>(s.support) : 0;
    s.f1 = s.support + s.predicted ? 2.0 * static_cast<double>(s.tp) / static_cast<double>(s.support + s.predicted) : 0;
    if (s.support + s.predicted > 0) {
      f1_sum += s.f1;
      ++present;
    }
  }
  const double loss = loss_sum / static_cast<double>(n), accuracy = static_cast<double>(correct) / static_cast<double>(n);
  const double f1_macro = present ? f1_sum / static_cast<double>(present) : 0;
  const std::vector<std::string> names = ClassNames(info, k);

  std::printf("model %s (%s) on %s\n", model.name().c_str(), model_arg.c_str(), data_glob.c_str());
  std::printf("evaluated %lld images in %.1f s (%.0f images/s)\n", static_cast<long long>(n), seconds,
              static_cast<double>(n) / std::max(seconds, 1e-9));
  std::printf("loss: %.4f - accuracy: %.4f - f1_macro: %.4f\n", loss, accuracy, f1_macro);
  if (!tta.empty()) std::printf("accuracy with --tta %s: %.4f\n", tta.c_str(), accuracy_tta);
  if (!no_per_class) {
    std::printf("\nper-class F1 (classes present in the labels or the predictions):\n");
    std::printf("  %3s  %-28s %6s %9s %6s %7s\n", "#", "class", "F1", "precision", "recall", "support");
    for (const ClassScore& s : scores) {
      if (s.support + s.predicted == 0) continue;
      std::printf("  %3lld  %-28s %6.3f %9.3f %6.3f %7lld\n", static_cast<long long>(s.index),
                  ("'" + names[static_cast<size_t>(s.index)] + "'").c_str(), s.f1, s.precision, s.recall,
                  static_cast<long long>(s.support));
    }
  }
  // The worst classes (lowest F1 among those with examples) and where their examples went.
  std::vector<ClassScore> ranked;
  for (const ClassScore& s : scores)
    if (s.support > 0) ranked.push_back(s);
  std::stable_sort(ranked.begin(), ranked.end(), [](const ClassScore& a, const ClassScore& b) { return a.f1 < b.f1; });
  if (ranked.size() > static_cast<size_t>(worst)) ranked.resize(static_cast<size_t>(worst));
  if (!ranked.empty()) std::printf("\nworst %zu classes by F1, and what their images were taken for:\n", ranked.size());
  for (const ClassScore& s : ranked) {
    std::vector<std::pair<int64_t, int64_t>> wrong;  // (count, predicted class)
    for (int64_t j = 0; j < k; ++j)
      if (j != s.index && confusion[static_cast<size_t>(s.index * k + j)] > 0)
        wrong.emplace_back(confusion[static_cast<size_t>(s.index * k + j)], j);
    std::sort(wrong.begin(), wrong.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    std::string where;
    for (size_t i = 0; i < std::min<size_t>(3, wrong.size()); ++i)
      where += (i ? ", " : "") + ("'" + names[static_cast<size_t>(wrong[i].second)] + "'") + " x" + std::to_string(wrong[i].first);
    std::printf("  %3lld '%s': F1 %.3f, %lld/%lld right%s%s\n", static_cast<long long>(s.index),
                names[static_cast<size_t>(s.index)].c_str(), s.f1, static_cast<long long>(s.tp),
                static_cast<long long>(s.support), where.empty() ? "" : "; taken for ", where.c_str());
  }
  if (!json_out.empty()) {
    nlohmann::json classes = nlohmann::json::array();
    for (const ClassScore& s : scores)
      classes.push_back({{"index", s.index}, {"name", names[static_cast<size_t>(s.index)]}, {"f1", s.f1},
                         {"precision", s.precision}, {"recall", s.recall}, {"support", s.support}});
    nlohmann::json j = {{"images", n}, {"loss", loss}, {"accuracy", accuracy}, {"f1_macro", f1_macro},
                        {"seconds", seconds}, {"classes", classes}};
    if (!tta.empty()) j["accuracy_tta"] = {{"tta", tta}, {"accuracy", accuracy_tta}};
    if (Status s = WriteFileAtomic(json_out, j.dump(2) + "\n"); !s.ok()) return Fail("evaluate", s.ToString());
  }
  return kExitOk;
}

const Registrar kEvaluate({"evaluate", "loss, accuracy, macro F1 and per-class F1 of a saved model on labelled TFRecords",
                           RunEvaluate});

}  // namespace
}  // namespace strata::cli
