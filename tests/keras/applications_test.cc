// The Keras applications: Keras's published parameter counts, its options (include_top,
// pooling, classes, input_shape, classifier_activation) and clear errors for bad ones. Only
// graphs are built here (shape inference and counting): seconds. The layer-by-layer structure
// is checked against Keras's own source by tests/keras/applications_structure_test.py.
#include "strata/keras/applications/applications.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>

namespace strata::keras::applications {
namespace {

std::unique_ptr<Model> Build(const std::string& name, Options o = {}) {
  auto m = ByName(name, std::move(o));
  EXPECT_TRUE(m.ok()) << name << ": " << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Keras's model.summary() totals for weights=None, include_top, 1000 classes, default size
// (keras.io/api/applications and every Keras summary of these models).
struct Published {
  const char* name;
  const char* keras_name;
  int64_t total, non_trainable;
  int64_t features;  // channels of the last feature map
  bool dense_top = false;  // VGG: Flatten, fc1, fc2 (4096 each), predictions; else pool + Dense
  int64_t side_at_96 = 3;  // the feature map's side at 96 px (stride 32; InceptionV3's 'valid' stem: 1)
  std::string classifier = "predictions";  // the Dense(classes)'s name
  char classifier_class = 'D';             // its class's initial: Dense, Activation (MobileNet's), Conv2D
  int64_t top_hidden = 0;  // MobileNetV3: the 1x1 convolution between the pool and the classifier
  int64_t patch = 0;       // ViT: the patch side; its features are tokens and its position embedding grows with the input
};
const Published kPublished[] = {
    {"vgg16", "vgg16", 138'357'544, 0, 512, true},
    {"vgg19", "vgg19", 143'667'240, 0, 512, true},
    {"resnet50", "resnet50", 25'636'712, 53'120, 2048},
    {"resnet101", "resnet101", 44'707'176, 105'344, 2048},
    {"resnet152", "resnet152", 60'419'944, 151'424, 2048},
    {"resnet50_v2", "resnet50v2", 25'613'800, 45'440, 2048},
    {"resnet101_v2", "resnet101v2", 44'675'560, 97'664, 2048},
    {"resnet152_v2", "resnet152v2", 60'380'648, 143'744, 2048},
    {"mobilenet", "mobilenet_1.00_224", 4'253'864, 21'888, 1024, false, 3, "predictions", 'A'},
    {"mobilenet_v2", "mobilenetv2_1.00_224", 3'538'984, 34'112, 1280},
    // torchvision's counts plus the batch norms' moving statistics (Keras counts them; torch keeps
    // them as buffers): the classifier is a 1x1 convolution "logits" after "conv_2".
    {"mobilenet_v3_small", "MobileNetV3Small", 2'554'968, 12'112, 576, false, 3, "logits", 'C', 1024},
    {"mobilenet_v3_large", "MobileNetV3Large", 5'507'432, 24'400, 960, false, 3, "logits", 'C', 1280},
    {"efficientnet_b0", "efficientnetb0", 5'330'571, 42'023, 1280},
    {"efficientnet_b1", "efficientnetb1", 7'856'239, 62'055, 1280},
    {"efficientnet_b2", "efficientnetb2", 9'177'569, 67'575, 1408},
    {"efficientnet_b3", "efficientnetb3", 12'320'535, 87'303, 1536},
    {"efficientnet_b4", "efficientnetb4", 19'466'823, 125'207, 1792},
    {"efficientnet_b5", "efficientnetb5", 30'562'527, 172'743, 2048},
    {"efficientnet_b6", "efficientnetb6", 43'265'143, 224'439, 2304},
    {"efficientnet_b7", "efficientnetb7", 66'658'687, 310'727, 2560},
    // torchvision's EfficientNet class on Keras's block tables (B0-B3) and its efficientnet_v2_s/m/l,
    // with the batch norms' moving statistics, which Keras counts.
    {"efficientnet_v2_b0", "efficientnetv2-b0", 7'200'312, 60'608, 1280},
    {"efficientnet_v2_b1", "efficientnetv2-b1", 8'212'124, 71'072, 1280},
    {"efficientnet_v2_b2", "efficientnetv2-b2", 10'178'374, 82'288, 1408},
    {"efficientnet_v2_b3", "efficientnetv2-b3", 14'467'622, 109'216, 1536},
    {"efficientnet_v2_s", "efficientnetv2-s", 21'612'360, 153'872, 1280},
    {"efficientnet_v2_m", "efficientnetv2-m", 54'431'388, 292'032, 1280},
    {"efficientnet_v2_l", "efficientnetv2-l", 119'027'848, 512'576, 1280},
    {"inception_v3", "inception_v3", 23'851'784, 34'432, 2048, false, 1},
    {"inception_resnet_v2", "inception_resnet_v2", 55'873'736, 60'544, 1536, false, 1},
    {"xception", "xception", 22'910'480, 54'528, 2048},
    {"nasnet_mobile", "NASNet", 5'326'716, 36'738, 1056},
    {"nasnet_large", "NASNet", 88'949'818, 196'668, 4032},
    {"densenet121", "densenet121", 8'062'504, 83'648, 1024},
    {"densenet169", "densenet169", 14'307'880, 158'400, 1664},
    {"densenet201", "densenet201", 20'242'984, 229'056, 1920},
    // torchvision's counts (XLarge: its ConvNeXt class at Keras's widths), which Keras's equal: the
    // prestem Normalization, given its mean and variance, has no weights.
    {"convnext_tiny", "convnext_tiny", 28'589'128, 0, 768, false, 3, "convnext_tiny_head_dense"},
    {"convnext_small", "convnext_small", 50'223'688, 0, 768, false, 3, "convnext_small_head_dense"},
    {"convnext_base", "convnext_base", 88'591'464, 0, 1024, false, 3, "convnext_base_head_dense"},
    {"convnext_large", "convnext_large", 197'767'336, 0, 1536, false, 3, "convnext_large_head_dense"},
    {"convnext_xlarge", "convnext_xlarge", 350'196'968, 0, 2048, false, 3, "convnext_xlarge_head_dense"},
    // torchvision's vit_b_16 and its VisionTransformer class at ViT-S/16's sizes (KerasHub's and
    // timm's): the same weights, one position-embedding row per token (197 at 224 px).
    {"vit_b16", "vit_b16", 86'567'656, 0, 768, false, 3, "predictions", 'D', 0, 16},
    {"vit_s16", "vit_s16", 22'050'664, 0, 384, false, 3, "predictions", 'D', 0, 16},
};

// The position embedding's weights at `side` px beyond those at the default size (ViT; else 0).
int64_t PositionDelta(const Published& p, int64_t side, int64_t default_side) {
  if (p.patch == 0) return 0;
  return ((side / p.patch) * (side / p.patch) - (default_side / p.patch) * (default_side / p.patch)) * p.features;
}

// The classifier's parameters on a feature map of side `side` (stride 32 from the input).
int64_t TopParams(const Published& p, int64_t side, int64_t classes) {
  if (p.top_hidden > 0) return (p.features + 1) * p.top_hidden + (p.top_hidden + 1) * classes;
  if (!p.dense_top) return (p.features + 1) * classes;
  const int64_t flat = side * side * p.features;
  return (flat + 1) * 4096 + (4096 + 1) * 4096 + (4096 + 1) * classes;
}

std::string WithCommas(int64_t v) {
  std::string d = std::to_string(v), s;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) s += ',';
    s += d[i];
  }
  return s;
}

TEST(Applications, NamesAndSizes) {
  std::vector<std::string> names;
  for (const Published& p : kPublished) names.push_back(p.name);
  EXPECT_EQ(Names(), names);
  const std::map<std::string, int> efficientnet_sizes = {
      {"efficientnet_b0", 224},    {"efficientnet_b1", 240},    {"efficientnet_b2", 260},
      {"efficientnet_b3", 300},    {"efficientnet_b4", 380},    {"efficientnet_b5", 456},
      {"efficientnet_b6", 528},    {"efficientnet_b7", 600},    {"efficientnet_v2_b0", 224},
      {"efficientnet_v2_b1", 240}, {"efficientnet_v2_b2", 260}, {"efficientnet_v2_b3", 300},
      {"efficientnet_v2_s", 384},  {"efficientnet_v2_m", 480},  {"efficientnet_v2_l", 480}};
  for (const auto& n : Names()) {
    EXPECT_TRUE(IsApplication(n));
    const bool inception = n == "xception" || n == "inception_v3" || n == "inception_resnet_v2";
    const int size = inception ? 299 : n == "nasnet_large" ? 331 : efficientnet_sizes.count(n) ? efficientnet_sizes.at(n) : 224;
    EXPECT_EQ(DefaultSize(n), size) << n;
    EXPECT_EQ(MinimumSize(n), n == "xception" ? 71 : inception ? 75 : 32) << n;
  }
  EXPECT_FALSE(IsApplication("resnet18"));
  EXPECT_EQ(DefaultSize("resnet18"), 0);
  auto bad = ByName("resnet18");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("resnet18"), std::string::npos) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("mobilenet_v2"), std::string::npos) << bad.status().ToString();
}

TEST(Applications, PublishedParameterCounts) {
  for (const Published& p : kPublished) {
    SCOPED_TRACE(p.name);
    auto m = Build(p.name);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->count_params(), p.total);
    EXPECT_EQ(m->name(), p.keras_name);
    const int size = DefaultSize(p.name);
    EXPECT_EQ(m->input_shape().value(), (Shape{size, size, 3}));
    EXPECT_EQ(m->output_shape().value(), (Shape{1000}));
    EXPECT_TRUE(m->ends_in_softmax());
    const std::string s = m->Summary();
    EXPECT_NE(s.find("Total params: " + WithCommas(p.total)), std::string::npos) << s.substr(s.size() - 300);
    EXPECT_NE(s.find("Non-trainable params: " + WithCommas(p.non_trainable)), std::string::npos)
        << s.substr(s.size() - 300);
    // MobileNet's classifier is a 1x1 convolution (conv_preds) and `predictions` its activation;
    // MobileNetV3's is the 1x1 convolution "logits".
    // The classifier's row names its class (wrapped onto the next line where the name is long, as Keras's).
    EXPECT_NE(s.find(" " + p.classifier + " (" + p.classifier_class), std::string::npos) << p.classifier;
    if (p.dense_top) {
      EXPECT_EQ(TopParams(p, size / 32, 1000), 123'642'856);
    }
  }
}

TEST(Applications, FeaturesPoolingAndClasses) {
  for (const Published& p : kPublished) {
    SCOPED_TRACE(p.name);
    // Without the top: the last feature map, here at 96 px (stride 32: 3x3; ViT: 36 patches and
    // the class token).
    auto features = Build(p.name, {.include_top = false, .input_shape = {96, 96, 3}});
    ASSERT_TRUE(features);
    const Shape want = p.patch ? Shape{37, p.features} : Shape{p.side_at_96, p.side_at_96, p.features};
    EXPECT_EQ(features->output_shape().value(), want);
    const int size = DefaultSize(p.name);
    const int64_t classifier = TopParams(p, size / 32, 1000);
    EXPECT_EQ(features->count_params(), p.total - classifier + PositionDelta(p, 96, size));
    EXPECT_FALSE(features->ends_in_softmax());
    for (const char* pooling : {"avg", "max"}) {
      auto pooled = Build(p.name, {.include_top = false, .input_shape = {96, 96, 3}, .pooling = pooling});
      ASSERT_TRUE(pooled);
      EXPECT_EQ(pooled->output_shape().value(), (Shape{p.features})) << pooling;
      EXPECT_EQ(pooled->count_params(), p.total - classifier + PositionDelta(p, 96, size)) << pooling;
    }
    // The flowers data: 104 classes at 192 px, logits; the input size does not change the weights
    // (but for VGG's flattened top).
    auto flowers = Build(p.name, {.input_shape = {192, 192, 3}, .classes = 104, .classifier_activation = "linear",
                                  .name = "flowers"});
    ASSERT_TRUE(flowers);
    EXPECT_EQ(flowers->name(), "flowers");
    EXPECT_EQ(flowers->output_shape().value(), (Shape{104}));
    EXPECT_EQ(flowers->count_params(), p.total - classifier + TopParams(p, 192 / 32, 104) + PositionDelta(p, 192, size));
    EXPECT_FALSE(flowers->ends_in_softmax());
  }
}

TEST(Applications, SmallestAndOddInputsBuild) {
  for (const Published& p : kPublished) {
    const int min = MinimumSize(p.name);
    if (p.patch) {  // ViT: whole patches only, as KerasHub's; a non-square grid builds
      auto m = Build(p.name, {.include_top = false, .input_shape = {32, 48, 1}, .pooling = "avg"});
      ASSERT_TRUE(m);
      EXPECT_EQ(m->output_shape().value(), (Shape{p.features}));
      auto odd = ByName(p.name, {.include_top = false, .input_shape = {33, 48, 3}});
      ASSERT_FALSE(odd.ok());
      EXPECT_NE(odd.status().message().find("multiples of the patch size 16"), std::string::npos) << odd.status().ToString();
      continue;
    }
    // The minimum, odd sizes (correct_pad's other case) and a non-square input.
    for (Shape s : {Shape{min, min, 3}, Shape{min + 1, min + 3, 3}, Shape{min + 29, min + 64, 1}}) {
      auto m = Build(p.name, {.include_top = false, .input_shape = s, .pooling = "avg"});
      ASSERT_TRUE(m) << s.ToString();
      EXPECT_EQ(m->output_shape().value(), (Shape{p.features})) << p.name << " " << s.ToString();
    }
  }
}

// EfficientNetB0 is not in Debian's keras_applications (the structure oracle's source), so its
// tf.keras names, classes and the drop-connect placement are checked here.
TEST(Applications, EfficientNetB0HasKerasLayers) {
  auto m = Build("efficientnet_b0");
  ASSERT_TRUE(m);
  std::map<std::string, std::string> cls;
  int dropouts = 0;
  for (const auto& l : m->layers()) {
    cls[l->name()] = l->class_name();
    dropouts += l->class_name() == "Dropout";
  }
  const std::map<std::string, std::string> expected = {
      {"rescaling", "Rescaling"}, {"normalization", "Normalization"}, {"stem_conv_pad", "ZeroPadding2D"},
      {"stem_conv", "Conv2D"}, {"stem_activation", "Activation"}, {"block1a_dwconv", "DepthwiseConv2D"},
      {"block1a_se_squeeze", "GlobalAveragePooling2D"}, {"block1a_se_reshape", "Reshape"},
      {"block1a_se_reduce", "Conv2D"}, {"block1a_se_expand", "Conv2D"}, {"block1a_se_excite", "Multiply"},
      {"block1a_project_bn", "BatchNormalization"}, {"block2a_expand_conv", "Conv2D"},
      {"block2a_dwconv_pad", "ZeroPadding2D"}, {"block2b_drop", "Dropout"}, {"block2b_add", "Add"},
      {"block6d_add", "Add"}, {"block7a_project_bn", "BatchNormalization"}, {"top_conv", "Conv2D"},
      {"top_activation", "Activation"}, {"avg_pool", "GlobalAveragePooling2D"}, {"top_dropout", "Dropout"},
      {"predictions", "Dense"}};
  for (const auto& [name, c] : expected) EXPECT_EQ(cls[name], c) << name;
  // No expansion in block 1, no residual where the stride or the width changes.
  for (const char* absent : {"block1a_expand_conv", "block1a_add", "block2a_add", "block2a_drop", "block7a_add"})
    EXPECT_EQ(cls.count(absent), 0u) << absent;
  EXPECT_EQ(dropouts, 10);  // drop-connect on the 9 residual blocks, and top_dropout
  // correct_pad before the stride-2 depthwise convolution: 112 -> 113, as Keras's summary shows.
  const std::string s = m->Summary(200);
  const size_t row = s.find(" block2a_dwconv_pad (ZeroPadding2D) ");
  ASSERT_NE(row, std::string::npos) << s.substr(0, 3000);
  EXPECT_NE(s.substr(row, s.find('\n', row) - row).find("(None, 113, 113, 96)"), std::string::npos)
      << s.substr(row, 200);
}

// EfficientNetV2 (Keras 3's efficientnet_v2.py, not in Debian's keras_applications): its layer
// names and classes, fused blocks (no depthwise, no squeeze-and-excitation; without expansion one
// 3x3 convolution with its activation), the preprocessing per variant, and drop-connect from the
// second block on (Keras's rate 0.2 * b / blocks is 0 for the first, which gets no Dropout).
TEST(Applications, EfficientNetV2HasKerasLayers) {
  auto b0 = Build("efficientnet_v2_b0");
  auto s = Build("efficientnet_v2_s", {.include_preprocessing = false});
  ASSERT_TRUE(b0 && s);
  std::map<std::string, std::string> cls;
  for (const auto& l : b0->layers()) cls[l->name()] = l->class_name();
  const std::map<std::string, std::string> expected = {
      {"rescaling", "Rescaling"}, {"normalization", "Normalization"}, {"stem_conv", "Conv2D"},
      {"stem_activation", "Activation"}, {"block1a_project_conv", "Conv2D"},
      {"block1a_project_activation", "Activation"}, {"block2a_expand_conv", "Conv2D"},
      {"block2a_project_conv", "Conv2D"}, {"block2b_drop", "Dropout"}, {"block2b_add", "Add"},
      {"block4a_dwconv2", "DepthwiseConv2D"}, {"block4a_se_excite", "Multiply"}, {"block6h_add", "Add"},
      {"top_conv", "Conv2D"}, {"avg_pool", "GlobalAveragePooling2D"}, {"top_dropout", "Dropout"},
      {"predictions", "Dense"}};
  for (const auto& [name, c] : expected) EXPECT_EQ(cls[name], c) << name;
  for (const char* absent : {"block1a_drop", "block1a_add", "block2a_dwconv2", "block3b_se_excite", "block4a_add",
                             "block1a_expand_conv", "stem_conv_pad"})
    EXPECT_EQ(cls.count(absent), 0u) << absent;
  std::map<std::string, std::string> s_cls;
  for (const auto& l : s->layers()) s_cls[l->name()] = l->class_name();
  EXPECT_EQ(s_cls.count("rescaling") + s_cls.count("normalization"), 0u);
  EXPECT_EQ(s_cls["block1b_drop"], "Dropout");  // S's stage 1 has two blocks
  EXPECT_EQ(s_cls["block6o_add"], "Add");       // and its stage 6 fifteen
  auto v2s = Build("efficientnet_v2_s", {.include_top = false, .input_shape = {64, 64, 3}});
  ASSERT_TRUE(v2s);
  std::map<std::string, std::string> pre;
  for (const auto& l : v2s->layers()) pre[l->name()] = l->class_name();
  EXPECT_EQ(pre["rescaling"], "Rescaling");  // S/M/L: Rescaling(1/128, -1) alone
  EXPECT_EQ(pre.count("normalization"), 0u);
}

// MobileNetV2's width: Keras's model name says it; the layer widths are checked against Keras's
// source by the structure oracle. alpha and depth_multiplier elsewhere are errors, not ignored.
TEST(Applications, AlphaIsMobileNetsAlone) {
  for (double alpha : {0.35, 0.5, 0.75, 1.0, 1.3, 1.4}) {
    auto m = Build("mobilenet_v2", {.alpha = alpha});
    ASSERT_TRUE(m);
    char name[32];
    std::snprintf(name, sizeof name, "mobilenetv2_%0.2f_224", alpha);
    EXPECT_EQ(m->name(), name);
  }
  auto wide = Build("mobilenet_v2", {.include_top = false, .input_shape = {96, 96, 3}, .alpha = 1.4});
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->output_shape().value(), (Shape{3, 3, 1792}));  // the last convolution widens above 1.0
  for (const char* name : {"resnet50", "vgg16", "efficientnet_b3"}) {
    auto a = ByName(name, {.alpha = 0.5});
    ASSERT_FALSE(a.ok()) << name;
    EXPECT_NE(a.status().message().find("alpha"), std::string::npos) << a.status().ToString();
  }
  // MobileNet: Keras's names after alpha and the input rows; the depth multiplier widens the
  // depthwise outputs (so the pointwise kernels) only.
  auto v1 = Build("mobilenet", {.include_top = false, .input_shape = {128, 128, 3}, .alpha = 0.25});
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->name(), "mobilenet_0.25_128");
  EXPECT_EQ(v1->output_shape().value(), (Shape{4, 4, 256}));
  auto top = Build("mobilenet");
  ASSERT_TRUE(top);
  std::map<std::string, std::string> cls;
  for (const auto& l : top->layers()) cls[l->name()] = l->class_name();
  for (const auto& [name, c] : std::map<std::string, std::string>{{"conv_pad_2", "ZeroPadding2D"},
                                                                  {"conv_dw_13", "DepthwiseConv2D"},
                                                                  {"global_average_pooling2d", "GlobalAveragePooling2D"},
                                                                  {"dropout", "Dropout"}, {"conv_preds", "Conv2D"},
                                                                  {"reshape_2", "Reshape"}, {"predictions", "Activation"}})
    EXPECT_EQ(cls[name], c) << name;
  EXPECT_NE(top->Summary(200).find("(None, 1, 1, 1024)"), std::string::npos) << "keepdims=True before conv_preds";
  auto deep = Build("mobilenet", {.include_top = false, .depth_multiplier = 2});
  auto plain = Build("mobilenet", {.include_top = false});
  ASSERT_TRUE(deep && plain);
  EXPECT_GT(deep->count_params(), plain->count_params());
  EXPECT_FALSE(ByName("mobilenet", {.dropout = 1}).ok());
  auto d = ByName("mobilenet_v2", {.depth_multiplier = 2});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("depth_multiplier"), std::string::npos) << d.status().ToString();
  EXPECT_FALSE(ByName("mobilenet_v2", {.alpha = 0}).ok());
}

// Keras's modes on one pixel (Python's test_preprocess_input_is_kerass_to_the_bit compares
// whole arrays with Keras's own imagenet_utils): the family's mode from the table, the float32
// arithmetic in Keras's order, and errors for a wrong mode or channel count.
TEST(Applications, DecodePredictionsNamesTheTopClasses) {
  // Keras's class index: 1000 classes, WordNet ids in class order (its first and last entries).
  const auto& classes = ImagenetClasses();
  ASSERT_EQ(classes.size(), 1000u);
  EXPECT_EQ(classes[0].id, "n01440764");
  EXPECT_EQ(classes[0].name, "tench");
  EXPECT_EQ(classes[999].id, "n15075141");
  EXPECT_EQ(classes[999].name, "toilet_tissue");
  EXPECT_EQ(ImagenetClassIndexJson().size(), 35363u);  // Keras's file, byte for byte (Python checks its MD5)
  Tensor preds(DType::kF32, {2, 1000});
  for (int64_t i = 0; i < 2000; ++i) preds.data<float>()[i] = 0;
  float* row0 = preds.data<float>();
  row0[7] = 0.2f, row0[400] = 0.5f, row0[999] = 0.3f;
  float* row1 = preds.data<float>() + 1000;
  row1[3] = 1.0f;
  auto top = DecodePredictions(preds, 4);
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  ASSERT_EQ(top->size(), 2u);
  ASSERT_EQ((*top)[0].size(), 4u);
  EXPECT_EQ((*top)[0][0].name, "academic_gown");
  EXPECT_EQ((*top)[0][0].class_id, "n02669723");
  EXPECT_FLOAT_EQ((*top)[0][0].score, 0.5f);
  EXPECT_EQ((*top)[0][1].name, "toilet_tissue");
  EXPECT_EQ((*top)[0][2].name, "cock");
  EXPECT_EQ((*top)[0][3].name, "ear");  // ties at 0: the highest class number first (998), as Keras's
  EXPECT_EQ((*top)[1][0].name, "tiger_shark");
  EXPECT_EQ(DecodePredictions(preds, 5000)->at(0).size(), 1000u);  // top beyond the classes: all of them
  Tensor wrong(DType::kF32, {2, 10});
  auto bad = DecodePredictions(wrong);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[2, 10]"), std::string::npos) << bad.status().ToString();
  EXPECT_FALSE(DecodePredictions(preds, 0).ok());
}

TEST(Applications, PreprocessInputModes) {
  auto pixel = [](float r, float g, float b) {
    Tensor t(DType::kF32, {1, 1, 1, 3});
    t.data<float>()[0] = r, t.data<float>()[1] = g, t.data<float>()[2] = b;
    return t;
  };
  auto run = [&](const std::string& app) {
    Tensor t = pixel(10, 128, 255);
    auto mode = PreprocessMode(app);
    EXPECT_TRUE(mode.ok()) << app;
    EXPECT_TRUE(PreprocessInput(&t, *mode).ok()) << app;
    return std::vector<float>(t.data<float>(), t.data<float>() + 3);
  };
  EXPECT_EQ(run("vgg16"), (std::vector<float>{255 - 103.939f, 128 - 116.779f, 10 - 123.68f}));  // BGR
  EXPECT_EQ(run("resnet152"), run("vgg16"));
  EXPECT_EQ(run("resnet50_v2"), (std::vector<float>{10 / 127.5f - 1, 128 / 127.5f - 1, 255 / 127.5f - 1}));
  EXPECT_EQ(run("xception"), run("mobilenet"));
  EXPECT_EQ(run("densenet169"), (std::vector<float>{(10 / 255.0f - 0.485f) / 0.229f, (128 / 255.0f - 0.456f) / 0.224f,
                                                    (255 / 255.0f - 0.406f) / 0.225f}));
  EXPECT_EQ(run("efficientnet_b3"), (std::vector<float>{10, 128, 255}));
  EXPECT_FALSE(PreprocessMode("resnet18").ok());
  Tensor gray(DType::kF32, {2, 4, 4, 1});
  Status s = PreprocessInput(&gray, "caffe");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("3 channels"), std::string::npos) << s.ToString();
  EXPECT_TRUE(PreprocessInput(&gray, "tf").ok());  // elementwise: any channels, as Keras's
  EXPECT_FALSE(PreprocessInput(&gray, "inception").ok());
}

// Keras's input_tensor: each application built on a layer's output (a Rescaling on an Input)
// takes that Input as its own and has the same weights as on input_shape; the tensor's shape is
// the input's (MobileNetV2's ImageNet file follows it), and ShapeOf leaves the layers unnamed.
TEST(Applications, InputTensorBuildsOnTheGivenTensor) {
  for (const Published& p : kPublished) {
    SCOPED_TRACE(p.name);
    const int64_t width = p.patch ? 112 : 100;  // ViT: whole patches
    KTensor photo = Input({96, width, 3}, DType::kF32, "photo");
    LayerPtr rescaling = layers::Rescaling(1.0f / 255);
    KTensor x = Call(rescaling, photo);
    auto on_tensor = Build(p.name, {.include_top = false, .input_tensor = x, .pooling = "avg"});
    auto plain = Build(p.name, {.include_top = false, .input_shape = {96, width, 3}, .pooling = "avg"});
    ASSERT_TRUE(on_tensor && plain);
    EXPECT_EQ(on_tensor->input_shape(0).value(), (Shape{96, width, 3}));
    EXPECT_EQ(on_tensor->count_params(), plain->count_params());
    const auto layers = on_tensor->layers();
    ASSERT_EQ(layers.size(), plain->layers().size() + 1);
    EXPECT_EQ(layers[0].get(), rescaling.get());  // layers() leaves the Input out
    // Named by the model (EfficientNet's own Rescaling holds "rescaling": this one is "rescaling_1").
    EXPECT_EQ(rescaling->name().rfind("rescaling", 0), 0u) << rescaling->name();
  }
  LayerPtr unnamed = layers::Rescaling(2.0f);
  KTensor square = Call(unnamed, Input({128, 128, 3}));
  ASSERT_EQ(ShapeOf(square).value(), (Shape{128, 128, 3}));
  EXPECT_EQ(unnamed->name(), "");
  auto file = ImagenetWeights("mobilenet_v2", {.include_top = false, .input_tensor = square});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->fname, "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_128_no_top.h5");

  KTensor x = Call(layers::Rescaling(2.0f), Input({64, 64, 3}));
  auto differs = ByName("resnet50", {.input_shape = {32, 32, 3}, .input_tensor = x});
  ASSERT_FALSE(differs.ok());
  EXPECT_NE(differs.status().message().find("differs from the input_tensor's shape"), std::string::npos)
      << differs.status().ToString();
  auto flat = ByName("resnet50", {.input_tensor = Input({64})});
  ASSERT_FALSE(flat.ok());
  EXPECT_NE(flat.status().message().find("input_tensor must be images"), std::string::npos) << flat.status().ToString();
}

TEST(Applications, BadOptionsAreClearErrors) {
  for (const Published& p : kPublished) {
    SCOPED_TRACE(p.name);
    const int min = MinimumSize(p.name);
    auto small = ByName(p.name, {.include_top = false, .input_shape = {min - 1, 224, 3}});
    ASSERT_FALSE(small.ok());
    EXPECT_EQ(small.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(small.status().message().find("input_shape"), std::string::npos) << small.status().ToString();
    EXPECT_NE(small.status().message().find("at least " + std::to_string(min)), std::string::npos)
        << small.status().ToString();

    auto pooling = ByName(p.name, {.include_top = false, .pooling = "mean"});
    ASSERT_FALSE(pooling.ok());
    EXPECT_NE(pooling.status().message().find("pooling"), std::string::npos) << pooling.status().ToString();
    EXPECT_NE(pooling.status().message().find("\"mean\""), std::string::npos) << pooling.status().ToString();

    auto rank = ByName(p.name, {.input_shape = {224, 224}});
    ASSERT_FALSE(rank.ok());
    EXPECT_NE(rank.status().message().find("input_shape must be [height, width, channels]"), std::string::npos)
        << rank.status().ToString();

    auto classes = ByName(p.name, {.classes = 0});
    ASSERT_FALSE(classes.ok());
    EXPECT_NE(classes.status().message().find("classes"), std::string::npos) << classes.status().ToString();

    auto activation = ByName(p.name, {.classifier_activation = "softmaxx"});
    ASSERT_FALSE(activation.ok());
    EXPECT_NE(activation.status().message().find("classifier_activation"), std::string::npos)
        << activation.status().ToString();
  }
}

}  // namespace
}  // namespace strata::keras::applications
