#include "strata/data/recipes.h"

#include <random>

#include "strata/data/sources.h"
#include "strata/image/augment.h"

namespace strata::data {
namespace {

// (image bytes, label) dict -> (image f32 [H, W, C], label i64[]) through an Augmenter.
// The augmenter's per-element key comes from the element's generator, so the pixels do
// not depend on the thread that decodes them.
MapRngFn DecodeFn(std::shared_ptr<const image::Augmenter> aug, std::string label_key, std::string what) {
  const auto& o = aug->options();
  return [aug, label_key, what, h = o.height, w = o.width, c = o.channels](Element e, Rng& rng) -> Result<Element> {
    STRATA_ASSIGN_OR_RETURN(Tensor bytes, e.Get("image"));
    Tensor img = Tensor::Empty(DType::kF32, Shape{h, w, c});  // [H, W, C]; the augmenter writes every pixel
    const std::string_view encoded(static_cast<const char*>(bytes.raw_data()), bytes.nbytes());
    Status s = aug->Run(encoded, rng.NextU64(), img.raw_data());
    if (!s.ok()) return s.WithContext(what + " feature 'image'");
    Element out({img});
    if (!label_key.empty()) {
      STRATA_ASSIGN_OR_RETURN(Tensor label, e.Get(label_key));
      if (label.num_elements() != 1)
        return InvalidArgument(what + " feature '" + label_key + "' has " + std::to_string(label.num_elements()) +
                               " values, expected 1");
      out.tensors.push_back(Scalar<int64_t>(*label.data<int64_t>()));
    }
    return out;
  };
}

}  // namespace

Result<Dataset> FlowersDataset(const std::string& file_glob, FlowersOptions o) {
  if (o.image_size <= 0 || o.batch_size <= 0 || o.replicas <= 0)
    return InvalidArgument("FlowersDataset: image_size, batch_size and replicas must be > 0");
  const uint64_t seed = o.seed.value_or(std::random_device{}() * 0x100000001ull ^ std::random_device{}());
  STRATA_ASSIGN_OR_RETURN(Dataset files, list_files(file_glob, {.shuffle = true, .seed = MixSeed(seed, 1)}));
  std::vector<record::FeatureSpec> spec = {{.key = "image", .type = record::FeatureKind::kBytes}};
  if (!o.label_key.empty()) spec.push_back({.key = o.label_key, .type = record::FeatureKind::kInt64});
  if (!o.id_key.empty()) spec.push_back({.key = o.id_key, .type = record::FeatureKind::kBytes});
  STRATA_ASSIGN_OR_RETURN(MapFn parse, ParseExampleFn(spec));
  image::AugmentOptions ao;
  ao.height = ao.width = o.image_size;
  ao.channels = 3;
  if (o.augment) {
    ao.flip_left_right = 0.5f;
    ao.saturation_lower = 0;
    ao.saturation_upper = 2;
  }
  STRATA_ASSIGN_OR_RETURN(image::Augmenter aug, image::Augmenter::Make(ao, MixSeed(seed, 2)));
  auto shared = std::make_shared<const image::Augmenter>(std::move(aug));

  Dataset ds = TFRecordDataset(files, {.num_parallel_reads = o.num_parallel_reads, .cycle_length = o.files_open})
                   .with_options({.deterministic = o.deterministic, .autotune = o.autotune});
  if (o.repeat) ds = ds.repeat();
  if (o.shuffle_buffer > 0) ds = ds.shuffle(o.shuffle_buffer, {.seed = MixSeed(seed, 4)});
  // Parse and decode in one parallel stage: one hand-off per element instead of two.
  MapRngFn decode = DecodeFn(shared, o.label_key, "flowers");
  const std::string id_key = o.id_key;
  ds = ds.map_with_rng(
      [parse, decode, id_key](Element e, Rng& rng) -> Result<Element> {
        STRATA_ASSIGN_OR_RETURN(Element parsed, parse(std::move(e)));
        Tensor id;
        if (!id_key.empty()) {
          STRATA_ASSIGN_OR_RETURN(id, parsed.Get(id_key));
        }
        STRATA_ASSIGN_OR_RETURN(Element out, decode(std::move(parsed), rng));
        if (!id_key.empty()) out.tensors.push_back(std::move(id));  // u8 [L]
        return out;
      },
      {.num_parallel_calls = o.num_parallel_calls, .seed = MixSeed(seed, 3)});
  const int64_t global_batch = o.batch_size * o.replicas;
  // Ids differ in length from file to file: zero-padded to the longest of the batch.
  ds = id_key.empty() ? ds.batch(global_batch, {.drop_remainder = o.drop_remainder})
                      : ds.padded_batch(global_batch, {.drop_remainder = o.drop_remainder});
  return ds.prefetch(o.prefetch);
}

Result<Dataset> FashionMnistDataset(const std::string& file_glob, FashionMnistOptions o) {
  if (o.batch_size <= 0) return InvalidArgument("FashionMnistDataset: batch_size must be > 0");
  const uint64_t seed = o.seed.value_or(std::random_device{}() * 0x100000001ull ^ std::random_device{}());
  STRATA_ASSIGN_OR_RETURN(Dataset files, list_files(file_glob));
  STRATA_ASSIGN_OR_RETURN(MapFn parse, ParseExampleFn({{.key = "image", .type = record::FeatureKind::kBytes},
                                                       {.key = "label", .type = record::FeatureKind::kInt64}}));
  image::AugmentOptions ao;
  ao.height = ao.width = 28;
  ao.channels = 1;
  ao.dct_scaling = false;
  STRATA_ASSIGN_OR_RETURN(image::Augmenter aug, image::Augmenter::Make(ao, seed));
  auto shared = std::make_shared<const image::Augmenter>(std::move(aug));
  MapRngFn decode = DecodeFn(shared, "label", "fashion_mnist");
  Dataset ds = TFRecordDataset(files).with_options({.deterministic = o.deterministic});
  ds = ds.map_with_rng(
      [parse, decode](Element e, Rng& rng) -> Result<Element> {
        STRATA_ASSIGN_OR_RETURN(Element parsed, parse(std::move(e)));
        return decode(std::move(parsed), rng);
      },
      {.num_parallel_calls = o.num_parallel_calls, .seed = MixSeed(seed, 3)});
  if (o.cache) ds = ds.cache();
  if (o.shuffle > 0) ds = ds.shuffle(o.shuffle, {.seed = MixSeed(seed, 4)});
  if (o.repeat) ds = ds.repeat();
  ds = ds.batch(o.batch_size, {.drop_remainder = o.drop_remainder});
  return ds.prefetch(AUTOTUNE);
}

}  // namespace strata::data
