// The decode stage the image recipes share (flowers.cc, fashion_mnist.cc): a parsed Example
// dict with an encoded `image` and an int64 label becomes (image f32 [H, W, C], label i64[]),
// decoded, resized and augmented by an image::Augmenter.
#pragma once

#include <memory>
#include <string>

#include "strata/data/dataset.h"
#include "strata/image/augment.h"
#include "strata/image/decode.h"

namespace strata::datasets {

// The element a decode produces: (f32 [H, W, C]) and, with a label, (i64 []).
data::ElementSpec DecodedSpec(const image::Augmenter& aug, bool label);

// The features a recipe reads: the encoded image and the int64 label (empty: no label).
struct ImageKeys {
  std::string image = "image";
  std::string label;
};

// Decodes the (image bytes, label) dict `e` into `out`, already allocated to DecodedSpec (a
// batch row when map_into is fused with batch). The augmenter's per-element key comes from
// the element's generator, so the pixels do not depend on the thread that decodes them.
// `what` names the dataset in errors.
Status DecodeInto(const image::Augmenter& aug, const ImageKeys& keys, const std::string& what, const data::Element& e,
                  data::Rng& rng, data::Element& out);

// The same as a map function that allocates its output.
data::MapRngFn DecodeFn(std::shared_ptr<const image::Augmenter> aug, ImageKeys keys, std::string what);

// The header of the image in the first record of the files matching `file_glob` (in name
// order): format, height, width and channels as stored. `strata train` builds a built-in model
// for the input it is given (Keras's input_shape) from this. With `label_key`, the record must
// also hold that int64 feature. Errors name the file pattern and the feature, before any
// training work.
Result<image::ImageInfo> FirstImageInfo(const std::string& file_glob, const std::string& image_key,
                                        const std::string& label_key = "");

}  // namespace strata::datasets
