// A built-in map function of strata.data (parse_example, decode_image): C++ code that runs in
// the pipeline's threads without the GIL. Consecutive built-in maps fuse into one stage (one
// hand-off per element, as tf.data's map_fusion); one that can write its output in place
// (decode_image) runs as map_into, so that a following batch writes each element straight into
// its batch row (map_and_batch fusion), as the C++ recipes do.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "strata/data/dataset.h"

namespace strata::python {

struct BuiltinMap {
  std::string name;                           // "parse_example", "decode_image", "a -> b"
  data::MapRngFn fn;                          // always set: allocates its output
  std::optional<data::ElementSpec> into_spec; // set when `into` can write into a given output
  data::MapIntoFn into;
  std::vector<std::string> string_keys;       // output components that are byte strings (dict keys)
  uint64_t seed = 0;                          // the map stage's per-element generators (MapOptions::seed)
};

// `first` then `second`, as one function.
BuiltinMap ComposeMaps(const BuiltinMap& first, const BuiltinMap& second);

}  // namespace strata::python
