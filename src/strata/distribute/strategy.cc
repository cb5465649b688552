#include "strata/distribute/strategy.h"

#include <pthread.h>
#include <sched.h>

#include <unordered_map>

#include "strata/core/cpu.h"
#include "strata/distribute/cluster_resolver.h"

namespace strata::distribute {
namespace {
thread_local Strategy* g_current = nullptr;
// The strategy whose replica thread this is (null on other threads): run() from inside one of
// its own replicas would wait for itself forever (a model step inside a per-replica function).
thread_local const Strategy* g_replica_of = nullptr;

// run() has one job slot, so it serves one caller at a time: each strategy's callers queue on
// its own mutex (two Python threads, or two models sharing a strategy, may call it at once).
// Kept here, keyed by strategy, so that the installed strategy.h keeps its layout.
std::mutex g_run_mutexes_mu;
std::unordered_map<const Strategy*, std::unique_ptr<std::mutex>>& RunMutexes() {
  static auto* mutexes = new std::unordered_map<const Strategy*, std::unique_ptr<std::mutex>>();
  return *mutexes;
}
std::mutex& RunMutex(const Strategy* s) {
  std::lock_guard<std::mutex> lock(g_run_mutexes_mu);
  std::unique_ptr<std::mutex>& m = RunMutexes()[s];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}
}  // namespace

Strategy::Strategy(std::string name, int replicas, bool pin, std::shared_ptr<Collective> collective, int first_core)
    : name_(std::move(name)), replicas_(replicas), pin_(pin), first_core_(first_core), barrier_(replicas), results_(replicas),
      collective_(std::move(collective)) {
  threads_.reserve(replicas);
  for (int r = 0; r < replicas; ++r) threads_.emplace_back([this, r] { Worker(r); });
}

Strategy::~Strategy() {
  {
    std::lock_guard<std::mutex> lock(g_run_mutexes_mu);
    RunMutexes().erase(this);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void Strategy::Worker(int replica) {
  char name[16];
  std::snprintf(name, sizeof(name), "replica-%d", replica);
  pthread_setname_np(pthread_self(), name);
  g_replica_of = this;
  if (pin_) {
    std::vector<int> cpus = UsableCpuList();
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[static_cast<size_t>(first_core_ + replica) % cpus.size()], &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  uint64_t seen = 0;
  for (;;) {
    const std::function<Status(int)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
    }
    Status s = (*job)(replica);
    {
      std::lock_guard<std::mutex> lock(mu_);
      results_[replica] = std::move(s);
      if (--pending_ == 0) cv_.notify_all();
    }
  }
}

Status Strategy::run(const std::function<Status(int)>& fn) {
  if (g_replica_of == this)
    return InvalidArgument("Strategy::run called from inside one of " + name_ +
                           "'s own replicas (a model step inside a per-replica function?): the replicas "
                           "would wait for themselves; run the model step outside, it splits its batch itself");
  std::lock_guard<std::mutex> one_caller(RunMutex(this));
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    pending_ = replicas_;
    ++generation_;
  }
  cv_.notify_all();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_ == 0; });
  for (int r = 0; r < replicas_; ++r)
    if (!results_[r].ok()) return results_[r].WithContext("replica " + std::to_string(r));
  return Status::OK();
}

void Strategy::barrier() { barrier_.arrive_and_wait(); }

double Strategy::reduce(ReduceOp op, const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return op == ReduceOp::kMean && !v.empty() ? s / static_cast<double>(v.size()) : s;
}

Result<double> Strategy::reduce(ReduceOp op, const PerReplica<double>& v) const {
  double sum[2] = {reduce(ReduceOp::kSum, v.values), static_cast<double>(v.size())};
  if (collective_ && collective_->world_size() > 1) STRATA_RETURN_IF_ERROR(collective_->AllReduceSum(sum, 2));
  return op == ReduceOp::kMean && sum[1] > 0 ? sum[0] / sum[1] : sum[0];
}

