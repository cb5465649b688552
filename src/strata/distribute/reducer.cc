#include "strata/distribute/reducer.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "strata/core/clock.h"

namespace strata::distribute {

void DivideByWorkers(const Strategy& strategy, float* data, int64_t n) {
  const float workers = static_cast<float>(strategy.num_workers());
  for (int64_t i = 0; i < n; ++i) data[i] /= workers;
}

Status MeanOverWorkers(Strategy& strategy, float* data, int64_t n) {
  Collective* hosts = strategy.collective();
  if (hosts == nullptr || n == 0) return Status::OK();
  STRATA_RETURN_IF_ERROR(hosts->AllReduceSum(data, n));
  DivideByWorkers(strategy, data, n);
  return Status::OK();
}

Status MeanOverReplicas(Strategy& strategy, const std::vector<const float*>& inputs, float* out, int64_t n) {
  const size_t replicas = inputs.size();
  for (int64_t i = 0; i < n; ++i) {
    float sum = inputs[0][i];
    for (size_t q = 1; q < replicas; ++q) sum += inputs[q][i];
    out[i] = sum / static_cast<float>(replicas);
  }
  return MeanOverWorkers(strategy, out, n);
}

namespace {

std::vector<const float*> Inputs(const std::vector<float*>& grads) { return {grads.begin(), grads.end()}; }

// After the backward pass: the reduce-scatter over the local replicas, then (several workers)
// replica 0 all-reduces the host mean while the others wait at a barrier.
class PlainReducer final : public Reducer {
 public:
  PlainReducer(Strategy& strategy, ReducerOptions o) : strategy_(strategy), o_(std::move(o)), inputs_(Inputs(o_.grads)) {}

  Status Reduce(int r, StepSync& sync) override {
    strategy_.barrier();  // every replica's backward pass (and failure flag) is in
    if (!sync.failed && inputs_.size() > 1)
      strategy_.ReduceScatter(inputs_, o_.grads[0], o_.n, r, ReduceOp::kMean);
    if (strategy_.collective() == nullptr) return Status::OK();
    strategy_.barrier();
    if (r == 0 && !sync.failed) {
      sync.cross_host = MeanOverWorkers(strategy_, o_.grads[0], o_.n);
      if (!sync.cross_host.ok()) sync.failed = true;
    }
    strategy_.barrier();
    return Status::OK();
  }

 private:
  Strategy& strategy_;
  ReducerOptions o_;
  std::vector<const float*> inputs_;
};

// The cross-host all-reduce overlapped with the backward pass. The block is cut into buckets
// (at most the collective's bucket_bytes) in the order the backward pass finishes them (the
// last layers first, which sit at the end of the block). After the kernel that finishes a
// bucket each replica counts itself in; the last replica to arrive averages the bucket over
// the replicas (Strategy::ReduceRange: the reduce-scatter's sums) and marks it reduced.
// Replica 0, the only thread that talks to MPI, starts every reduced bucket's all-reduce in
// bucket order after each of its kernels (the same order on every worker) and lets MPI
// progress; after the backward pass it starts the rest, waits for all and divides by the
// worker count. No replica waits for another inside the backward pass, so there is no
// barrier to deadlock on; replica 0 resets the counters while the others wait at the barrier
// that ends the step's reduction.
class BucketedReducer final : public Reducer {
 public:
  struct Bucket {
    int64_t begin, end;  // elements of the block
    int kernel;          // final after this kernel of every replica's program (-1: before the first)
  };

  BucketedReducer(Strategy& strategy, ReducerOptions o, std::vector<Bucket> buckets)
      : strategy_(strategy), o_(std::move(o)), inputs_(Inputs(o_.grads)), buckets_(std::move(buckets)) {
    first_.assign(static_cast<size_t>(o_.kernels) + 2, 0);
    for (int j = 0; j < o_.kernels + 2; ++j)
      first_[static_cast<size_t>(j)] = static_cast<int>(
          std::lower_bound(buckets_.begin(), buckets_.end(), j - 1, [](const Bucket& b, int k) { return b.kernel < k; }) -
          buckets_.begin());
    arrived_ = std::make_unique<std::atomic<int>[]>(buckets_.size());
    reduced_ = std::make_unique<std::atomic<bool>[]>(buckets_.size());
    stats_.buckets.resize(buckets_.size());
    timing_.buckets.resize(buckets_.size());
    for (size_t b = 0; b < buckets_.size(); ++b)
      timing_.buckets[b].bytes = stats_.buckets[b].bytes = (buckets_[b].end - buckets_[b].begin) * 4;
    ResetCounters();
  }

