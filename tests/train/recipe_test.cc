// The training recipe (train/recipe.h): a bad value is refused before any work with an error
// that names its flag; a preset is nothing but its values (its name decides nothing); what the
// records are is decided by one function, which picks the pipeline.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/temp_path.h"
#include "strata/datasets/flowers.h"
#include "strata/datasets/synthetic.h"
#include "strata/train/recipe.h"

namespace strata::train {
namespace {

namespace fs = std::filesystem;

struct BadRecipe {
  std::function<void(Recipe&)> change;
  std::string says;  // a part of the message, its flag (or field) included
};

TEST(RecipeCheck, EachBadValueIsAnInvalidArgumentNamingItsFlag) {
  const std::vector<BadRecipe> cases = {
      {[](Recipe& r) { r.preset = "imagenet"; }, "--preset must be fashion_mnist or flowers, not imagenet"},
      {[](Recipe& r) { r.precision = "f16"; }, "--precision must be f32 or bf16"},
      {[](Recipe& r) { r.lr_scaling = "sqrt"; }, "--lr-scaling must be linear or none"},
      {[](Recipe& r) { r.schedule = "linear"; }, "--schedule must be cosine, constant or rampup"},
      {[](Recipe& r) { r.optimizer = "rmsprop"; }, "--optimizer must be sgd or adam"},
      {[](Recipe& r) { r.channels = 2; }, "--channels must be 1 or 3"},
      {[](Recipe& r) { r.image_size = -1; }, "--image-size must be positive"},
      {[](Recipe& r) { r.resume = true; }, "--resume needs --checkpoint-dir"},
      {[](Recipe& r) { r.epochs = 0; }, "--epochs and --batch-per-replica must be positive"},
      {[](Recipe& r) { r.batch_per_replica = 0; }, "--epochs and --batch-per-replica must be positive"},
      {[](Recipe& r) { r.validation_steps = 0; }, "--validation-steps must be positive"},
      {[](Recipe& r) { r.pad_crop = 28; }, "--pad-crop must be in [0, 27] pixels"},
      {[](Recipe& r) { r.flip = 1.5; }, "--flip must be a probability in [0, 1]"},
      {[](Recipe& r) { r.label_smoothing = 1; }, "--label-smoothing must be in [0, 1)"},
      {[](Recipe& r) { r.freeze_backbone_epochs = -1; }, "--freeze-backbone-epochs must be 0 or more"},
      {[](Recipe& r) { r.freeze_backbone_epochs = 1; }, "--freeze-backbone-epochs needs --freeze-until LAYER"},
      {[](Recipe& r) { r.freeze_until = "re_lu", r.freeze_backbone_epochs = 3, r.epochs = 3; },
       "--freeze-backbone-epochs 3 leaves no epoch of --epochs 3 to fine-tune"},
      {[](Recipe& r) {
         r.freeze_until = "re_lu", r.freeze_backbone_epochs = 1, r.checkpoint_dir = "d", r.resume = true;
       },
       "--resume cannot continue a --freeze-backbone-epochs run"},
      {[](Recipe& r) { r.default_data = "mnist"; }, "default_data must be fashion_mnist or empty"},
      {[](Recipe& r) { r.default_data = ""; }, "a recipe without default_data needs --data"},
      {[](Recipe& r) { r.val_split = "dev"; }, "val_split must be test or val, not dev"},
  };
  for (const BadRecipe& c : cases) {
    Recipe r = *Preset("");
    c.change(r);
    const Status s = Check(r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.says;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << "expected \"" << c.says << "\" in: " << s.message();
  }
  EXPECT_TRUE(Check(*Preset("")).ok()) << Check(*Preset("")).ToString();
}

TEST(RecipeCheck, TheFlowersPresetNeedsData) {
  Recipe r = *Preset("flowers");
  const Status s = Check(r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--preset flowers needs --data 'DIR/train/*.tfrec' (and --val 'DIR/val/*.tfrec')");
  r.data = "train/*.tfrec";
  EXPECT_TRUE(Check(r).ok()) << Check(r).ToString();
}

TEST(Presets, TheDefaultJob) {
  for (const char* name : {"", "fashion_mnist"}) {
    SCOPED_TRACE(name);
    auto r = Preset(name);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->preset, "");
    EXPECT_EQ(r->model, "reference-cnn");
    EXPECT_EQ(r->data, "");
    EXPECT_EQ(r->default_data, "fashion_mnist");
    EXPECT_EQ(r->label_key, "label");
    EXPECT_EQ(r->image_size, 0);
    EXPECT_EQ(r->classes, 0);
    EXPECT_EQ(r->epochs, 15);
    EXPECT_EQ(r->batch_per_replica, 128);
    EXPECT_EQ(r->optimizer, "sgd");
    EXPECT_EQ(r->lr, 0.05);
    EXPECT_EQ(r->schedule, "cosine");
    EXPECT_EQ(r->weight_decay, 5e-4);
    EXPECT_EQ(r->label_smoothing, 0.1);
    EXPECT_EQ(r->flip, 0.5);
    EXPECT_EQ(r->pad_crop, 0);
    EXPECT_EQ(r->metrics, std::vector<std::string>{"accuracy"});
    EXPECT_EQ(r->precision, NativeBf16() ? "bf16" : "f32");
    EXPECT_FALSE(r->resize_spec_file);
    EXPECT_EQ(r->val_split, "test");
  }
}

TEST(Presets, Flowers) {
  auto r = Preset("flowers");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->preset, "flowers");
  EXPECT_EQ(r->model, "flowers-xception");
  EXPECT_EQ(r->data, "");
  EXPECT_EQ(r->default_data, "");
  EXPECT_EQ(r->label_key, "class");
  EXPECT_EQ(r->image_size, 192);
  EXPECT_EQ(r->classes, datasets::kFlowersNumClasses);
  EXPECT_EQ(r->epochs, 12);
  EXPECT_EQ(r->batch_per_replica, 16);
  EXPECT_EQ(r->optimizer, "adam");
  EXPECT_EQ(r->lr, 5e-4);
  EXPECT_EQ(r->schedule, "rampup");
  EXPECT_EQ(r->warmup_epochs, 3);
  EXPECT_EQ(r->weight_decay, 0);
  EXPECT_EQ(r->label_smoothing, 0);
  EXPECT_EQ(r->flip, 0);
  EXPECT_EQ(r->metrics, (std::vector<std::string>{"accuracy", "f1_macro"}));
  EXPECT_EQ(r->precision, NativeBf16() ? "bf16" : "f32");
  EXPECT_TRUE(r->resize_spec_file);
  EXPECT_EQ(r->val_split, "val");
}

TEST(Presets, AnUnknownNameIsRefusedAndTheNamesAreListed) {
  auto r = Preset("imagenet");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--preset must be fashion_mnist or flowers, not imagenet"), std::string::npos);
  EXPECT_EQ(PresetNames(), (std::vector<std::string>{"fashion_mnist", "flowers"}));
}

// What a preset does comes from its values: the flowers values under no name need data, the
// default values under the flowers name do not.
TEST(Presets, TheNameDecidesNothing) {
  Recipe flowers_values = *Preset("flowers");
  flowers_values.preset = "";
  EXPECT_NE(Check(flowers_values).message().find("needs --data"), std::string::npos);
  Recipe default_values = *Preset("");
  default_values.preset = "flowers";
  EXPECT_TRUE(Check(default_values).ok()) << Check(default_values).ToString();
}

TEST(DataKind, FashionMnistsLayoutAloneIsFashionMnist) {
  EXPECT_EQ(DataKindOf(28, "label", 1), DataKind::kFashionMnist);
  EXPECT_EQ(DataKindOf(32, "label", 1), DataKind::kImageRecords);
  EXPECT_EQ(DataKindOf(28, "class", 1), DataKind::kImageRecords);
  EXPECT_EQ(DataKindOf(28, "label", 3), DataKind::kImageRecords);
  Recipe r = *Preset("");
  r.image_size = 28, r.channels = 1;
  EXPECT_EQ(DataKindOf(r), DataKind::kFashionMnist);
}

TEST(ResolveInputs, ARecipeWithoutDefaultDataMakesNone) {
  Recipe r = *Preset("flowers");
  r.model = "flowers-cnn";
  auto made = ResolveInputs(&r);
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(made.status().message().find("--preset flowers needs --data"), std::string::npos);
  // Without making data (MakeModel alone) there is nothing to refuse.
  auto sized = ResolveInputs(&r, /*talk=*/false, /*make_data=*/false);
  ASSERT_TRUE(sized.ok()) << sized.status().ToString();
  EXPECT_EQ(r.image_size, 192);
  EXPECT_EQ(r.data, "");
}

// The same records through both pipelines, as DataKindOf picks them: Fashion-MNIST's at
// 28 x 28 x 1, the one that decodes and resizes at another size.
TEST(MakeDataset, EitherKindGivesTheRecipesImages) {
  const std::string dir = test::TempPath("strata_train_recipe_records");
  fs::remove_all(dir);
  ASSERT_TRUE(datasets::WriteSyntheticFashionMnist(dir, 1, 8).ok());
  Recipe r = *Preset("");
  r.batch_per_replica = 4;
  r.channels = 1;
  for (int64_t size : {28, 20}) {
    SCOPED_TRACE(size);
    r.image_size = size;
    auto ds = MakeDataset(r, dir + "/fashion_mnist-train.tfrecord-*", /*replicas=*/1, /*training=*/false);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    auto it = ds->make_iterator();
    ASSERT_TRUE(it.ok()) << it.status().ToString();
    auto batch = (*it)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    ASSERT_TRUE(batch->has_value());
    EXPECT_EQ((**batch)[0].shape(), (Shape{4, size, size, 1}));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::train
