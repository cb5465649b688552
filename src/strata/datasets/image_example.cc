#include "strata/datasets/image_example.h"

namespace strata::datasets {

using data::Element;

Status DecodeInto(const image::Augmenter& aug, const std::string& label_key, const std::string& what, const Element& e,
                  data::Rng& rng, Element& out) {
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

data::ElementSpec DecodedSpec(const image::Augmenter& aug, bool label) {
  const auto& o = aug.options();
  data::ElementSpec spec{.dtypes = {DType::kF32}, .shapes = {Shape{o.height, o.width, o.channels}}};
  if (label) {
    spec.dtypes.push_back(DType::kI64);
    spec.shapes.push_back(Shape{});
  }
  return spec;
}

data::MapRngFn DecodeFn(std::shared_ptr<const image::Augmenter> aug, std::string label_key, std::string what) {
  return [aug, label_key, what, spec = DecodedSpec(*aug, !label_key.empty())](Element e, data::Rng& rng) -> Result<Element> {
    Element out;
    for (size_t c = 0; c < spec.dtypes.size(); ++c) out.tensors.push_back(Tensor::Empty(spec.dtypes[c], spec.shapes[c]));
    STRATA_RETURN_IF_ERROR(DecodeInto(*aug, label_key, what, e, rng, out));
    return out;
  };
}

}  // namespace strata::datasets
