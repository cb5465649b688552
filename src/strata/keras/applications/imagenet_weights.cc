// Where Keras publishes each application's ImageNet weights: its URL, the name Keras caches the
// file under and its MD5, as tf.keras 2.x's keras/applications/*.py give them (checked equal
// from Keras 2.6 to tf-keras 2.21; ConvNeXt, EfficientNetV2 and MobileNetV3 as Keras 3's), and
// Keras's rules for which file a configuration takes.
#include <cmath>
#include <cstdio>

#include "strata/core/log.h"
#include "strata/keras/applications/applications.h"

namespace strata::keras::applications {
namespace {

struct Published {
  const char* name;  // the command-line name
  const char* base;  // the URL's directory
  const char* top_file;
  const char* top_md5;  // or SHA-256
  const char* notop_file;
  const char* notop_md5;
  // The URL's file names where they differ from the cached ones (NASNet's), else null.
  const char* top_url_file = nullptr;
  const char* notop_url_file = nullptr;
};

// ConvNeXt's files carry SHA-256 digests (Keras's get_file tells the two apart by length).
constexpr const char* kConvNeXtBase = "https://storage.googleapis.com/tensorflow/keras-applications/convnext/";
// EfficientNetV2's, from Keras 3's efficientnet_v2.py (MD5).
constexpr const char* kEfficientNetV2Base = "https://storage.googleapis.com/tensorflow/keras-applications/efficientnet_v2/";

// clang-format off
const Published kPublished[] = {
      {"vgg16", "https://storage.googleapis.com/tensorflow/keras-applications/vgg16/",
       "vgg16_weights_tf_dim_ordering_tf_kernels.h5", "64373286793e3c8b2b4e3219cbf3544b",
       "vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5", "6d6bbae143d832006294945121d1f1fc"},
      {"vgg19", "https://storage.googleapis.com/tensorflow/keras-applications/vgg19/",
       "vgg19_weights_tf_dim_ordering_tf_kernels.h5", "cbe5617147190e668d6c5d5026f83318",
       "vgg19_weights_tf_dim_ordering_tf_kernels_notop.h5", "253f8cb515780f3b799900260a226db6"},
      {"resnet50", "https://storage.googleapis.com/tensorflow/keras-applications/resnet/",
       "resnet50_weights_tf_dim_ordering_tf_kernels.h5", "2cb95161c43110f7111970584f804107",
       "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5", "4d473c1dd8becc155b73f8504c6f6626"},
      {"resnet101", "https://storage.googleapis.com/tensorflow/keras-applications/resnet/",
       "resnet101_weights_tf_dim_ordering_tf_kernels.h5", "f1aeb4b969a6efcfb50fad2f0c20cfc5",
       "resnet101_weights_tf_dim_ordering_tf_kernels_notop.h5", "88cf7a10940856eca736dc7b7e228a21"},
      {"resnet152", "https://storage.googleapis.com/tensorflow/keras-applications/resnet/",
       "resnet152_weights_tf_dim_ordering_tf_kernels.h5", "100835be76be38e30d865e96f2aaae62",
       "resnet152_weights_tf_dim_ordering_tf_kernels_notop.h5", "ee4c566cf9a93f14d82f913c2dc6dd0c"},
      {"resnet50_v2", "https://storage.googleapis.com/tensorflow/keras-applications/resnet/",
       "resnet50v2_weights_tf_dim_ordering_tf_kernels.h5", "3ef43a0b657b3be2300d5770ece849e0",
       "resnet50v2_weights_tf_dim_ordering_tf_kernels_notop.h5", "fac2f116257151a9d068a22e544a4917"},
      {"resnet101_v2", "https://storage.googleapis.com/tensorflow/keras-applications/resnet/",
       "resnet101v2_weights_tf_dim_ordering_tf_kernels.h5", "6343647c601c52e1368623803854d971",
       "resnet101v2_weights_tf_dim_ordering_tf_kernels_notop.h5", "c0ed64b8031c3730f411d2eb4eea35b5"},
      {"resnet152_v2", "https://storage.googleapis.com/tensorflow/keras-applications/resnet/",
       "resnet152v2_weights_tf_dim_ordering_tf_kernels.h5", "a49b44d1979771252814e80f8ec446f9",
       "resnet152v2_weights_tf_dim_ordering_tf_kernels_notop.h5", "ed17cf2e0169df9d443503ef94b23b33"},
      {"inception_v3", "https://storage.googleapis.com/tensorflow/keras-applications/inception_v3/",
       "inception_v3_weights_tf_dim_ordering_tf_kernels.h5", "9a0d58056eeedaa3f26cb7ebd46da564",
       "inception_v3_weights_tf_dim_ordering_tf_kernels_notop.h5", "bcbd6486424b2319ff4ef7d526e38f63"},
      {"inception_resnet_v2", "https://storage.googleapis.com/tensorflow/keras-applications/inception_resnet_v2/",
       "inception_resnet_v2_weights_tf_dim_ordering_tf_kernels.h5", "e693bd0210a403b3192acc6073ad2e96",
       "inception_resnet_v2_weights_tf_dim_ordering_tf_kernels_notop.h5", "d19885ff4a710c122648d3b5c3b684e4"},
      {"xception", "https://storage.googleapis.com/tensorflow/keras-applications/xception/",
       "xception_weights_tf_dim_ordering_tf_kernels.h5", "0a58e3b7378bc2990ea3b43d5981f1f6",
       "xception_weights_tf_dim_ordering_tf_kernels_notop.h5", "b0042744bf5b25fce3cb969f33bebb97"},
      {"densenet121", "https://storage.googleapis.com/tensorflow/keras-applications/densenet/",
       "densenet121_weights_tf_dim_ordering_tf_kernels.h5", "9d60b8095a5708f2dcce2bca79d332c7",
       "densenet121_weights_tf_dim_ordering_tf_kernels_notop.h5", "30ee3e1110167f948a6b9946edeeb738"},
      {"densenet169", "https://storage.googleapis.com/tensorflow/keras-applications/densenet/",
       "densenet169_weights_tf_dim_ordering_tf_kernels.h5", "d699b8f76981ab1b30698df4c175e90b",
       "densenet169_weights_tf_dim_ordering_tf_kernels_notop.h5", "b8c4d4c20dd625c148057b9ff1c1176b"},
      {"densenet201", "https://storage.googleapis.com/tensorflow/keras-applications/densenet/",
       "densenet201_weights_tf_dim_ordering_tf_kernels.h5", "1ceb130c1ea1b78c3bf6114dbdfd8807",
       "densenet201_weights_tf_dim_ordering_tf_kernels_notop.h5", "c13680b51ded0fb44dff2d8f86ac8bb1"},
      {"efficientnet_b0", "https://storage.googleapis.com/keras-applications/",
       "efficientnetb0.h5", "902e53a9f72be733fc0bcb005b3ebbac",
       "efficientnetb0_notop.h5", "50bc09e76180e00e4465e1a485ddc09d"},
      {"efficientnet_b1", "https://storage.googleapis.com/keras-applications/",
       "efficientnetb1.h5", "1d254153d4ab51201f1646940f018540",
       "efficientnetb1_notop.h5", "74c4e6b3e1f6a1eea24c589628592432"},
      {"efficientnet_b2", "https://storage.googleapis.com/keras-applications/",
       "efficientnetb2.h5", "b15cce36ff4dcbd00b6dd88e7857a6ad",
       "efficientnetb2_notop.h5", "111f8e2ac8aa800a7a99e3239f7bfb39"},
      {"efficientnet_b3", "https://storage.googleapis.com/keras-applications/",
       "efficientnetb3.h5", "ffd1fdc53d0ce67064dc6a9c7960ede0",
       "efficientnetb3_notop.h5", "af6d107764bb5b1abb91932881670226"},
      {"efficientnet_b4", "https://storage.googleapis.com/keras-applications/",
       "efficientnetb4.h5", "18c95ad55216b8f92d7e70b3a046e2fc",
       "efficientnetb4_notop.h5", "ebc24e6d6c33eaebbd558eafbeedf1ba"},
      {"efficientnet_b5", "https://storage.googleapis.com/keras-applications/",
       "efficientnetb5.h5", "ace28f2a6363774853a83a0b21b9421a",
       "efficientnetb5_notop.h5", "38879255a25d3c92d5e44e04ae6cec6f"},
      {"efficientnet_b6", "https://storage.googleapis.com/keras-applications/",
       "efficientnetb6.h5", "165f6e37dce68623721b423839de8be5",
       "efficientnetb6_notop.h5", "9ecce42647a20130c1f39a5d4cb75743"},
      {"efficientnet_b7", "https://storage.googleapis.com/keras-applications/",
       "efficientnetb7.h5", "8c03f828fec3ef71311cd463b6759d99",
       "efficientnetb7_notop.h5", "cbcfe4450ddf6f3ad90b1b398090fe4a"},
      {"nasnet_mobile", "https://storage.googleapis.com/tensorflow/keras-applications/nasnet/",
       "nasnet_mobile.h5", "020fb642bf7360b370c678b08e0adf61",
       "nasnet_mobile_no_top.h5", "1ed92395b5b598bdda52abe5c0dbfd63",
       "NASNet-mobile.h5", "NASNet-mobile-no-top.h5"},
      {"nasnet_large", "https://storage.googleapis.com/tensorflow/keras-applications/nasnet/",
       "nasnet_large.h5", "11577c9a518f0070763c2b964a382f17",
       "nasnet_large_no_top.h5", "d81d89dc07e6e56530c4e77faddd61b5",
       "NASNet-large.h5", "NASNet-large-no-top.h5"},
      {"convnext_tiny", kConvNeXtBase, "convnext_tiny.h5",
       "8ae6e78ce2933352b1ef4008e6dd2f17bc40771563877d156bc6426c7cf503ff", "convnext_tiny_notop.h5",
       "d547c096cabd03329d7be5562c5e14798aa39ed24b474157cef5e85ab9e49ef1"},
      {"convnext_small", kConvNeXtBase, "convnext_small.h5",
       "ce1277d8f1ee5a0ef0e171469089c18f5233860ceaf9b168049cb9263fd7483c", "convnext_small_notop.h5",
       "6fc8009faa2f00c1c1dfce59feea9b0745eb260a7dd11bee65c8e20843da6eab"},
      {"convnext_base", kConvNeXtBase, "convnext_base.h5",
       "52cbb006d3dadd03f6e095a8ca1aca47aecdd75acb4bc74bce1f5c695d0086e6", "convnext_base_notop.h5",
       "40a20c5548a5e9202f69735ecc06c990e6b7c9d2de39f0361e27baeb24cb7c45"},
      {"convnext_large", kConvNeXtBase, "convnext_large.h5",
       "070c5ed9ed289581e477741d3b34beffa920db8cf590899d6d2c67fba2a198a6", "convnext_large_notop.h5",
       "96f02b6f0753d4f543261bc9d09bed650f24dd6bc02ddde3066135b63d23a1cd"},
      {"convnext_xlarge", kConvNeXtBase, "convnext_xlarge.h5",
       "c1f5ccab661354fc3a79a10fa99af82f0fbf10ec65cb894a3ae0815f17a889ee", "convnext_xlarge_notop.h5",
       "de3f8a54174130e0cecdc71583354753d557fcf1f4487331558e2a16ba0cfe05"},
      {"efficientnet_v2_b0", kEfficientNetV2Base, "efficientnetv2-b0.h5", "21ecbf6da12460d5c40bb2f29ceb2188",
       "efficientnetv2-b0_notop.h5", "893217f2bb855e2983157299931e43ff"},
      {"efficientnet_v2_b1", kEfficientNetV2Base, "efficientnetv2-b1.h5", "069f0534ff22adf035c89e2d9547a9dc",
       "efficientnetv2-b1_notop.h5", "0e80663031ca32d657f9caa404b6ec37"},
      {"efficientnet_v2_b2", kEfficientNetV2Base, "efficientnetv2-b2.h5", "424e49f28180edbde1e94797771950a7",
       "efficientnetv2-b2_notop.h5", "1dfe2e7a5d45b6632553a8961ea609eb"},
      {"efficientnet_v2_b3", kEfficientNetV2Base, "efficientnetv2-b3.h5", "1f1fc43bd98a6e4fd8fdfd551e02c7a0",
       "efficientnetv2-b3_notop.h5", "f6abf7b5849ac99a89b50dd3fd532856"},
      {"efficientnet_v2_s", kEfficientNetV2Base, "efficientnetv2-s.h5", "e1d88a8495beba45748fedd0cecbe016",
       "efficientnetv2-s_notop.h5", "af0682fb74e8c54910f2d4393339c070"},
      {"efficientnet_v2_m", kEfficientNetV2Base, "efficientnetv2-m.h5", "a3bf6aa3276309f4fc6a34aa114c95cd",
       "efficientnetv2-m_notop.h5", "1b8dc055df72dde80d614482840fe342"},
      {"efficientnet_v2_l", kEfficientNetV2Base, "efficientnetv2-l.h5", "27e6d408b53c7ebc868fefa357689935",
       "efficientnetv2-l_notop.h5", "b0b66b5c863aef5b46e8608fe1711615"},
};
// clang-format on

// Keras's MobileNet and MobileNetV2 files: one per width and input size, and no hash.
constexpr const char* kMobileNetBase = "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet/";
constexpr const char* kMobileNetV2Base = "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v2/";

std::string Alpha(double alpha) {  // Python's str(float(alpha)) for Keras's widths: "0.35", "1.0"
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", alpha);
  std::string s = buf;
  if (s.find('.') == std::string::npos) s += ".0";
  return s;
}

// Keras's rows for MobileNet(V2) weights: the input's side when square and one it publishes,
// else 224 with Keras's warning.
Result<int> MobileRows(const std::string& function, const Options& o, std::initializer_list<int> published) {
  const int rows = o.input_shape.rank() == 3 ? static_cast<int>(o.input_shape[0]) : 224;
  const int cols = o.input_shape.rank() == 3 ? static_cast<int>(o.input_shape[1]) : 224;
  for (int r : published)
    if (rows == r && cols == r) return r;
  std::string sizes;
  for (int r : published) sizes += (sizes.empty() ? "" : ", ") + std::to_string(r);
  if (o.include_top)
    return InvalidArgument(function + ": weights=\"imagenet\" with include_top needs a square input of " + sizes +
                           " px, got " + o.input_shape.ToString());
  STRATA_LOG(kWarn) << function << ": the input is not a square of " << sizes
                    << " px; the ImageNet weights for 224 px are loaded (as Keras does)";
  return 224;
}

bool Near(double a, double b) { return std::abs(a - b) < 1e-9; }

// Keras 3's MobileNetV3 files: one per model, alpha 0.75 or 1.0 (minimalistic: 1.0), each with
// its MD5; the no-top files are the "_v2" ones.
constexpr const char* kMobileNetV3Base = "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v3/";
struct MobileNetV3File {
  const char* model;  // Keras's model_name: "{type}{_minimalistic}_224_{alpha}_float"
  const char* top_md5;
  const char* notop_md5;
};
constexpr MobileNetV3File kMobileNetV3Files[] = {
    {"large_224_0.75_float", "765b44a33ad4005b3ac83185abf1d0eb", "40af19a13ebea4e2ee0c676887f69a2e"},
    {"large_224_1.0_float", "59e551e166be033d707958cf9e29a6a7", "07fb09a5933dd0c8eaafa16978110389"},
    {"large_minimalistic_224_1.0_float", "675e7b876c45c57e9e63e6d90a36599c", "ec5221f64a2f6d1ef965a614bdae7973"},
    {"small_224_0.75_float", "cb65d4e5be93758266aa0a7f2c6708b7", "ebdb5cc8e0b497cd13a7c275d475c819"},
    {"small_224_1.0_float", "8768d4c2e7dee89b9d02b2d03d65d862", "d3e8ec802a04aa4fc771ee12a9a9b836"},
    {"small_minimalistic_224_1.0_float", "99cd97fb2fcdad2bf028eb838de69e37", "cde8136e733e811080d9fcd8a252f7e4"},
};

// Keras's rules: the width and minimalism pick the file; any input size takes the 224 px
// weights (the top pools globally), with Keras's warning when it is not 224 x 224.
Result<WeightsSource> MobileNetV3Weights(const std::string& name, const Options& o, const std::string& label) {
  const bool small = name == "mobilenet_v3_small";
  if (o.minimalistic ? !Near(o.alpha, 1.0) : !(Near(o.alpha, 1.0) || Near(o.alpha, 0.75)))
    return InvalidArgument(label + " exists for alpha 0.75 or 1.0 (minimalistic: 1.0 only), got " + Alpha(o.alpha));
  const bool square_224 = o.input_shape.rank() != 3 || (o.input_shape[0] == 224 && o.input_shape[1] == 224);
  if (!square_224) {
    STRATA_LOG(kWarn) << (small ? "MobileNetV3Small" : "MobileNetV3Large") << ": the input is not 224 x 224 px; "
                      << "the ImageNet weights for 224 px are loaded (as Keras does)";
  }
  const std::string model = std::string(small ? "small" : "large") + (o.minimalistic ? "_minimalistic" : "") +
                            "_224_" + Alpha(o.alpha) + "_float";
  for (const MobileNetV3File& f : kMobileNetV3Files)
    if (model == f.model) {
      const std::string file = "weights_mobilenet_v3_" + model + (o.include_top ? ".h5" : "_no_top_v2.h5");
      return WeightsSource{kMobileNetV3Base + file, file, o.include_top ? f.top_md5 : f.notop_md5};
    }
  return InvalidArgument(label + ": Keras publishes no file for " + model);
}

}  // namespace

Result<WeightsSource> ImagenetWeights(const std::string& name, const Options& options) {
  if (!IsApplication(name))
    return InvalidArgument("unknown model \"" + name + "\" (the applications are " + NameList() + ")");
  // The rules below read the input's size: an input_tensor's, where the options give one.
  Options o = options;
  if (o.input_tensor.node() && o.input_shape.rank() == 0) {
    auto shape = ShapeOf(o.input_tensor);
    if (!shape.ok()) return InvalidArgument(name + ": input_tensor: " + shape.status().message());
    o.input_shape = *shape;
  }
  const std::string label = name + ": weights=\"imagenet\"";
  if (o.include_top && o.classes != 1000)
    return InvalidArgument(label + " with include_top needs classes=1000 (the ImageNet classifier), got " +
                           std::to_string(o.classes) + "; use include_top=false for a new head");
  if (name == "mobilenet") {
    if (o.depth_multiplier != 1)
      return InvalidArgument(label + " needs depth_multiplier 1, got " + std::to_string(o.depth_multiplier));
    const char* alpha_text = Near(o.alpha, 1.0) ? "1_0" : Near(o.alpha, 0.75) ? "7_5" : Near(o.alpha, 0.5) ? "5_0"
                           : Near(o.alpha, 0.25) ? "2_5" : nullptr;
    if (!alpha_text)
      return InvalidArgument(label + " exists for alpha 0.25, 0.5, 0.75 or 1.0, got " + Alpha(o.alpha));
    STRATA_ASSIGN_OR_RETURN(int rows, MobileRows("MobileNet", o, {128, 160, 192, 224}));
    const std::string file = std::string("mobilenet_") + alpha_text + "_" + std::to_string(rows) +
                             (o.include_top ? "_tf.h5" : "_tf_no_top.h5");
    return WeightsSource{kMobileNetBase + file, file, ""};
  }
  if (name == "mobilenet_v2") {
    bool published = false;
    for (double a : {0.35, 0.5, 0.75, 1.0, 1.3, 1.4}) published = published || Near(o.alpha, a);
    if (!published)
      return InvalidArgument(label + " exists for alpha 0.35, 0.5, 0.75, 1.0, 1.3 or 1.4, got " + Alpha(o.alpha));
    STRATA_ASSIGN_OR_RETURN(int rows, MobileRows("MobileNetV2", o, {96, 128, 160, 192, 224}));
    const std::string file = "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_" + Alpha(o.alpha) + "_" +
                             std::to_string(rows) + (o.include_top ? ".h5" : "_no_top.h5");
    return WeightsSource{kMobileNetV2Base + file, file, ""};
  }
  if (name == "mobilenet_v3_small" || name == "mobilenet_v3_large") return MobileNetV3Weights(name, o, label);
  // Keras's obtain_input_shape: the classifier's weights fix the input to the default size.
  const int size = DefaultSize(name);
  if (o.include_top && o.input_shape.rank() != 0 && o.input_shape != Shape{size, size, 3})
    return InvalidArgument(label + " with include_top needs input_shape [" + std::to_string(size) + ", " +
                           std::to_string(size) + ", 3], got " + o.input_shape.ToString());
  if (o.input_shape.rank() == 3 && o.input_shape[2] != 3)
    return InvalidArgument(label + " needs 3 input channels, got " + o.input_shape.ToString());
  for (const Published& p : kPublished)
    if (name == p.name) {
      const char* file = o.include_top ? p.top_file : p.notop_file;
      const char* url_file = o.include_top ? p.top_url_file : p.notop_url_file;
      return WeightsSource{std::string(p.base) + (url_file ? url_file : file), file,
                           o.include_top ? p.top_md5 : p.notop_md5};
    }
  return Unimplemented(label + ": Keras publishes no ImageNet weights for " + name);
}

}  // namespace strata::keras::applications
