#include "strata/train/tta.h"

#include <algorithm>
#include <utility>

#include "strata/image/flip.h"

namespace strata::train {
namespace {

// x [B, H, W, C] f32 of an (x, y) batch, checked.
Result<Tensor> Images(const data::Element& e) {
  if (e.size() != 2 || e.is_dict())
    return InvalidArgument("--tta: the evaluation data's elements must be (image, label) batches");
  const Tensor& x = e[0];
  if (x.dtype() != DType::kF32 || x.rank() != 4)
    return InvalidArgument("--tta: the images must be f32 [batch, height, width, channels]; got " +
                           x.DebugString());
  return x.Contiguous();
}

// The batch with every image mirrored left-right.
Result<data::Element> MirrorImages(data::Element e) {
  STRATA_ASSIGN_OR_RETURN(Tensor x, Images(e));
  const Shape& s = x.shape();
  const int h = static_cast<int>(s[1]), w = static_cast<int>(s[2]), c = static_cast<int>(s[3]);
  const int64_t image = static_cast<int64_t>(h) * w * c;
  Tensor out = Tensor::Empty(DType::kF32, s);
  for (int64_t b = 0; b < s[0]; ++b)
    image::FlipLeftRight(x.data<float>() + b * image, h, w, c, out.data<float>() + b * image);
  e[0] = std::move(out);
  return e;
}

// The class ids of `steps` batches of `data`, in order.
Result<std::vector<int64_t>> Labels(const data::Dataset& data, int64_t steps) {
  STRATA_ASSIGN_OR_RETURN(auto it, data.make_iterator());
  std::vector<int64_t> labels;
  for (int64_t step = 0; steps < 0 || step < steps; ++step) {
    data::Element e;
    bool end = false;
    STRATA_RETURN_IF_ERROR(it->GetNext(&e, &end));
    if (end) break;
    STRATA_RETURN_IF_ERROR(Images(e).status());
    const Tensor y = e[1].Contiguous();
    if (y.rank() != 1 || (y.dtype() != DType::kI64 && y.dtype() != DType::kI32))
      return InvalidArgument("--tta: the labels must be integer class ids [batch]; got " + y.DebugString());
    for (int64_t i = 0; i < y.num_elements(); ++i)
      labels.push_back(y.dtype() == DType::kI64 ? y.data<int64_t>()[i] : y.data<int32_t>()[i]);
  }
  return labels;
}

}  // namespace

std::vector<std::string> TtaNames() { return {"", "flip"}; }

Status CheckTta(const std::string& tta) {
  const std::vector<std::string> names = TtaNames();
  if (std::find(names.begin(), names.end(), tta) == names.end())
    return InvalidArgument("--tta must be flip (or empty for none); got '" + tta + "'");
  return Status::OK();
}

Result<double> TtaAccuracy(keras::Model& model, const data::Dataset& data, int64_t steps, const std::string& tta) {
  STRATA_RETURN_IF_ERROR(CheckTta(tta));
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> labels, Labels(data, steps));
  STRATA_ASSIGN_OR_RETURN(Tensor sum, model.predict(data, steps));
  if (tta == "flip") {
    STRATA_ASSIGN_OR_RETURN(Tensor mirrored, model.predict(data.map(MirrorImages), steps));
    if (mirrored.shape() != sum.shape())
      return InvalidArgument("--tta: the model's outputs for the mirror images are " + mirrored.shape().ToString() +
                             ", for the images " + sum.shape().ToString());
    float* s = sum.data<float>();
    const float* m = mirrored.data<float>();
    for (int64_t i = 0; i < sum.num_elements(); ++i) s[i] += m[i];  // the mean's argmax is the sum's
  }
  if (sum.rank() != 2 || sum.shape()[0] != static_cast<int64_t>(labels.size()))
    return InvalidArgument("--tta: the model's outputs are " + sum.shape().ToString() + " for " +
                           std::to_string(labels.size()) + " labels; it needs one row of class scores per image");
  const int64_t n = sum.shape()[0], k = sum.shape()[1];
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = sum.data<float>() + i * k;
    right += (std::max_element(row, row + k) - row) == labels[static_cast<size_t>(i)];
  }
  return n == 0 ? 0.0 : static_cast<double>(right) / static_cast<double>(n);
}

}  // namespace strata::train
