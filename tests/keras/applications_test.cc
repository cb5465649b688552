// The Keras applications: Keras's published parameter counts, its options (include_top,
// pooling, classes, input_shape, classifier_activation) and clear errors for bad ones. Only
// graphs are built here (shape inference and counting): seconds. The layer-by-layer structure
// is checked against Keras's own source by tests/keras/applications_structure_test.py.
#include "strata/keras/applications/applications.h"

#include <gtest/gtest.h>

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
};
const Published kPublished[] = {
    {"resnet50", "resnet50", 25'636'712, 53'120, 2048},
    {"mobilenet_v2", "mobilenetv2_1.00_224", 3'538'984, 34'112, 1280},
    {"efficientnet_b0", "efficientnetb0", 5'330'571, 42'023, 1280},
    {"xception", "xception", 22'910'480, 54'528, 2048},
    {"densenet121", "densenet121", 8'062'504, 83'648, 1024},
};

std::string WithCommas(int64_t v) {
  std::string d = std::to_string(v), s;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) s += ',';
    s += d[i];
  }
  return s;
}

TEST(Applications, NamesAndSizes) {
  EXPECT_EQ(Names(), (std::vector<std::string>{"resnet50", "mobilenet_v2", "efficientnet_b0", "xception", "densenet121"}));
  for (const auto& n : Names()) {
    EXPECT_TRUE(IsApplication(n));
    EXPECT_EQ(DefaultSize(n), n == "xception" ? 299 : 224) << n;
    EXPECT_EQ(MinimumSize(n), n == "xception" ? 71 : 32) << n;
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
    EXPECT_NE(s.find(" predictions (Dense)"), std::string::npos);
  }
}

TEST(Applications, FeaturesPoolingAndClasses) {
  for (const Published& p : kPublished) {
    SCOPED_TRACE(p.name);
    // Without the top: the last feature map, here at 96 px (stride 32: 3x3).
    auto features = Build(p.name, {.include_top = false, .input_shape = {96, 96, 3}});
    ASSERT_TRUE(features);
    EXPECT_EQ(features->output_shape().value(), (Shape{3, 3, p.features}));
    const int64_t classifier = (p.features + 1) * 1000;
    EXPECT_EQ(features->count_params(), p.total - classifier);
    EXPECT_FALSE(features->ends_in_softmax());
    for (const char* pooling : {"avg", "max"}) {
      auto pooled = Build(p.name, {.include_top = false, .input_shape = {96, 96, 3}, .pooling = pooling});
      ASSERT_TRUE(pooled);
      EXPECT_EQ(pooled->output_shape().value(), (Shape{p.features})) << pooling;
      EXPECT_EQ(pooled->count_params(), p.total - classifier) << pooling;
    }
    // The flowers data: 104 classes at 192 px, logits; the input size does not change the weights.
    auto flowers = Build(p.name, {.input_shape = {192, 192, 3}, .classes = 104, .classifier_activation = "linear",
                                  .name = "flowers"});
    ASSERT_TRUE(flowers);
    EXPECT_EQ(flowers->name(), "flowers");
    EXPECT_EQ(flowers->output_shape().value(), (Shape{104}));
    EXPECT_EQ(flowers->count_params(), p.total - classifier + (p.features + 1) * 104);
    EXPECT_FALSE(flowers->ends_in_softmax());
  }
}

TEST(Applications, SmallestAndOddInputsBuild) {
  for (const Published& p : kPublished) {
    const int min = MinimumSize(p.name);
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
