#include "strata/datasets/image_example.h"

namespace strata::datasets {

using data::Element;

Status DecodeInto(const image::Augmenter& aug, const ImageKeys& keys, const std::string& what, const Element& e,
                  data::Rng& rng, Element& out) {
  STRATA_ASSIGN_OR_RETURN(Tensor bytes, e.Get(keys.image));
  const std::string_view encoded(static_cast<const char*>(bytes.raw_data()), bytes.nbytes());
  Status s = aug.Run(encoded, rng.NextU64(), out[0].raw_data());  // out[0]: [H, W, C], every pixel written
  if (!s.ok()) return s.WithContext(what + " feature '" + keys.image + "'");
  if (!keys.label.empty()) {
    STRATA_ASSIGN_OR_RETURN(Tensor label, e.Get(keys.label));
    if (label.num_elements() != 1)
      return InvalidArgument(what + " feature '" + keys.label + "' has " + std::to_string(label.num_elements()) +
                             " values, expected 1");
    *out[1].data<int64_t>() = *label.data<int64_t>();
  }
  return Status::OK();
}

data::ElementSpec DecodedSpec(const image::Augmenter& aug, bool label) {
  const auto& o = aug.options();
  data::ElementSpec spec{.dtypes = {DType::kF32}, .shapes = {Shape{o.height, o.width, o.channels}}};
  if (label) {
    spec.dtypes.push_back(DType::kI64);
    spec.shapes.push_back(Shape{});
  }
  return spec;
}

data::MapRngFn DecodeFn(std::shared_ptr<const image::Augmenter> aug, ImageKeys keys, std::string what) {
  return [aug, keys, what, spec = DecodedSpec(*aug, !keys.label.empty())](Element e, data::Rng& rng) -> Result<Element> {
    Element out;
    for (size_t c = 0; c < spec.dtypes.size(); ++c) out.tensors.push_back(Tensor::Empty(spec.dtypes[c], spec.shapes[c]));
    STRATA_RETURN_IF_ERROR(DecodeInto(*aug, keys, what, e, rng, out));
    return out;
  };
}

}  // namespace strata::datasets
