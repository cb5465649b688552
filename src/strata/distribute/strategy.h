// Strategy: synchronous data parallelism, tf.distribute in C++.
//
// A replica is a core: each replica is a pinned thread that runs the compiled step on its
// shard of every global batch. After the backward pass the replicas meet at a barrier,
// reduce-scatter the gradients (replica r sums slice r of every replica's gradient block,
// in a fixed order, so results do not depend on thread timing), each updates its own slice
// of the weights (the sharded weight update TPUs do), and meet again.
//
//   auto strategy = distribute::MirroredStrategy();           // one replica per usable core
//   {
//     auto scope = strategy->scope();                         // models compiled here use it
//     model = keras::Sequential(...);
//     model->compile(...);
//   }
//   model->fit(train, {.epochs = 10});   // global batch = per-replica batch x replicas
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <barrier>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strata/core/status.h"
#include "strata/distribute/collective.h"

namespace strata::distribute {
class ClusterResolver;
}

namespace strata::distribute {

enum class ReduceOp { kSum, kMean };

// One value per local replica (tf.distribute's PerReplica), indexed by replica.
template <typename T>
struct PerReplica {
  std::vector<T> values;
  const T& operator[](int replica) const { return values[static_cast<size_t>(replica)]; }
  size_t size() const { return values.size(); }
};

class Strategy {
 public:
  virtual ~Strategy();
  // Replicas in all workers together: the global batch is per-replica batch x this.
  int num_replicas_in_sync() const { return replicas_ * num_workers(); }
  // Replicas (threads) in this process.
  int num_local_replicas() const { return replicas_; }
  int num_workers() const { return collective_ ? collective_->world_size() : 1; }
  int worker_index() const { return collective_ ? collective_->rank() : 0; }
  // The cross-host collective (MultiWorkerMirroredStrategy), or null.
  Collective* collective() const { return collective_.get(); }
  const std::string& name() const { return name_; }

  // Runs fn(replica) once on every replica thread and waits for all. Inside, fn may call
  // barrier(). The first error (lowest replica) is returned.
  Status run(const std::function<Status(int replica)>& fn);
  // strategy.run(fn, args=(per_replica_inputs,)): fn(replica, its input) on every replica.
  template <typename T>
  Status run(const std::function<Status(int replica, const T& input)>& fn, const PerReplica<T>& inputs) {
    if (static_cast<int>(inputs.size()) != replicas_)
      return InvalidArgument("Strategy::run: " + std::to_string(inputs.size()) + " per-replica inputs for " +
                             std::to_string(replicas_) + " replicas");
    return run([&](int r) { return fn(r, inputs[r]); });
  }
  // All replicas wait here until every one has arrived (only inside run()).
  void barrier();

  // Reduces one value per replica.
  static double reduce(ReduceOp op, const std::vector<double>& per_replica);
  // Over every replica of every worker: this worker's values, then an all-reduce.
  Result<double> reduce(ReduceOp op, const PerReplica<double>& per_replica) const;
  // The slice [begin, end) of an n-element buffer that replica r reduces and updates.
  std::pair<int64_t, int64_t> Slice(int64_t n, int replica) const;
  // out[i] = op over r of inputs[r][i] for i in this replica's slice, summed in replica
  // order (deterministic). `out` may alias inputs[0].
  void ReduceScatter(const std::vector<const float*>& inputs, float* out, int64_t n, int replica, ReduceOp op) const;
  // The same for elements [begin, end): the one summation every in-host gradient reduction
  // uses, so the overlapped all-reduce's buckets get the reduce-scatter's exact bits.
  static void ReduceRange(const std::vector<const float*>& inputs, float* out, int64_t begin, int64_t end,
                          ReduceOp op);

  // Across workers: every worker's `mine` must equal worker 0's (model, batch, replicas...),
  // else an error naming the workers that differ and what each has. OK for one worker.
  Status CheckWorkersAgree(const std::string& what, const std::string& mine) const;

  // While a Scope lives, models compiled on this thread use this strategy.
  class Scope {
   public:
    explicit Scope(Strategy* s);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Strategy* previous_;
  };
  Scope scope() { return Scope(this); }
  // The strategy of the innermost live Scope on this thread, or null.
  static Strategy* Current();

 protected:
  // Replica r is pinned to usable core (first_core + r) mod cores.
  Strategy(std::string name, int replicas, bool pin, std::shared_ptr<Collective> collective = nullptr, int first_core = 0);

 private:
  void Worker(int replica);

  std::string name_;
  int replicas_;
  bool pin_;
  int first_core_;
  std::vector<std::thread> threads_;
  std::barrier<> barrier_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<Status(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  std::vector<Status> results_;
  std::shared_ptr<Collective> collective_;
};

// One replica on the calling process's first usable core.
std::unique_ptr<Strategy> OneDeviceStrategy();
// `replicas` replicas (0: one per usable core), each a thread pinned to a usable core
// (replicas beyond the core count share cores: fine for tests, slow for training).
Result<std::unique_ptr<Strategy>> MirroredStrategy(int replicas = 0);
// Mirrored replicas in every worker process of an MPI job (mpirun -np N / srun), gradients
// all-reduced across workers after the in-host reduction. Outside an MPI launch it is a
// MirroredStrategy with one worker. Resolves the cluster from the environment, connects and
// checks that every worker runs the same number of replicas (see cluster_resolver.h).
Result<std::unique_ptr<Strategy>> MultiWorkerMirroredStrategy(int replicas_per_worker = 0);
// The same on a resolver the caller made (and may have connected and initialized).
Result<std::unique_ptr<Strategy>> MultiWorkerMirroredStrategy(ClusterResolver& resolver);

}  // namespace strata::distribute

#pragma GCC visibility pop
