// ParseExampleFn: serialized tf.train.Example -> dict of tensors, through the records
// layer's ExampleParser (one pass over the wire bytes, typed values written in place; bytes
// values are views of the record tensor, sharing its storage).
#include <cstring>

#include "strata/data/sources.h"

namespace strata::data {

Result<MapFn> ParseExampleFn(std::vector<record::FeatureSpec> spec) {
  for (const auto& f : spec)
    if (f.type == record::FeatureKind::kBytes && !f.var_len && record::ExampleParser::NumElements(f) != 1)
      return InvalidArgument("ParseExampleFn: bytes feature '" + f.key +
                             "' must be a scalar or var_len (one tensor holds one byte string)");
  STRATA_ASSIGN_OR_RETURN(record::ExampleParser parser, record::ExampleParser::Create(spec));
  auto shared = std::make_shared<record::ExampleParser>(std::move(parser));
  return MapFn([shared](Element e) -> Result<Element> {
    if (e.size() < 1 || e[0].dtype() != DType::kU8 || e[0].rank() != 1)
      return InvalidArgument("parse: expected a serialized record (u8[n]), got " + e.DebugString());
    const std::string_view bytes(static_cast<const char*>(e[0].raw_data()), e[0].nbytes());
    thread_local record::ParsedExample parsed;  // reused: no allocation once warm
    STRATA_RETURN_IF_ERROR(shared->Parse(bytes, &parsed));
    const auto& specs = shared->features();
    Element out;
    out.names.reserve(specs.size());
    out.tensors.reserve(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      const record::FeatureSpec& s = specs[i];
      const record::ParsedFeature& p = parsed[i];
      Shape shape = s.var_len ? Shape{static_cast<int64_t>(p.size())} : Shape(s.shape);
      Tensor t;
      switch (s.type) {
        case record::FeatureKind::kFloat:
          t = Tensor(DType::kF32, shape);
          if (!p.floats.empty()) std::memcpy(t.raw_data(), p.floats.data(), p.floats.size() * sizeof(float));
          break;
        case record::FeatureKind::kInt64:
          t = Tensor(DType::kI64, shape);
          if (!p.int64s.empty()) std::memcpy(t.raw_data(), p.int64s.data(), p.int64s.size() * sizeof(int64_t));
          break;
        case record::FeatureKind::kBytes:
          if (p.bytes.size() != 1)
            return InvalidArgument("parse: bytes feature '" + s.key + "' has " + std::to_string(p.bytes.size()) +
                                   " values; one is supported");
          // A view of the record when the value lies in it (no copy of a 90 KB JPEG); a spec
          // default is copied.
          if (const char* v = p.bytes[0].data(); v >= bytes.data() && v + p.bytes[0].size() <= bytes.data() + bytes.size()) {
            const int64_t at = v - bytes.data();
            STRATA_ASSIGN_OR_RETURN(t, e[0].Slice(0, at, at + static_cast<int64_t>(p.bytes[0].size())));
          } else {
            t = StringTensor(p.bytes[0]);
          }
          break;
        default:
          return InvalidArgument("parse: feature '" + s.key + "' has no type");
      }
      out.names.push_back(s.key);
      out.tensors.push_back(std::move(t));
    }
    return out;
  });
}

}  // namespace strata::data
