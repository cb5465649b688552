// Only the MPI C API: the deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <unistd.h>

#include "strata/core/clock.h"
#include "strata/core/dtype.h"
#include "strata/distribute/collective.h"
#include "strata/distribute/mpi_watchdog.h"

namespace strata::distribute {
namespace {

using mpi_internal::Heartbeats;
using mpi_internal::Watchdog;
using mpi_internal::WorkerName;

std::string MpiError(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(len));
}

// MPI_Waitall, or (yield_core) a wait that gives the core away. Open MPI's wait spins in its
// progress loop until the last request is done. Where ranks share a core (more ranks than
// cores), the spinning rank keeps the peer it waits for off the core until the scheduler's time
// slice ends, once per exchange round of the all-reduce; yielding between tests lets that peer
// run at once (docs/scaling.md, "Hosts sharing a core": the round's cost fell from 9.2 to 1.1 ms).
// It is not the default: where a rank has its core to itself but its input pipeline's threads
// share it, each yield hands the core to a decoding thread for a slice, and ResNet50's step on
// 2 hosts at 1 Gbit/s ran 9 % slower (bench/hosts_scaling.sh, 5 runs each way).
int AwaitAll(int n, MPI_Request* requests, bool yield_core) {
  if (n == 0) return MPI_SUCCESS;
  if (!yield_core) return MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
  for (;;) {
    int done = 0;
    const int rc = MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
    sched_yield();
  }
}

// The process's heartbeats, stopped by the atexit handler before MPI_Finalize.
std::mutex g_heartbeats_mu;
std::shared_ptr<Heartbeats> g_heartbeats;

void Bf16Sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const bf16* a = static_cast<const bf16*>(in);
  bf16* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = ToBF16(ToF32(a[i]) + ToF32(b[i]));
}

