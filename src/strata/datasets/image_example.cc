#include "strata/datasets/image_example.h"

#include "strata/data/sources.h"

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

Result<image::ImageInfo> FirstImageInfo(const std::string& file_glob, const std::string& image_key,
                                        const std::string& label_key) {
  STRATA_ASSIGN_OR_RETURN(data::Dataset files, data::list_files(file_glob));
  std::vector<record::FeatureSpec> spec = {{.key = image_key, .type = record::FeatureKind::kBytes}};
  if (!label_key.empty()) spec.push_back({.key = label_key, .type = record::FeatureKind::kInt64});
  STRATA_ASSIGN_OR_RETURN(data::MapFn parse, data::ParseExampleFn(spec));
  STRATA_ASSIGN_OR_RETURN(auto it, data::TFRecordDataset(files).make_iterator());
  STRATA_ASSIGN_OR_RETURN(std::optional<Element> first, it->Next());
  if (!first) return NotFound(file_glob + ": no records");
  const std::string where = file_glob + " first record";
  auto parsed = parse(std::move(*first));
  if (!parsed.ok()) return parsed.status().WithContext(where);
  STRATA_ASSIGN_OR_RETURN(Tensor bytes, parsed->Get(image_key));
  auto info = image::ReadImageInfo(std::string_view(static_cast<const char*>(bytes.raw_data()), bytes.nbytes()));
  if (!info.ok()) return info.status().WithContext(where + " feature '" + image_key + "'");
  return info;
}

}  // namespace strata::datasets
