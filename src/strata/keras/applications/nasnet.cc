// NASNetMobile and NASNetLarge (Zoph et al. 2018) as Keras builds them
// (keras.applications.nasnet): a 3x3/2 stem, two stem reduction cells, then three stacks of
// normal cells separated by reduction cells. Each cell takes the two previous cells' outputs
// (ip and p); _adjust_block first brings p to ip's size (a two-path factorized reduction, or a
// 1x1 projection). Branches are relu -> separable conv -> BN twice (_separable_conv_block),
// 3x3 average / max pools and identities, added in pairs and concatenated. Keras leaves the
// cells' first ReLUs, the adjust paths' padding, cropping and concatenation, and one add of
// each reduction cell unnamed: they carry its automatic names. Which path _adjust_block takes
// depends on the tensors' shapes, so this builder tracks each tensor's height, width and
// channels as Keras's backend.int_shape would give them.

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

struct Config {
  const char* function;
  const char* keras_name;  // the model's name in Keras: both are "NASNet"
  int default_size;
  int penultimate_filters, num_blocks, stem_block_filters;
  bool skip_reduction;
  int filter_multiplier;
};
constexpr Config kMobile{"NASNetMobile", "NASNet", 224, 1056, 4, 32, false, 2};
constexpr Config kLarge{"NASNetLarge", "NASNet", 331, 4032, 6, 96, true, 2};

// A Keras tensor with the static shape Keras's int_shape gives ([N,] H, W, C).
struct T {
  KTensor t;
  int64_t h = 0, w = 0, c = 0;
};

class Builder {
 public:
  T Relu(const T& x, const std::string& name = "") {
    return {Call(layers::Activation("relu", name.empty() ? names_.Next("activation") : name), x.t), x.h, x.w, x.c};
  }
  T Bn(const T& x, const std::string& name) {
    return {Call(layers::BatchNormalization({.momentum = 0.9997f, .epsilon = 1e-3f, .name = name}), x.t), x.h, x.w, x.c};
  }
  T Conv1x1(const T& x, int filters, const std::string& name) {
    return {Call(layers::Conv2D(filters, 1, {.padding = "same", .use_bias = false, .kernel_initializer = "he_normal",
                                             .name = name}),
                 x.t),
            x.h, x.w, filters};
  }
  T Pool(const T& x, bool max, int size, int strides, const std::string& padding, const std::string& name) {
    const layers::Pool2DOptions o{.pool_size = size, .strides = strides, .padding = padding, .name = name};
    const int64_t h = padding == "same" ? (x.h + strides - 1) / strides : (x.h - size) / strides + 1;
    const int64_t w = padding == "same" ? (x.w + strides - 1) / strides : (x.w - size) / strides + 1;
    return {Call(max ? layers::MaxPooling2D(o) : layers::AveragePooling2D(o), x.t), h, w, x.c};
  }
  T Add(const T& a, const T& b, const std::string& name = "") {
    return {Call(layers::Add(name.empty() ? names_.Next("add") : name), std::vector<KTensor>{a.t, b.t}), a.h, a.w, a.c};
  }
  T Concat(const std::vector<T>& xs, const std::string& name = "") {
    std::vector<KTensor> ts;
    int64_t c = 0;
    for (const T& x : xs) ts.push_back(x.t), c += x.c;
    return {Call(layers::Concatenate(-1, name.empty() ? names_.Next("concatenate") : name), ts), xs[0].h, xs[0].w, c};
  }
  T ZeroPad(const T& x, layers::ZeroPadding2DOptions o) {
    if (o.name.empty()) o.name = names_.Next("zero_padding2d");
    return {Call(layers::ZeroPadding2D(o), x.t), x.h + o.top + o.bottom, x.w + o.left + o.right, x.c};
  }

