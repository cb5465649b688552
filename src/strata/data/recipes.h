// Moved: the recipes live in the datasets layer now (strata/datasets/flowers.h,
// strata/datasets/fashion_mnist.h; issue 20, part 4). This forwarding header only keeps
// tools/strata/model_io.cc building until it includes those itself; then it goes, with its
// line under "Known exceptions" in docs/architecture.md. New code: include datasets/.
#pragma once

#include "strata/datasets/fashion_mnist.h"
#include "strata/datasets/flowers.h"

namespace strata::data {

using datasets::FashionMnistDataset;
using datasets::FashionMnistOptions;
using datasets::FlowersDataset;
using datasets::FlowersOptions;
using datasets::kFlowersClasses;
using datasets::kFlowersNumClasses;

}  // namespace strata::data
