#include "predict_photos.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "command.h"
#include "model_io.h"
#include "strata/core/file.h"
#include "strata/image/decode.h"
#include "strata/image/resize.h"
#include "strata/keras/applications/applications.h"

namespace strata::cli {
namespace {

namespace fs = std::filesystem;

bool IsImageName(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

// The files named, folders expanded to their images (sorted), in the order given.
Result<std::vector<std::string>> ExpandPaths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> images;
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file() && IsImageName(e.path())) images.push_back(e.path().string());
      if (images.empty()) return InvalidArgument(p + ": a folder with no .jpg, .jpeg or .png files");
      std::sort(images.begin(), images.end());
      out.insert(out.end(), images.begin(), images.end());
    } else if (fs::is_regular_file(p, ec)) {
      out.push_back(p);
    } else {
      return NotFound(p + ": no such file or folder");
    }
  }
  return out;
}

// One photo as the model's input row: RGB, resized to [size, size], 0..255 floats.
Status LoadPhoto(const std::string& path, int64_t height, int64_t width, float* row) {
  STRATA_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  image::Image img;
  if (Status s = image::DecodeImage(bytes, {.channels = 3}, &img); !s.ok()) return s.WithContext(path);
  return image::ResizeToFloat(img.view(), static_cast<int>(height), static_cast<int>(width), {}, row);
}

}  // namespace

int RunPredictPhotos(const PhotoPrediction& p) {
  if (!keras::applications::IsApplication(p.model))
    return Fail("predict", "photos need --model one of the Keras applications (" +
                               keras::applications::NameList() + "), got " + p.model, kExitUsage);
  if (p.weights.empty())
    return Fail("predict", "photos need --weights: a Keras .h5 file of " + p.model +
                               " with its top, or imagenet (random weights classify nothing)", kExitUsage);
  if (p.top < 1) return Fail("predict", "--top must be at least 1", kExitUsage);
  auto files = ExpandPaths(p.paths);
  if (!files.ok()) return Fail("predict", files.status().ToString());
  auto loaded = LoadModelForInference(p.model, p.weights);
  if (!loaded.ok()) return Fail("predict", loaded.status().ToString());
  auto mode = keras::applications::PreprocessMode(p.model);
  auto shape = loaded->model->input_shape(0);
  if (!mode.ok() || !shape.ok()) return Fail("predict", (!mode.ok() ? mode.status() : shape.status()).ToString());
  const int64_t h = (*shape)[0], w = (*shape)[1];
  const int64_t n = static_cast<int64_t>(files->size());
  Tensor images(DType::kF32, {n, h, w, 3});
  for (int64_t i = 0; i < n; ++i)
    if (Status s = LoadPhoto((*files)[static_cast<size_t>(i)], h, w, images.data<float>() + i * h * w * 3); !s.ok())
      return Fail("predict", s.ToString());
  if (Status s = keras::applications::PreprocessInput(&images, *mode); !s.ok()) return Fail("predict", s.ToString());
  auto probs = loaded->model->predict(data::Dataset::from_tensor_slices(data::Element({images})).batch(32));
  if (!probs.ok()) return Fail("predict", probs.status().ToString());
  auto table = keras::applications::DecodePredictions(*probs, static_cast<int>(p.top));
  if (!table.ok()) return Fail("predict", table.status().WithContext("--model " + p.model).ToString());
  for (int64_t i = 0; i < n; ++i) {
    const std::string& file = (*files)[static_cast<size_t>(i)];
    const auto& rows = (*table)[static_cast<size_t>(i)];
    if (p.json) {
      nlohmann::json j = {{"file", file}, {"predictions", nlohmann::json::array()}};
      for (const auto& c : rows) j["predictions"].push_back({{"class_id", c.class_id}, {"name", c.name}, {"score", c.score}});
      std::printf("%s\n", j.dump().c_str());
      continue;
    }
    std::printf("%s\n", file.c_str());
    for (size_t r = 0; r < rows.size(); ++r)
      std::printf("  %2zu. %-10s %-30s %.4f\n", r + 1, rows[r].class_id.c_str(), rows[r].name.c_str(), rows[r].score);
  }
  return kExitOk;
}

}  // namespace strata::cli
