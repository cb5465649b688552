// `strata predict --model APPLICATION --weights FILE|imagenet photo.jpg [more files or folders]`:
// Keras's "classify a photo": each image decoded, resized to the model's input (bilinear, as
// tf.image.resize), put through the model's own preprocess_input and the model, and shown as
// Keras's decode_predictions table (or one JSON line per photo).
#pragma once

#include <string>
#include <vector>

namespace strata::cli {

struct PhotoPrediction {
  std::string model, weights;
  std::vector<std::string> paths;  // image files (JPEG, PNG) and folders of them
  int64_t top = 5;
  bool json = false;
};
int RunPredictPhotos(const PhotoPrediction& p);

}  // namespace strata::cli
