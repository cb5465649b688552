// Keras's imagenet_utils.preprocess_input (its NumPy path, _preprocess_numpy_input) on
// channels-last float32 images, in float32 and in Keras's order of operations, so the results
// are Keras's to the bit.
#include <string>

#include "strata/keras/applications/applications.h"

namespace strata::keras::applications {

Status PreprocessInput(Tensor* images, const std::string& mode) {
  if (mode.empty() || mode == "none") return Status::OK();
  if (mode != "caffe" && mode != "tf" && mode != "torch")
    return InvalidArgument("preprocess_input: mode must be \"caffe\", \"tf\", \"torch\" or none, got \"" + mode + "\"");
  if (images->dtype() != DType::kF32)
    return InvalidArgument("preprocess_input: images must be float32, got " + std::string(DTypeName(images->dtype())) +
                           images->shape().ToString());
  float* x = images->data<float>();
  const int64_t n = images->num_elements();
  if (mode == "tf") {  // x /= 127.5; x -= 1.
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] / 127.5f - 1.0f;
    return Status::OK();
  }
  const Shape& s = images->shape();
  if (s.rank() == 0 || s[s.rank() - 1] != 3)
    return InvalidArgument("preprocess_input (mode \"" + mode + "\"): images must have 3 channels last (RGB), got " +
                           s.ToString());
  if (mode == "caffe") {  // 'RGB'->'BGR', then zero-centre each channel on ImageNet's BGR mean
    const float mean[3] = {103.939f, 116.779f, 123.68f};
    for (int64_t i = 0; i < n; i += 3) {
      const float r = x[i], b = x[i + 2];
      x[i] = b - mean[0];
      x[i + 1] = x[i + 1] - mean[1];
      x[i + 2] = r - mean[2];
    }
    return Status::OK();
  }
  // torch: x /= 255.; then per channel x -= mean; x /= std.
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stddev[3] = {0.229f, 0.224f, 0.225f};
  for (int64_t i = 0; i < n; i += 3)
    for (int c = 0; c < 3; ++c) x[i + c] = (x[i + c] / 255.0f - mean[c]) / stddev[c];
  return Status::OK();
}

}  // namespace strata::keras::applications
