// InceptionV3 (Szegedy et al. 2016) as Keras builds it (keras.applications.inception_v3): a
// five-convolution stem, then "mixed" blocks of parallel branches (1x1; 5x5 or factorized 1x7 /
// 7x1; double 3x3; a 3x3 average pool then 1x1) concatenated on the channels. Every
// convolution is Keras's conv2d_bn: Conv2D without bias, BatchNormalization without gamma
// (scale=False), ReLU; Keras names none of them, so they carry its automatic names
// (conv2d_<n>, batch_normalization_<n>, activation_<n>, in call order).

#include <vector>

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

class InceptionBuilder {
 public:
  // conv2d_bn(x, filters, rows, cols, padding, strides).
  KTensor ConvBn(const KTensor& x, int filters, int rows, int cols, const std::string& padding = "same",
                 int strides = 1) {
    return internal::InceptionConvBn(x, filters, {rows, cols}, &names_, strides, padding);
  }
  KTensor Stem(const KTensor& input) { return internal::InceptionStem(input, &names_); }
  KTensor MaxPool(const KTensor& x) {
    return Call(layers::MaxPooling2D({.pool_size = 3, .strides = 2, .name = names_.Next("max_pooling2d")}), x);
  }
  // The branch_pool's 3x3/1 "same" average pool (padding not counted) and its 1x1 conv2d_bn.
  KTensor PoolBranch(const KTensor& x, int filters) {
    KTensor y = Call(layers::AveragePooling2D({.pool_size = 3, .strides = 1, .padding = "same",
                                               .name = names_.Next("average_pooling2d")}),
                     x);
    return ConvBn(y, filters, 1, 1);
  }
  // layers.concatenate(branches, name=name); an empty name takes Keras's automatic one.
  KTensor Concat(std::vector<KTensor> branches, const std::string& name = "") {
    return Call(layers::Concatenate(-1, name.empty() ? names_.Next("concatenate") : name), branches);
  }

 private:
  internal::AutoNames names_;
};

}  // namespace

Result<std::unique_ptr<Model>> InceptionV3(Options o) {
  const internal::ModelFacts facts{"InceptionV3", "inception_v3", 299, 75};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  KTensor input = internal::ImageInput(o, input_shape);
  InceptionBuilder b;
  KTensor x = b.Stem(input);

  // mixed0-2: 35 x 35 (at 299 px), the pool branch 32 then 64 filters.
  for (int i = 0; i < 3; ++i) {
    KTensor b1x1 = b.ConvBn(x, 64, 1, 1);
    KTensor b5x5 = b.ConvBn(b.ConvBn(x, 48, 1, 1), 64, 5, 5);
    KTensor b3x3dbl = b.ConvBn(b.ConvBn(b.ConvBn(x, 64, 1, 1), 96, 3, 3), 96, 3, 3);
    KTensor pool = b.PoolBranch(x, i == 0 ? 32 : 64);
    x = b.Concat({b1x1, b5x5, b3x3dbl, pool}, "mixed" + std::to_string(i));
  }
  // mixed3: to 17 x 17.
  {
    KTensor b3x3 = b.ConvBn(x, 384, 3, 3, "valid", 2);
    KTensor b3x3dbl = b.ConvBn(b.ConvBn(b.ConvBn(x, 64, 1, 1), 96, 3, 3), 96, 3, 3, "valid", 2);
    KTensor pool = b.MaxPool(x);
    x = b.Concat({b3x3, b3x3dbl, pool}, "mixed3");
  }
  // mixed4-7: factorized 7x7 branches, 128, 160, 160 and 192 wide inside.
  const int widths[] = {128, 160, 160, 192};
  for (int i = 0; i < 4; ++i) {
    const int c = widths[i];
    KTensor b1x1 = b.ConvBn(x, 192, 1, 1);
    KTensor b7x7 = b.ConvBn(b.ConvBn(b.ConvBn(x, c, 1, 1), c, 1, 7), 192, 7, 1);
    KTensor dbl = b.ConvBn(x, c, 1, 1);
    dbl = b.ConvBn(b.ConvBn(dbl, c, 7, 1), c, 1, 7);
    dbl = b.ConvBn(b.ConvBn(dbl, c, 7, 1), 192, 1, 7);
    KTensor pool = b.PoolBranch(x, 192);
    x = b.Concat({b1x1, b7x7, dbl, pool}, "mixed" + std::to_string(4 + i));
  }
  // mixed8: to 8 x 8.
  {
    KTensor b3x3 = b.ConvBn(b.ConvBn(x, 192, 1, 1), 320, 3, 3, "valid", 2);
    KTensor b7x7x3 = b.ConvBn(b.ConvBn(b.ConvBn(x, 192, 1, 1), 192, 1, 7), 192, 7, 1);
    b7x7x3 = b.ConvBn(b7x7x3, 192, 3, 3, "valid", 2);
    KTensor pool = b.MaxPool(x);
    x = b.Concat({b3x3, b7x7x3, pool}, "mixed8");
  }
  // mixed9, mixed10: the 3x3 branches split into parallel 1x3 and 3x1.
  for (int i = 0; i < 2; ++i) {
    KTensor b1x1 = b.ConvBn(x, 320, 1, 1);
    KTensor b3x3 = b.ConvBn(x, 384, 1, 1);
    KTensor b3x3_1 = b.ConvBn(b3x3, 384, 1, 3);
    KTensor b3x3_2 = b.ConvBn(b3x3, 384, 3, 1);
    b3x3 = b.Concat({b3x3_1, b3x3_2}, "mixed9_" + std::to_string(i));
    KTensor dbl = b.ConvBn(b.ConvBn(x, 448, 1, 1), 384, 3, 3);
    KTensor dbl_1 = b.ConvBn(dbl, 384, 1, 3);
    KTensor dbl_2 = b.ConvBn(dbl, 384, 3, 1);
    dbl = b.Concat({dbl_1, dbl_2});
    KTensor pool = b.PoolBranch(x, 192);
    x = b.Concat({b1x1, b3x3, dbl, pool}, "mixed" + std::to_string(9 + i));
  }
  x = internal::Top(x, o, {.top_pool = "avg_pool"});
  return internal::Finish(input, x, o, facts.keras_name);
}

}  // namespace strata::keras::applications
