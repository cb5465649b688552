// Batch size in Strata means one thing: the batch of one replica. Options, flags and specs
// all take it per replica (`FlowersOptions::batch_size`, `FashionMnistOptions::batch_size`,
// `strata train --batch-per-replica`); the global batch, the rows of one step over every
// replica, is derived here and nowhere else.
//
//   data::Dataset ds = ...batch(datasets::GlobalBatch(16, 8));  // 128 rows a step, 16 a replica
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>

namespace strata::datasets {

// The rows one training step reads across `replicas` replicas of `per_replica` rows each.
constexpr int64_t GlobalBatch(int64_t per_replica, int64_t replicas) { return per_replica * replicas; }

}  // namespace strata::datasets

#pragma GCC visibility pop