  // _separable_conv_block(ip, filters, kernel_size, strides, block_id).
  T SeparableBlock(const T& ip, int filters, int k, int strides, const std::string& id) {
    T x = Relu(ip);
    std::string padding = "same";
    if (strides == 2) {
      x = ZeroPad(x, internal::CorrectPad(x.h, x.w, k, "separable_conv_1_pad_" + id));
      padding = "valid";
    }
    const int64_t h = strides == 2 ? (x.h - k) / 2 + 1 : x.h, w = strides == 2 ? (x.w - k) / 2 + 1 : x.w;
    x = {Call(layers::SeparableConv2D(filters, k, {.strides = strides, .padding = padding, .use_bias = false,
                                                   .name = "separable_conv_1_" + id}),
              x.t),
         h, w, filters};
    x = Relu(Bn(x, "separable_conv_1_bn_" + id));
    x = {Call(layers::SeparableConv2D(filters, k, {.padding = "same", .use_bias = false, .name = "separable_conv_2_" + id}),
              x.t),
         x.h, x.w, filters};
    return Bn(x, "separable_conv_2_bn_" + id);
  }

  // _adjust_block(p, ip, filters, block_id): p at ip's width and `filters` channels.
  T Adjust(const T* p, const T& ip, int filters, const std::string& id) {
    if (p == nullptr) return ip;
    if (p->w != ip.w) {
      T r = Relu(*p, "adjust_relu_1_" + id);
      T p1 = Conv1x1(Pool(r, false, 1, 2, "valid", "adjust_avg_pool_1_" + id), filters / 2, "adjust_conv_1_" + id);
      T p2 = ZeroPad(r, {.top = 0, .bottom = 1, .left = 0, .right = 1});
      p2 = {Call(layers::Cropping2D({.top = 1, .bottom = 0, .left = 1, .right = 0, .name = names_.Next("cropping2d")}),
                 p2.t),
            r.h, r.w, r.c};
      p2 = Conv1x1(Pool(p2, false, 1, 2, "valid", "adjust_avg_pool_2_" + id), filters / 2, "adjust_conv_2_" + id);
      return Bn(Concat({p1, p2}), "adjust_bn_" + id);
    }
    if (p->c != filters) return Bn(Conv1x1(Relu(*p), filters, "adjust_conv_projection_" + id), "adjust_bn_" + id);
    return *p;
  }

  // _normal_a_cell(ip, p, filters, block_id): returns (x, ip).
  std::pair<T, T> Normal(const T& ip, const T* p_in, int filters, const std::string& id) {
    const T p = Adjust(p_in, ip, filters, id);
    const T h = Bn(Conv1x1(Relu(ip), filters, "normal_conv_1_" + id), "normal_bn_1_" + id);
    T x1_1 = SeparableBlock(h, filters, 5, 1, "normal_left1_" + id);
    T x1_2 = SeparableBlock(p, filters, 3, 1, "normal_right1_" + id);
    T x1 = Add(x1_1, x1_2, "normal_add_1_" + id);
    T x2_1 = SeparableBlock(p, filters, 5, 1, "normal_left2_" + id);
    T x2_2 = SeparableBlock(p, filters, 3, 1, "normal_right2_" + id);
    T x2 = Add(x2_1, x2_2, "normal_add_2_" + id);
    T x3 = Add(Pool(h, false, 3, 1, "same", "normal_left3_" + id), p, "normal_add_3_" + id);
    T x4_1 = Pool(p, false, 3, 1, "same", "normal_left4_" + id);
    T x4_2 = Pool(p, false, 3, 1, "same", "normal_right4_" + id);
    T x4 = Add(x4_1, x4_2, "normal_add_4_" + id);
    T x5 = Add(SeparableBlock(h, filters, 3, 1, "normal_left5_" + id), h, "normal_add_5_" + id);
    return {Concat({p, x1, x2, x3, x4, x5}, "normal_concat_" + id), ip};
  }

