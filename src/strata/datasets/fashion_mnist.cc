#include "strata/datasets/fashion_mnist.h"

#include <random>

#include "strata/data/sources.h"
#include "strata/datasets/batch_size.h"
#include "strata/datasets/image_example.h"
#include "strata/image/augment.h"
#include "strata/image/pad_crop.h"

namespace strata::datasets {

using data::Dataset;
using data::Element;
using data::MixSeed;

Result<data::Dataset> FashionMnistDataset(const std::string& file_glob, FashionMnistOptions o) {
  if (o.batch_size <= 0 || o.replicas <= 0)
    return InvalidArgument("FashionMnistDataset: batch_size and replicas must be > 0");
  if (o.pad_crop < 0 || o.pad_crop > 27 || !(o.flip_left_right >= 0 && o.flip_left_right <= 1))
    return InvalidArgument("FashionMnistDataset: pad_crop must be in [0, 27] and flip_left_right in [0, 1], found " +
                           std::to_string(o.pad_crop) + " and " + std::to_string(o.flip_left_right));
  const uint64_t seed = o.seed.value_or(std::random_device{}() * 0x100000001ull ^ std::random_device{}());
  STRATA_ASSIGN_OR_RETURN(Dataset files, data::list_files(file_glob));
  STRATA_ASSIGN_OR_RETURN(data::MapFn parse,
                          data::ParseExampleFn({{.key = o.image_key, .type = record::FeatureKind::kBytes},
                                                {.key = o.label_key, .type = record::FeatureKind::kInt64}}));
  image::AugmentOptions ao;
  ao.height = ao.width = 28;
  ao.channels = 1;
  ao.dct_scaling = false;
  STRATA_ASSIGN_OR_RETURN(image::Augmenter aug, image::Augmenter::Make(ao, seed));
  auto shared = std::make_shared<const image::Augmenter>(std::move(aug));
  data::MapRngFn decode = DecodeFn(shared, {.image = o.image_key, .label = o.label_key}, "fashion_mnist");
  Dataset ds = data::TFRecordDataset(files).with_options({.deterministic = o.deterministic});
  ds = ds.map_with_rng(
      [parse, decode](Element e, data::Rng& rng) -> Result<Element> {
        STRATA_ASSIGN_OR_RETURN(Element parsed, parse(std::move(e)));
        return decode(std::move(parsed), rng);
      },
      {.num_parallel_calls = o.num_parallel_calls, .seed = MixSeed(seed, 3)});
  if (o.cache) ds = ds.cache();
  if (o.shuffle > 0) ds = ds.shuffle(o.shuffle, {.seed = MixSeed(seed, 4)});
  if (o.repeat) ds = ds.repeat();
  if (o.pad_crop > 0 || o.flip_left_right > 0) {
    // After the cache and the shuffle: a fresh view of each image every epoch, written straight
    // into its batch row (map_into + batch run fused), in the prefetch thread (a copy of 3 KB).
    const data::ElementSpec spec{.dtypes = {DType::kF32, DType::kI64}, .shapes = {Shape{28, 28, 1}, Shape{}}};
    ds = ds.map_into(
        spec,
        [pad = o.pad_crop, flip = o.flip_left_right](Element e, data::Rng& rng, Element& out) -> Status {
          const Tensor& in = e[0];
          if (in.shape() != Shape{28, 28, 1} || in.dtype() != DType::kF32)
            return InvalidArgument("fashion_mnist augmentation: expected a decoded f32 [28, 28, 1] image, found " +
                                   std::string(DTypeName(in.dtype())) + in.shape().ToString());
          const image::PadCropPlacement at = image::DrawPadCrop(pad, flip, rng);
          image::PadCropFlip(in.data<float>(), 28, 28, 1, at, out[0].data<float>());
          *out[1].data<int64_t>() = *e[1].data<int64_t>();
          return Status::OK();
        },
        {.num_parallel_calls = 1, .seed = MixSeed(seed, 5)});
  }
  ds = ds.batch(GlobalBatch(o.batch_size, o.replicas), {.drop_remainder = o.drop_remainder});
  return ds.prefetch(data::AUTOTUNE);
}

}  // namespace strata::datasets
