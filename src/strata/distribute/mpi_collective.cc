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
#include <mutex>
#include <thread>
#include <vector>

#include "strata/distribute/collective.h"

namespace strata::distribute {
namespace {

std::string MpiError(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(len));
}

// Ends the job when a collective exceeds its deadline (a hung peer would otherwise block
// every worker forever).
class Watchdog {
 public:
  Watchdog(int rank, double timeout) : rank_(rank), timeout_(timeout), thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Arm(const char* op) {
    std::lock_guard<std::mutex> lock(mu_);
    op_ = op;
    deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(timeout_));
    armed_ = true;
    cv_.notify_all();
  }
  void Disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !stop_ &&
          std::chrono::steady_clock::now() >= deadline_) {
        std::fprintf(stderr,
                     "strata: worker %d: %s did not complete within %.0f s: a peer worker died or hangs; stopping the job\n",
                     rank_, op_, timeout_);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 3);
        std::_Exit(3);
      }
    }
  }

  int rank_;
  double timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  const char* op_ = "";
  std::chrono::steady_clock::time_point deadline_;
  bool armed_ = false, stop_ = false;
  std::thread thread_;
};

class MpiWorld final : public Collective {
 public:
  MpiWorld(int rank, int size, double timeout, int64_t bucket_bytes, bool can_overlap, MPI_Comm grads)
      : rank_(rank), size_(size), bucket_bytes_(bucket_bytes), can_overlap_(can_overlap), grads_comm_(grads),
        watchdog_(rank, timeout) {}
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
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }

  bool can_overlap() const override { return can_overlap_; }
  int64_t bucket_bytes() const override { return bucket_bytes_; }

  Status StartAllReduceSum(float* data, int64_t n) override {
    if (!can_overlap_) return Unimplemented("all-reduce overlap: MPI was initialised below MPI_THREAD_SERIALIZED");
    if (n > (int64_t{1} << 30)) return InvalidArgument("all-reduce overlap: a bucket of " + std::to_string(n) + " floats");
    if (overlap_requests_.empty()) overlap_start_ = std::chrono::steady_clock::now();
    overlap_done_ = false;  // finished ones are MPI_REQUEST_NULL now: Testall/Waitall skip them
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, grads_comm_, &req);
    if (rc != MPI_SUCCESS) return Internal("MPI_Iallreduce (gradient bucket): " + MpiError(rc));
    overlap_requests_.push_back(req);  // capacity kept between steps: no allocation
    overlap_bytes_ += n * 4;
    return Status::OK();
  }

  Status Progress() override {
    if (overlap_requests_.empty() || overlap_done_) return Status::OK();
    int flag = 0;
    int rc = MPI_Testall(static_cast<int>(overlap_requests_.size()), overlap_requests_.data(), &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return Internal("MPI_Testall (gradient buckets): " + MpiError(rc));
    if (flag) {
      overlap_done_ = true;
      overlap_end_ = std::chrono::steady_clock::now();
    }
    return Status::OK();
  }

  Status WaitAll() override {
    if (overlap_requests_.empty()) return Status::OK();
    const auto wait_start = std::chrono::steady_clock::now();
    int rc = MPI_SUCCESS;
    if (!overlap_done_) {
      watchdog_.Arm("all-reduce");
      rc = MPI_Waitall(static_cast<int>(overlap_requests_.size()), overlap_requests_.data(), MPI_STATUSES_IGNORE);
      watchdog_.Disarm();
      overlap_end_ = std::chrono::steady_clock::now();
    }
    const auto now = std::chrono::steady_clock::now();
    overlap_requests_.clear();
    if (rc != MPI_SUCCESS) return Internal("MPI_Waitall (gradient buckets): " + MpiError(rc));
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.all_reduce_calls += 1;
    stats_.all_reduce_bytes += overlap_bytes_;
    stats_.all_reduce_seconds += std::chrono::duration<double>(overlap_end_ - overlap_start_).count();
    stats_.all_reduce_wait_seconds += std::chrono::duration<double>(now - wait_start).count();
    overlap_bytes_ = 0;
    return Status::OK();
  }

  Status Barrier() override {
    watchdog_.Arm("barrier");
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    watchdog_.Disarm();
    return rc == MPI_SUCCESS ? Status::OK() : Internal("MPI_Barrier: " + MpiError(rc));
  }

 private:
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
        if (!requests_.empty()) MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
        watchdog_.Disarm();
        return Internal(std::string("MPI_Iallreduce: ") + MpiError(rc));
      }
      requests_.push_back(req);
    }
    int rc = requests_.empty() ? MPI_SUCCESS
                               : MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    watchdog_.Disarm();
    if (rc != MPI_SUCCESS) return Internal(std::string("MPI_Waitall (all-reduce): ") + MpiError(rc));
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.all_reduce_calls += 1;
    stats_.all_reduce_bytes += n * elem;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats_.all_reduce_seconds += seconds;
    stats_.all_reduce_wait_seconds += seconds;
    return Status::OK();
  }

  int rank_, size_;
  int64_t bucket_bytes_;
  std::vector<MPI_Request> requests_;  // reused: no allocation per step
  bool can_overlap_;
  MPI_Comm grads_comm_;                       // the overlapped buckets' own channel
  std::vector<MPI_Request> overlap_requests_;  // started, not yet waited for
  std::chrono::steady_clock::time_point overlap_start_, overlap_end_;
  bool overlap_done_ = false;
  int64_t overlap_bytes_ = 0;
  mutable std::mutex stats_mu_;
  CollectiveStats stats_;
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
    int provided = 0;
    // SERIALIZED: replica 0 (a thread of its own) starts and waits for the gradient buckets,
    // the main thread makes the start-up and checkpoint collectives; never both at once.
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return Internal("MPI_Init_thread failed: " + MpiError(rc));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  if (const char* t = std::getenv("STRATA_COLLECTIVE_TIMEOUT")) options.timeout_seconds = std::atof(t);
  if (const char* b = std::getenv("STRATA_ALLREDUCE_BUCKET_BYTES")) options.bucket_bytes = std::atoll(b);
  if (options.bucket_bytes < 1024) options.bucket_bytes = 1024;
  int rank = 0, size = 1, level = MPI_THREAD_SINGLE;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Query_thread(&level);
  MPI_Comm grads = MPI_COMM_NULL;
  if (int rc = MPI_Comm_dup(MPI_COMM_WORLD, &grads); rc != MPI_SUCCESS) return Internal("MPI_Comm_dup: " + MpiError(rc));
  auto c = std::make_shared<MpiWorld>(rank, size, options.timeout_seconds > 0 ? options.timeout_seconds : 30,
                                      options.bucket_bytes, level >= MPI_THREAD_SERIALIZED, grads);
  existing = c;
  return std::shared_ptr<Collective>(c);
}

}  // namespace strata::distribute