class MpiWorld final : public Collective {
 public:
  MpiWorld(int rank, int size, int64_t bucket_bytes, bool can_overlap, bool bf16_wire, bool yield_core, MPI_Comm grads,
           std::vector<WorkerName> names, double floor, double heartbeat_timeout, double launcher_grace,
           std::shared_ptr<Heartbeats> heartbeats)
      : rank_(rank), size_(size), bucket_bytes_(bucket_bytes), can_overlap_(can_overlap), bf16_wire_(bf16_wire),
        yield_core_(yield_core),
        grads_comm_(grads), heartbeats_(heartbeats),
        watchdog_(rank, std::move(names), floor, heartbeat_timeout, launcher_grace, std::move(heartbeats)) {
    if (bf16_wire_) MPI_Op_create(&Bf16Sum, /*commute=*/1, &bf16_sum_);
  }
  ~MpiWorld() override {
    if (heartbeats_) heartbeats_->Stop();
  }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }

  Status AllReduceSum(float* data, int64_t n) override { return AllReduce(data, n, MPI_FLOAT, "all-reduce"); }
  Status AllReduceSum(double* data, int64_t n) override { return AllReduce(data, n, MPI_DOUBLE, "all-reduce"); }

  Result<std::vector<std::string>> AllGather(const std::string& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(static_cast<size_t>(size_));
    watchdog_.Arm("all-gather");
    int rc = MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
      watchdog_.Disarm();
      return Internal("MPI_Allgather: " + MpiError(rc));
    }
    std::vector<int> displs(static_cast<size_t>(size_));
    int total = 0;
    for (int i = 0; i < size_; ++i) {
      displs[static_cast<size_t>(i)] = total;
      total += lens[static_cast<size_t>(i)];
    }
    std::string all(static_cast<size_t>(total), '\0');
    rc = MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, MPI_COMM_WORLD);
    watchdog_.Disarm();
    if (rc != MPI_SUCCESS) return Internal("MPI_Allgatherv: " + MpiError(rc));
    std::vector<std::string> out;
    for (int i = 0; i < size_; ++i)
      out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(i)]), static_cast<size_t>(lens[static_cast<size_t>(i)])));
    return out;
  }

  CollectiveStats stats() const override {
    CollectiveStats s;
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      s = stats_;
    }
    s.longest_wait_seconds = watchdog_.longest_wait();
    s.longest_deadline_seconds = watchdog_.longest_deadline();
    s.deadline_floor_seconds = watchdog_.floor();
    s.heartbeats = heartbeats_ != nullptr;
    s.bf16_wire = bf16_wire_;
    return s;
  }

  bool can_overlap() const override { return can_overlap_; }
  int64_t bucket_bytes() const override { return bucket_bytes_; }

  Status StartAllReduceSum(float* data, int64_t n) override {
    if (!can_overlap_) return Unimplemented("all-reduce overlap: MPI was initialised below MPI_THREAD_SERIALIZED");
    if (n > (int64_t{1} << 30)) return InvalidArgument("all-reduce overlap: a bucket of " + std::to_string(n) + " floats");
    if (overlap_requests_.empty()) {
      overlap_start_ = std::chrono::steady_clock::now();
      overlap_finished_ns_.clear();
      overlap_unfinished_ = 0;
    }
    MPI_Request req;
    int rc;
    if (bf16_wire_) {
      // The bucket goes out of a bf16 copy of its own (made at the first step, then reused; one
      // buffer per bucket, so a later bucket never moves one MPI still reads) and comes back
      // into `data` in WaitAll.
      const size_t k = staged_buckets_.size();
      if (staging_.size() <= k) staging_.resize(k + 1);
      if (staging_[k].size() < static_cast<size_t>(n)) staging_[k].resize(static_cast<size_t>(n));
      bf16* wire = staging_[k].data();
      for (int64_t i = 0; i < n; ++i) wire[i] = ToBF16(data[i]);
      staged_buckets_.push_back({data, n});
      rc = MPI_Iallreduce(MPI_IN_PLACE, wire, static_cast<int>(n), MPI_UINT16_T, bf16_sum_, grads_comm_, &req);
    } else {
      rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, grads_comm_, &req);
    }
    if (rc != MPI_SUCCESS) return Internal("MPI_Iallreduce (gradient bucket): " + MpiError(rc));
    overlap_requests_.push_back(req);  // capacity kept between steps: no allocation
    overlap_finished_ns_.push_back(0);
    ++overlap_unfinished_;
    overlap_bytes_ += n * 4;
    return Status::OK();
  }

  Status Progress() override {
    if (overlap_requests_.empty() || overlap_unfinished_ == 0) return Status::OK();
    int rc = StampFinished(/*wait=*/false);
    if (rc != MPI_SUCCESS) return Internal("MPI_Testsome (gradient buckets): " + MpiError(rc));
    return Status::OK();
  }

  const std::vector<int64_t>& finished_ns() const override { return overlap_finished_ns_; }

  Status WaitAll() override {
    if (overlap_requests_.empty()) return Status::OK();
    const auto wait_start = std::chrono::steady_clock::now();
    int rc = MPI_SUCCESS;
    if (overlap_unfinished_ != 0) {
      watchdog_.Arm("the gradient all-reduce");
      while (rc == MPI_SUCCESS && overlap_unfinished_ != 0) {
        rc = StampFinished(/*wait=*/!yield_core_);
        if (yield_core_ && overlap_unfinished_ != 0) sched_yield();  // AwaitAll's reason
      }
      watchdog_.Disarm();
    }
    overlap_requests_.clear();
    if (rc != MPI_SUCCESS) {
      staged_buckets_.clear();
      return Internal("waiting for the gradient buckets: " + MpiError(rc));
    }
    for (size_t k = 0; k < staged_buckets_.size(); ++k)
      for (int64_t i = 0; i < staged_buckets_[k].n; ++i) staged_buckets_[k].data[i] = ToF32(staging_[k][static_cast<size_t>(i)]);
    staged_buckets_.clear();
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.all_reduce_calls += 1;
    stats_.all_reduce_bytes += overlap_bytes_;
    stats_.wire_bytes += bf16_wire_ ? overlap_bytes_ / 2 : overlap_bytes_;
    stats_.all_reduce_seconds += std::chrono::duration<double>(overlap_end_ - overlap_start_).count();
    stats_.all_reduce_wait_seconds += std::chrono::duration<double>(now - wait_start).count();
    overlap_bytes_ = 0;
    return Status::OK();
  }

  Status Barrier() override {
    watchdog_.Arm("barrier");
    MPI_Request request;
    int rc = MPI_Ibarrier(MPI_COMM_WORLD, &request);
    if (rc == MPI_SUCCESS) rc = AwaitAll(1, &request, yield_core_);
    watchdog_.Disarm();
    return rc == MPI_SUCCESS ? Status::OK() : Internal("MPI barrier: " + MpiError(rc));
  }

 private:
  // Tests (or, `wait`, waits for at least one of) the started buckets and stamps each one found
  // finished with the time (finished ones are MPI_REQUEST_NULL from then on, which the next
  // test skips); sets overlap_end_ when none is left.
  int StampFinished(bool wait) {
    const int n = static_cast<int>(overlap_requests_.size());
    if (finished_index_.size() < static_cast<size_t>(n)) finished_index_.resize(static_cast<size_t>(n));
    int count = 0;
    const int rc = wait ? MPI_Waitsome(n, overlap_requests_.data(), &count, finished_index_.data(), MPI_STATUSES_IGNORE)
                        : MPI_Testsome(n, overlap_requests_.data(), &count, finished_index_.data(), MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    const int64_t now = NowNanos();
    if (count != MPI_UNDEFINED)
      for (int i = 0; i < count; ++i) {
        int64_t& at = overlap_finished_ns_[static_cast<size_t>(finished_index_[static_cast<size_t>(i)])];
        if (at == 0) --overlap_unfinished_;
        at = now;
      }
    if (count == MPI_UNDEFINED) overlap_unfinished_ = 0;  // every request was MPI_REQUEST_NULL already
    if (overlap_unfinished_ == 0) overlap_end_ = std::chrono::steady_clock::now();
    return MPI_SUCCESS;
  }

  Status AllReduce(void* data, int64_t n, MPI_Datatype type, const char* op) {
    // Buckets (MPI counts are int, and smaller messages pipeline): every bucket's
    // MPI_Iallreduce is posted, then all are awaited.
    const int64_t elem = type == MPI_FLOAT ? 4 : 8;
    const int64_t per_bucket = std::max<int64_t>(1, std::min<int64_t>(bucket_bytes_ / elem, int64_t{1} << 28));
    const auto start = std::chrono::steady_clock::now();
    requests_.clear();
    watchdog_.Arm(op);
    for (int64_t off = 0; off < n; off += per_bucket) {
      const int count = static_cast<int>(std::min(per_bucket, n - off));
      MPI_Request req;
      int rc = MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * elem, count, type, MPI_SUM, MPI_COMM_WORLD, &req);
      if (rc != MPI_SUCCESS) {
        AwaitAll(static_cast<int>(requests_.size()), requests_.data(), yield_core_);
        watchdog_.Disarm();
        return Internal(std::string("MPI_Iallreduce: ") + MpiError(rc));
      }
      requests_.push_back(req);
    }
    int rc = AwaitAll(static_cast<int>(requests_.size()), requests_.data(), yield_core_);
    watchdog_.Disarm();
    if (rc != MPI_SUCCESS) return Internal(std::string("waiting for the all-reduce: ") + MpiError(rc));
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.all_reduce_calls += 1;
    stats_.all_reduce_bytes += n * elem;
    stats_.wire_bytes += n * elem;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats_.all_reduce_seconds += seconds;
    stats_.all_reduce_wait_seconds += seconds;
    return Status::OK();
  }

  int rank_, size_;
  int64_t bucket_bytes_;
  std::vector<MPI_Request> requests_;  // reused: no allocation per step
  bool can_overlap_, bf16_wire_;
  bool yield_core_;  // MpiOptions::yield_core_while_waiting
  MPI_Op bf16_sum_ = MPI_OP_NULL;
  MPI_Comm grads_comm_;                       // the overlapped buckets' own channel
  // A bf16 wire: this step's buckets as sent, and where each comes back to.
  struct StagedBucket {
    float* data;
    int64_t n;
  };
  std::vector<std::vector<bf16>> staging_;  // [bucket of the step]: what goes on the wire
  std::vector<StagedBucket> staged_buckets_;
  std::vector<MPI_Request> overlap_requests_;  // started, not yet waited for
  std::vector<int64_t> overlap_finished_ns_;   // [started bucket]: when seen finished (0: not yet)
  std::vector<int> finished_index_;            // MPI_Testsome's output, reused
  int overlap_unfinished_ = 0;                 // started buckets not yet stamped
  std::chrono::steady_clock::time_point overlap_start_, overlap_end_;
  int64_t overlap_bytes_ = 0;
  mutable std::mutex stats_mu_;
  CollectiveStats stats_;
  std::shared_ptr<Heartbeats> heartbeats_;
  Watchdog watchdog_;
};

}  // namespace

