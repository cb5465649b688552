#include "strata/data/recipes.h"

#include <random>

#include "strata/data/sources.h"
#include "strata/image/augment.h"

namespace strata::data {
namespace {

// Decodes the (image bytes, label) dict `e` into `out` = (image f32 [H, W, C], label i64[]),
// already allocated (a batch row when map_into is fused with batch). The augmenter's
// per-element key comes from the element's generator, so the pixels do not depend on the
// thread that decodes them.
Status DecodeInto(const image::Augmenter& aug, const std::string& label_key, const std::string& what, const Element& e,
                  Rng& rng, Element& out) {
  STRATA_ASSIGN_OR_RETURN(Tensor bytes, e.Get("image"));
  const std::string_view encoded(static_cast<const char*>(bytes.raw_data()), bytes.nbytes());
  Status s = aug.Run(encoded, rng.NextU64(), out[0].raw_data());  // out[0]: [H, W, C], every pixel written
  if (!s.ok()) return s.WithContext(what + " feature 'image'");
  if (!label_key.empty()) {
    STRATA_ASSIGN_OR_RETURN(Tensor label, e.Get(label_key));
    if (label.num_elements() != 1)
      return InvalidArgument(what + " feature '" + label_key + "' has " + std::to_string(label.num_elements()) +
                             " values, expected 1");
    *out[1].data<int64_t>() = *label.data<int64_t>();
  }
  return Status::OK();
}

ElementSpec DecodedSpec(const image::Augmenter& aug, bool label) {
  const auto& o = aug.options();
  ElementSpec spec{.dtypes = {DType::kF32}, .shapes = {Shape{o.height, o.width, o.channels}}};
  if (label) {
    spec.dtypes.push_back(DType::kI64);
    spec.shapes.push_back(Shape{});
  }
  return spec;
}

// The same as a map function that allocates its output.
MapRngFn DecodeFn(std::shared_ptr<const image::Augmenter> aug, std::string label_key, std::string what) {
  return [aug, label_key, what, spec = DecodedSpec(*aug, !label_key.empty())](Element e, Rng& rng) -> Result<Element> {
    Element out;
    for (size_t c = 0; c < spec.dtypes.size(); ++c) out.tensors.push_back(Tensor::Empty(spec.dtypes[c], spec.shapes[c]));
    STRATA_RETURN_IF_ERROR(DecodeInto(*aug, label_key, what, e, rng, out));
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
  const MapOptions map_options{.num_parallel_calls = o.num_parallel_calls, .seed = MixSeed(seed, 3)};
  const int64_t global_batch = o.batch_size * o.replicas;
  if (o.id_key.empty()) {
    // map_into + batch run fused: each image is decoded straight into its batch row.
    ds = ds.map_into(
        DecodedSpec(*shared, !o.label_key.empty()),
        [parse, shared, label_key = o.label_key](Element e, Rng& rng, Element& out) -> Status {
          STRATA_ASSIGN_OR_RETURN(Element parsed, parse(std::move(e)));
          return DecodeInto(*shared, label_key, "flowers", parsed, rng, out);
        },
        map_options);
    ds = ds.batch(global_batch, {.drop_remainder = o.drop_remainder});
  } else {
    // Ids differ in length from file to file: zero-padded to the longest of the batch.
    MapRngFn decode = DecodeFn(shared, o.label_key, "flowers");
    ds = ds.map_with_rng(
        [parse, decode, id_key = o.id_key](Element e, Rng& rng) -> Result<Element> {
          STRATA_ASSIGN_OR_RETURN(Element parsed, parse(std::move(e)));
          STRATA_ASSIGN_OR_RETURN(Tensor id, parsed.Get(id_key));
          STRATA_ASSIGN_OR_RETURN(Element out, decode(std::move(parsed), rng));
          out.tensors.push_back(std::move(id));  // u8 [L]
          return out;
        },
        map_options);
    ds = ds.padded_batch(global_batch, {.drop_remainder = o.drop_remainder});
  }
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
