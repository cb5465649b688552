// Moved: the record makers live in the datasets layer now (strata/datasets/make_records.h;
// issue 20, part 4). This forwarding header only keeps tools/strata/model_io.cc building
// until it includes that itself; then it goes, with its line under "Known exceptions" in
// docs/architecture.md. New code: include datasets/.
#pragma once

#include "strata/datasets/make_records.h"

namespace strata::image {

using datasets::kFashionMnistClasses;

}  // namespace strata::image