std::pair<int64_t, int64_t> Strategy::Slice(int64_t n, int replica) const {
  // Slices start on 16-float (64-byte) boundaries so replicas never share a cache line.
  const int64_t chunk = ((n + replicas_ - 1) / replicas_ + 15) / 16 * 16;
  const int64_t begin = std::min<int64_t>(n, chunk * replica);
  return {begin, std::min<int64_t>(n, begin + chunk)};
}

void Strategy::ReduceScatter(const std::vector<const float*>& inputs, float* out, int64_t n, int replica,
                             ReduceOp op) const {
  auto [begin, end] = Slice(n, replica);
  ReduceRange(inputs, out, begin, end, op);
}

void Strategy::ReduceRange(const std::vector<const float*>& inputs, float* out, int64_t begin, int64_t end,
                           ReduceOp op) {
  const float scale = op == ReduceOp::kMean ? 1.0f / static_cast<float>(inputs.size()) : 1.0f;
  for (int64_t i = begin; i < end; ++i) {
    float s = inputs[0][i];
    for (size_t r = 1; r < inputs.size(); ++r) s += inputs[r][i];
    out[i] = s * scale;
  }
}

Status Strategy::CheckWorkersAgree(const std::string& what, const std::string& mine) const {
  if (!collective_ || collective_->world_size() < 2) return Status::OK();
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> all, collective_->AllGather(mine));
  std::string differ;
  for (size_t i = 1; i < all.size(); ++i)
    if (all[i] != all[0]) differ += "; worker " + std::to_string(i) + " has " + all[i];
  if (differ.empty()) return Status::OK();
  return InvalidArgument("workers disagree on " + what + ": worker 0 has " + all[0] + differ +
                         " (every worker must run the same configuration)");
}

Strategy::Scope::Scope(Strategy* s) : previous_(g_current) { g_current = s; }
Strategy::Scope::~Scope() { g_current = previous_; }
Strategy* Strategy::Current() { return g_current; }

namespace {
class LocalStrategy final : public Strategy {
 public:
  LocalStrategy(std::string name, int replicas, bool pin, std::shared_ptr<Collective> c = nullptr, int first_core = 0)
      : Strategy(std::move(name), replicas, pin, std::move(c), first_core) {}
};
}  // namespace

std::unique_ptr<Strategy> OneDeviceStrategy() {
  return std::make_unique<LocalStrategy>("OneDeviceStrategy", 1, /*pin=*/false);
}

Result<std::unique_ptr<Strategy>> MirroredStrategy(int replicas) {
  if (replicas < 0) return InvalidArgument("MirroredStrategy: replicas must be >= 0 (0: one per usable core)");
  if (replicas == 0) replicas = UsableCores();
  return std::unique_ptr<Strategy>(new LocalStrategy("MirroredStrategy", replicas, /*pin=*/true));
}

}  // namespace strata::distribute

namespace strata::distribute {

Result<std::unique_ptr<Strategy>> MultiWorkerMirroredStrategy(int replicas) {
  if (replicas < 0) return InvalidArgument("MultiWorkerMirroredStrategy: replicas must be >= 0 (0: one per usable core)");
  STRATA_ASSIGN_OR_RETURN(ClusterResolver resolver, ClusterResolver::FromEnvironment({.replicas = replicas}));
  return MultiWorkerMirroredStrategy(resolver);
}

Result<std::unique_ptr<Strategy>> MultiWorkerMirroredStrategy(ClusterResolver& resolver) {
  STRATA_RETURN_IF_ERROR(resolver.initialize());  // connects first; replicas agree
  const int replicas = resolver.replicas_per_worker();
  if (!resolver.collective()) return std::unique_ptr<Strategy>(new LocalStrategy("MirroredStrategy", replicas, true));
  // Workers sharing a host take consecutive cores (mpirun --bind-to none shows every worker
  // all of them; with a per-worker binding the offset wraps within the worker's own cores).
  const int first_core = resolver.environment().local_worker_index * replicas;
  return std::unique_ptr<Strategy>(
      new LocalStrategy("MultiWorkerMirroredStrategy", replicas, true, resolver.collective(), first_core));
}

}  // namespace strata::distribute