bool LaunchedUnderMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

Result<std::shared_ptr<Collective>> MpiCollective(MpiOptions options) {
  static std::mutex mu;
  static std::weak_ptr<Collective> existing;
  std::lock_guard<std::mutex> lock(mu);
  if (auto c = existing.lock()) return c;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Open MPI's non-blocking all-reduce (libnbc) takes a binomial reduce then broadcast for an
    // in-place buffer or fewer than 4 ranks: the whole bucket crosses each link twice, one way
    // after the other (log2(p) times at the tree's root). The reduce-scatter + all-gather
    // (Rabenseifner) moves 2 (p - 1) / p of it, both ways at once: at 10 Mbit/s the reference
    // CNN's 1.87 MB took 3.0 s a step, and 1.8 s with it (docs/scaling.md). A setting of the
    // user's own wins; other MPI libraries ignore the variable.
    ::setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);
    int provided = 0;
    // MULTIPLE: the heartbeat thread talks to MPI while a collective waits. Replica 0 (a thread
    // of its own) starts and waits for the gradient buckets, the main thread makes the start-up
    // and checkpoint collectives; never both at once (SERIALIZED would do for them alone).
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return Internal("MPI_Init_thread failed: " + MpiError(rc));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::atexit([] {
      {
        std::lock_guard<std::mutex> lock(g_heartbeats_mu);
        if (g_heartbeats) g_heartbeats->Stop();  // no MPI call of that thread after MPI_Finalize
      }
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  if (const char* t = std::getenv("STRATA_COLLECTIVE_TIMEOUT")) options.timeout_seconds = std::atof(t);
  if (const char* t = std::getenv("STRATA_HEARTBEAT_TIMEOUT")) options.heartbeat_timeout_seconds = std::atof(t);
  if (const char* t = std::getenv("STRATA_LAUNCHER_GRACE")) options.launcher_grace_seconds = std::atof(t);
  if (const char* b = std::getenv("STRATA_ALLREDUCE_BUCKET_BYTES")) options.bucket_bytes = std::atoll(b);
  if (const char* w = std::getenv("STRATA_ALLREDUCE_WIRE")) {
    const std::string wire = w;
    if (wire != "bf16" && wire != "f32")
      return InvalidArgument("STRATA_ALLREDUCE_WIRE=" + wire + ": expected f32 (the default) or bf16");
    options.bf16_wire = wire == "bf16";
  }
  if (const char* w = std::getenv("STRATA_ALLREDUCE_WAIT")) {
    const std::string wait = w;
    if (wait != "spin" && wait != "yield")
      return InvalidArgument("STRATA_ALLREDUCE_WAIT=" + wait + ": expected spin (the default) or yield");
    options.yield_core_while_waiting = wait == "yield";
  }
  if (options.bucket_bytes < 1024) options.bucket_bytes = 1024;
  int rank = 0, size = 1, level = MPI_THREAD_SINGLE;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Query_thread(&level);
  MPI_Comm grads = MPI_COMM_NULL;
  if (int rc = MPI_Comm_dup(MPI_COMM_WORLD, &grads); rc != MPI_SUCCESS) return Internal("MPI_Comm_dup: " + MpiError(rc));
  // Every worker's host and pid, for the watchdog's messages.
  char host[MPI_MAX_PROCESSOR_NAME + 1] = {};
  int host_len = 0;
  MPI_Get_processor_name(host, &host_len);
  std::vector<char> hosts(static_cast<size_t>(size) * (MPI_MAX_PROCESSOR_NAME + 1), '\0');
  std::vector<long> pids(static_cast<size_t>(size), 0);
  long pid = static_cast<long>(::getpid());
  if (int rc = MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME + 1, MPI_CHAR, hosts.data(), MPI_MAX_PROCESSOR_NAME + 1, MPI_CHAR,
                             MPI_COMM_WORLD);
      rc != MPI_SUCCESS)
    return Internal("MPI_Allgather (host names): " + MpiError(rc));
  if (int rc = MPI_Allgather(&pid, 1, MPI_LONG, pids.data(), 1, MPI_LONG, MPI_COMM_WORLD); rc != MPI_SUCCESS)
    return Internal("MPI_Allgather (pids): " + MpiError(rc));
  std::vector<WorkerName> names(static_cast<size_t>(size));
  for (int w = 0; w < size; ++w) {
    names[static_cast<size_t>(w)].host = std::string(hosts.data() + static_cast<size_t>(w) * (MPI_MAX_PROCESSOR_NAME + 1));
    names[static_cast<size_t>(w)].pid = pids[static_cast<size_t>(w)];
  }
  std::shared_ptr<Heartbeats> heartbeats;
  if (level >= MPI_THREAD_MULTIPLE && options.heartbeat_timeout_seconds > 0 && size > 1) {
    MPI_Comm beats = MPI_COMM_NULL;
    if (int rc = MPI_Comm_dup(MPI_COMM_WORLD, &beats); rc != MPI_SUCCESS) return Internal("MPI_Comm_dup: " + MpiError(rc));
    heartbeats = std::make_shared<Heartbeats>(rank, size, beats);
    std::lock_guard<std::mutex> hb_lock(g_heartbeats_mu);
    g_heartbeats = heartbeats;
  }
  auto c = std::make_shared<MpiWorld>(rank, size, options.bucket_bytes, level >= MPI_THREAD_SERIALIZED, options.bf16_wire,
                                      options.yield_core_while_waiting, grads,
                                      std::move(names),
                                      options.timeout_seconds > 0 ? options.timeout_seconds : 30,
                                      options.heartbeat_timeout_seconds, options.launcher_grace_seconds, std::move(heartbeats));
  existing = c;
  return std::shared_ptr<Collective>(c);
}

}  // namespace strata::distribute
