// strata predict: a saved model's class for every record of (test) TFRecords, as the
// competition's submission.csv: `id,label`, one row per record, ids as stored.
#include <algorithm>
#include <cstdio>
#include <set>

#include "command.h"
#include "model_io.h"
#include "predict_photos.h"
#include "strata/core/clock.h"
#include "strata/core/file.h"

namespace strata::cli {
namespace {

// An id as stored: the padded batch filled short ids with zero bytes. Quoted (RFC 4180) only
// when it holds a comma, a quote or a line break.
std::string CsvField(const uint8_t* bytes, int64_t len) {
  while (len > 0 && bytes[len - 1] == 0) --len;
  std::string s(reinterpret_cast<const char*>(bytes), static_cast<size_t>(len));
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

int RunPredict(const std::vector<std::string>& args) {
  std::string model_arg, weights, data_glob, out, image_key, id_key = "id";
  int64_t batch = 64, top = 5;
  bool probabilities = false, json = false;
  FlagParser flags("predict",
                   "--model CKPT|SPEC [--weights CKPT] --data GLOB --out FILE.csv [--probabilities] [--batch N]\n"
                   "       strata predict --model APPLICATION --weights FILE.h5|imagenet [--top K] [--json] PHOTO|FOLDER...",
                   "Predicts the class of every record of the files (the flowers test split: `image` and `id`) and\n"
                   "writes a submission: header `id,label`, one row per record, ids as stored, the file written\n"
                   "atomically. --probabilities adds one score column per class (prob_0 .. prob_K-1).\n"
                   "With photos (JPEG or PNG files, or folders of them) instead of --data: classifies each with a\n"
                   "Keras application and its ImageNet weights (the model's own preprocess_input) and prints\n"
                   "Keras's decode_predictions table, the top K classes per photo (--json: one JSON line each).");
  flags.String("model", &model_arg, "a checkpoint from strata train, a spec (with --weights), or a Keras application");
  flags.String("weights", &weights,
               "the weights of a --model SPEC or application: a Strata checkpoint, a Keras .h5 (in order, as Keras's "
               "applications load it) or imagenet (Keras's published file, downloaded once)");
  flags.Int("top", &top, "photos: the classes shown per photo (default 5)");
  flags.Bool("json", &json, "photos: one JSON line per photo instead of the table");
  flags.String("data", &data_glob, "TFRecord files with `image` and `id` (glob), e.g. 'DIR/test/*.tfrec'");
  flags.String("out", &out, "the CSV to write (e.g. submission.csv)");
  flags.String("image-key", &image_key, "feature holding the encoded image (default: the checkpoint's, else image)");
  flags.String("id-key", &id_key, "feature holding each record's id (default id); '' : ids are the record numbers 0, 1, ...");
  flags.Bool("probabilities", &probabilities, "add the class probabilities as columns");
  flags.Int("batch", &batch, "images per forward pass (default 64)");
  std::vector<std::string> photos;
  if (int rc = flags.Parse(args, &photos); rc >= 0) return rc;
  if (!photos.empty()) {
    if (!data_glob.empty() || !out.empty())
      return Fail("predict", "give photos or --data/--out, not both", kExitUsage);
    if (model_arg.empty()) return Fail("predict", "--model is required", kExitUsage);
    return RunPredictPhotos({.model = model_arg, .weights = weights, .paths = photos, .top = top, .json = json});
  }
  if (model_arg.empty() || data_glob.empty() || out.empty())
    return Fail("predict", "--model, --data and --out are required", kExitUsage);
  if (batch < 1) return Fail("predict", "--batch must be positive", kExitUsage);
  auto loaded = LoadModelForInference(model_arg, weights);
  if (!loaded.ok()) return Fail("predict", loaded.status().ToString());
  train::ModelInfo info = loaded->info;
  if (!image_key.empty()) info.image_key = image_key;
  auto ds = train::InferenceDataset(info, data_glob, batch, /*labels=*/false, id_key);
  if (!ds.ok()) return Fail("predict", ds.status().ToString());

  Stopwatch clock;
  std::string csv;
  int64_t n = 0, k = 0;
  std::set<std::string> seen;
  std::string duplicate;
  Status st = ForEachPrediction(*loaded->model, *ds, [&](const data::Element& b, const std::vector<float>& p, int64_t rows, int64_t kk) -> Status {
    if (k == 0) {
      k = kk;
      csv = "id,label";
      for (int64_t c = 0; probabilities && c < k; ++c) csv += ",prob_" + std::to_string(c);
      csv += "\n";
    }
    const Tensor ids = id_key.empty() ? Tensor() : b.tensors.back().Contiguous();  // u8 [B, L]
    const int64_t len = id_key.empty() ? 0 : ids.num_elements() / std::max<int64_t>(rows, 1);
    char buf[32];
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = p.data() + r * k;
      const std::string id = id_key.empty() ? std::to_string(n) : CsvField(ids.data<uint8_t>() + r * len, len);
      if (!seen.insert(id).second && duplicate.empty()) duplicate = id;
      csv += id + "," + std::to_string(std::max_element(row, row + k) - row);
      for (int64_t c = 0; probabilities && c < k; ++c) {
        std::snprintf(buf, sizeof(buf), ",%.6g", row[c]);
        csv += buf;
      }
      csv += "\n";
      ++n;
    }
    return Status::OK();
  });
  if (!st.ok()) return Fail("predict", st.ToString());
  if (n == 0) return Fail("predict", "no records in " + data_glob);
  if (Status s = WriteFileAtomic(out, csv); !s.ok()) return Fail("predict", s.ToString());
  const double seconds = clock.ElapsedSeconds();
  std::printf("predicted %lld images in %.1f s (%.0f images/s)\n", static_cast<long long>(n), seconds,
              static_cast<double>(n) / std::max(seconds, 1e-9));
  if (!duplicate.empty()) std::fprintf(stderr, "strata predict: warning: id %s occurs more than once\n", duplicate.c_str());
  std::printf("wrote %s (%lld rows: id,label%s)\n", out.c_str(), static_cast<long long>(n), probabilities ? ",prob_*" : "");
  return kExitOk;
}

const Registrar kPredict({"predict", "a saved model's predictions as submission.csv (id,label)", RunPredict});

}  // namespace
}  // namespace strata::cli