  // _reduction_a_cell(ip, p, filters, block_id): returns (x, ip).
  std::pair<T, T> Reduction(const T& ip, const T* p_in, int filters, const std::string& id) {
    const T p = Adjust(p_in, ip, filters, id);
    const T h = Bn(Conv1x1(Relu(ip), filters, "reduction_conv_1_" + id), "reduction_bn_1_" + id);
    const T h3 = ZeroPad(h, internal::CorrectPad(h.h, h.w, 3, "reduction_pad_1_" + id));
    T x1_1 = SeparableBlock(h, filters, 5, 2, "reduction_left1_" + id);
    T x1_2 = SeparableBlock(p, filters, 7, 2, "reduction_right1_" + id);
    T x1 = Add(x1_1, x1_2, "reduction_add_1_" + id);
    T x2_1 = Pool(h3, true, 3, 2, "valid", "reduction_left2_" + id);
    T x2_2 = SeparableBlock(p, filters, 7, 2, "reduction_right2_" + id);
    T x2 = Add(x2_1, x2_2, "reduction_add_2_" + id);
    T x3_1 = Pool(h3, false, 3, 2, "valid", "reduction_left3_" + id);
    T x3_2 = SeparableBlock(p, filters, 5, 2, "reduction_right3_" + id);
    T x3 = Add(x3_1, x3_2, "reduction_add3_" + id);
    T x4 = Add(x2, Pool(x1, false, 3, 1, "same", "reduction_left4_" + id));
    T x5_1 = SeparableBlock(x1, filters, 3, 1, "reduction_left4_" + id);  // Keras reuses the id
    T x5_2 = Pool(h3, true, 3, 2, "valid", "reduction_right5_" + id);
    T x5 = Add(x5_1, x5_2, "reduction_add4_" + id);
    return {Concat({x2, x3, x4, x5}, "reduction_concat_" + id), ip};
  }

 private:
  internal::AutoNames names_;
};

Result<std::unique_ptr<Model>> Build(const Config& cfg, Options o) {
  const internal::ModelFacts facts{cfg.function, cfg.keras_name, cfg.default_size, 32};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  KTensor input = internal::ImageInput(o, input_shape);
  Builder b;
  const int fm = cfg.filter_multiplier;
  const int filters = cfg.penultimate_filters / 24;
  T x{Call(layers::Conv2D(cfg.stem_block_filters, 3, {.strides = 2, .use_bias = false,
                                                      .kernel_initializer = "he_normal", .name = "stem_conv1"}),
           input),
      (input_shape[0] - 3) / 2 + 1, (input_shape[1] - 3) / 2 + 1, cfg.stem_block_filters};
  x = b.Bn(x, "stem_bn1");
  std::pair<T, T> xp = b.Reduction(x, nullptr, filters / (fm * fm), "stem_1");
  xp = b.Reduction(xp.first, &xp.second, filters / fm, "stem_2");
  // Keras's block ids: the normal cells are 0..n-1, n+1..2n and 2n+1..3n, the reduction cells
  // before the second and third stacks reduce_n and reduce_2n.
  const int n = cfg.num_blocks;
  for (int stack = 0; stack < 3; ++stack) {
    const int width = filters * (stack == 0 ? 1 : stack == 1 ? fm : fm * fm);
    if (stack > 0) {
      const T p = xp.second;
      xp = b.Reduction(xp.first, &p, width, "reduce_" + std::to_string(stack * n));
      if (cfg.skip_reduction) xp.second = p;  // the next cell's p skips the reduction cell
    }
    for (int i = 0; i < n; ++i)
      xp = b.Normal(xp.first, &xp.second, width, std::to_string(stack == 0 ? i : stack * n + 1 + i));
  }
  KTensor out = b.Relu(xp.first).t;
  out = internal::Top(out, o, {});
  return internal::Finish(input, out, o, facts.keras_name);
}

}  // namespace

Result<std::unique_ptr<Model>> NASNetMobile(Options o) { return Build(kMobile, std::move(o)); }
Result<std::unique_ptr<Model>> NASNetLarge(Options o) { return Build(kLarge, std::move(o)); }

}  // namespace strata::keras::applications