  // Replica 0 is called after every kernel (it starts buckets and lets MPI progress); the
  // others only after the kernels that finish a bucket.
  std::vector<uint8_t> HookPoints(int r) const override {
    std::vector<uint8_t> after(static_cast<size_t>(o_.kernels) + 1, 0);
    for (int k = -1; k < o_.kernels; ++k)
      after[static_cast<size_t>(k + 1)] = r == 0 || first_[static_cast<size_t>(k + 1)] < first_[static_cast<size_t>(k + 2)];
    return after;
  }

  Status AfterKernel(int r, int k) override {
    if (r == 0 && k == -1) timing_.start_ns = NowNanos();
    const int R = static_cast<int>(inputs_.size());
    for (int b = first_[static_cast<size_t>(k + 1)]; b < first_[static_cast<size_t>(k + 2)]; ++b) {
      if (arrived_[b].fetch_add(1, std::memory_order_acq_rel) + 1 != R) continue;
      // The last replica here: every replica's gradient for the bucket is final.
      if (R > 1) {
        const Bucket& bk = buckets_[static_cast<size_t>(b)];
        Strategy::ReduceRange(inputs_, o_.grads[0], bk.begin, bk.end, ReduceOp::kMean);
      }
      timing_.buckets[static_cast<size_t>(b)].ready_ns = NowNanos();  // this thread's entry alone: one last arrival
      reduced_[b].store(true, std::memory_order_release);
    }
    return r == 0 ? StartReadyBuckets(/*during_backward=*/true) : Status::OK();
  }

  Status Reduce(int r, StepSync& sync) override {
    strategy_.barrier();
    if (r == 0) {
      timing_.backward_end_ns = NowNanos();
      Status started = sync.failed ? Status::OK() : StartReadyBuckets(/*during_backward=*/false);
      if (started.ok() && !sync.failed && next_start_ != buckets_.size())
        started = Internal("gradient bucket " + std::to_string(next_start_) + " of " + std::to_string(buckets_.size()) +
                           " was not reduced by every replica");
      Status waited = strategy_.collective()->WaitAll();  // what was started is always finished
      timing_.wait_end_ns = NowNanos();
      const std::vector<int64_t>& finished = strategy_.collective()->finished_ns();
      for (size_t b = 0; b < timing_.buckets.size(); ++b)
        timing_.buckets[b].finish_ns = b < finished.size() ? finished[b] : 0;
      sync.cross_host = started.ok() ? waited : started;
      if (!sync.cross_host.ok()) sync.failed = true;
      if (!sync.failed) {
        DivideByWorkers(strategy_, o_.grads[0], o_.n);
        stats_.steps += 1;
        stats_.backward_end_seconds += Seconds(timing_.backward_end_ns);
        stats_.wait_end_seconds += Seconds(timing_.wait_end_ns);
        for (size_t b = 0; b < buckets_.size(); ++b) {
          stats_.buckets[b].ready_seconds += Seconds(timing_.buckets[b].ready_ns);
          stats_.buckets[b].start_seconds += Seconds(timing_.buckets[b].start_ns);
          stats_.buckets[b].finish_seconds += Seconds(timing_.buckets[b].finish_ns);
        }
      }
      ResetCounters();
    }
    strategy_.barrier();
    return Status::OK();
  }

  ReducerStats stats() const override { return stats_; }
  const StepTiming* last_step() const override { return stats_.steps > 0 ? &timing_ : nullptr; }

 private:
  // A moment of this step's timeline in seconds from the step's start (0 where it is unknown).
  double Seconds(int64_t ns) const { return ns == 0 ? 0 : static_cast<double>(ns - timing_.start_ns) * 1e-9; }

