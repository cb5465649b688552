#include "strata/distribute/cross_replica_sum.h"

#include <algorithm>

namespace strata::distribute {

CrossReplicaSum::CrossReplicaSum(Strategy& strategy, int64_t calls_per_step, std::string what)
    : strategy_(strategy), calls_per_step_(calls_per_step), what_(std::move(what)) {
  const size_t replicas = static_cast<size_t>(strategy.num_local_replicas());
  for (auto& slots : slots_) slots.resize(replicas);
  calls_.assign(replicas, 0);
}

void CrossReplicaSum::FinishStep(int r) {
  while (calls_[static_cast<size_t>(r)] < calls_per_step_) (void)Sum(r, nullptr, -1);
}

Status CrossReplicaSum::Sum(int r, double* data, int64_t n) {
  const int R = strategy_.num_local_replicas();
  const int parity = static_cast<int>(calls_[static_cast<size_t>(r)]++ & 1);
  std::vector<std::vector<double>>& slots = slots_[parity];
  if (n >= 0) {
    slots[static_cast<size_t>(r)].assign(data, data + n);
  } else {
    slots[static_cast<size_t>(r)].clear();
  }
  strategy_.barrier();
  auto label = [&] { return what_ + " replica " + std::to_string(r) + ": "; };
  // Every slot must hold this call's n values; a replica that failed left its slot empty.
  size_t len = slots[0].size();
  bool complete = true;
  for (const auto& slot : slots) {
    len = std::max(len, slot.size());
    complete = complete && slot.size() == slots[0].size() && !slot.empty();
  }
  Collective* hosts = strategy_.collective();
  if (hosts == nullptr) {
    if (n < 0) return Status::OK();
    if (!complete) return Internal(label() + "another replica failed this step");
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int q = 0; q < R; ++q) sum += slots[static_cast<size_t>(q)][static_cast<size_t>(j)];
      data[j] = sum;
    }
    return Status::OK();
  }
  if (r == 0) {
    // The all-reduce runs even when a local replica failed, so the other workers do not wait:
    // every worker makes the same calls in the same order.
    std::vector<double>& total = total_[parity];
    total.assign(len, 0.0);
    for (int q = 0; q < R; ++q)
      for (size_t j = 0; j < slots[static_cast<size_t>(q)].size() && j < len; ++j) total[j] += slots[static_cast<size_t>(q)][j];
    status_[parity] = len == 0 ? Status::OK() : hosts->AllReduceSum(total.data(), static_cast<int64_t>(len));
    if (status_[parity].ok() && !complete) status_[parity] = Internal(label() + "a replica of this worker failed this step");
  }
  strategy_.barrier();
  if (n < 0) return Status::OK();
  if (!status_[parity].ok()) return status_[parity];
  std::copy(total_[parity].begin(), total_[parity].end(), data);
  return Status::OK();
}

}  // namespace strata::distribute