  // Replica 0: starts the all-reduce of every in-host-reduced bucket not yet started, in order.
  Status StartReadyBuckets(bool during_backward) {
    Collective* hosts = strategy_.collective();
    while (next_start_ < buckets_.size() && reduced_[next_start_].load(std::memory_order_acquire)) {
      const Bucket& b = buckets_[next_start_];
      STRATA_RETURN_IF_ERROR(hosts->StartAllReduceSum(o_.grads[0] + b.begin, b.end - b.begin));
      timing_.buckets[next_start_].start_ns = NowNanos();
      (during_backward ? stats_.started_during_backward : stats_.started_after_backward) += 1;
      ++next_start_;
    }
    return hosts->Progress();
  }

  void ResetCounters() {
    for (size_t b = 0; b < buckets_.size(); ++b) {
      arrived_[b].store(0, std::memory_order_relaxed);
      reduced_[b].store(false, std::memory_order_relaxed);
    }
    next_start_ = 0;
  }

  Strategy& strategy_;
  ReducerOptions o_;
  std::vector<const float*> inputs_;
  std::vector<Bucket> buckets_;                  // in start order: by kernel
  std::vector<int> first_;                       // [kernels + 2]: buckets of kernel k are [first[k+1], first[k+2])
  std::unique_ptr<std::atomic<int>[]> arrived_;  // [buckets]: replicas past the bucket's kernel, this step
  std::unique_ptr<std::atomic<bool>[]> reduced_; // [buckets]: averaged in-host, may start
  size_t next_start_ = 0;                        // replica 0: buckets started this step
  ReducerStats stats_;                           // written by replica 0 only
  StepTiming timing_;                            // this step's (ready: the last replica to arrive; the rest: replica 0)
};

// The buckets of a block whose parts become final as `ready` says; empty when the ranges
// overlap or leave the block (not a layout to cut).
std::vector<BucketedReducer::Bucket> CutBuckets(std::vector<GradientRange> ready, int64_t n, int64_t cap) {
  using Bucket = BucketedReducer::Bucket;
  // Parts of the block no kernel writes (a variable without a gradient) are ready at once.
  std::sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  std::vector<GradientRange> all;
  int64_t cursor = 0;
  for (const auto& g : ready) {
    if (g.begin < cursor || g.end > n) return {};
    if (g.begin > cursor) all.push_back({cursor, g.begin, -1});
    all.push_back(g);
    cursor = g.end;
  }
  if (cursor < n) all.push_back({cursor, n, -1});
  // Start order: by the kernel that finishes them, then from the end of the block.
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.kernel != b.kernel ? a.kernel < b.kernel : a.begin > b.begin; });
  std::vector<Bucket> buckets;
  for (const auto& g : all) {
    for (int64_t end = g.end; end > g.begin;) {
      const int64_t begin = std::max(g.begin, end - cap);
      Bucket* last = buckets.empty() ? nullptr : &buckets.back();
      if (last && last->begin == end && last->end - begin <= cap) {
        last->begin = begin;  // grows down the block, as the backward pass goes
        last->kernel = std::max(last->kernel, g.kernel);
      } else if (last && last->end == begin && end - last->begin <= cap) {
        last->end = end;  // a layer's bias finished after its kernel: just above
        last->kernel = std::max(last->kernel, g.kernel);
      } else {
        buckets.push_back({begin, end, g.kernel});
      }
      end = begin;
    }
  }
  return buckets;
}

}  // namespace

std::unique_ptr<Reducer> MakeReducer(Strategy& strategy, ReducerOptions options) {
  Collective* hosts = strategy.collective();
  const char* env = std::getenv("STRATA_ALLREDUCE_OVERLAP");
  const bool overlap = hosts && hosts->can_overlap() && !(env && std::string(env) == "0");
  if (overlap && !options.ready.empty() && options.n > 0) {
    const int64_t cap = std::max<int64_t>(16, hosts->bucket_bytes() / 4);
    auto buckets = CutBuckets(options.ready, options.n, cap);
    if (!buckets.empty()) return std::make_unique<BucketedReducer>(strategy, std::move(options), std::move(buckets));
  }
  return std::make_unique<PlainReducer>(strategy, std::move(options));
}

}  // namespace strata::distribute
