// Only the MPI C API: the deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

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
  MpiWorld(int rank, int size, double timeout) : rank_(rank), size_(size), watchdog_(rank, timeout) {}
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

  Status Barrier() override {
    watchdog_.Arm("barrier");
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    watchdog_.Disarm();
    return rc == MPI_SUCCESS ? Status::OK() : Internal("MPI_Barrier: " + MpiError(rc));
  }

 private:
  Status AllReduce(void* data, int64_t n, MPI_Datatype type, const char* op) {
    // MPI counts are int: large blocks go in chunks.
    constexpr int64_t kChunk = int64_t{1} << 28;
    const size_t elem = type == MPI_FLOAT ? 4 : 8;
    for (int64_t off = 0; off < n; off += kChunk) {
      const int count = static_cast<int>(std::min(kChunk, n - off));
      watchdog_.Arm(op);
      int rc = MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * static_cast<int64_t>(elem), count, type, MPI_SUM,
                             MPI_COMM_WORLD);
      watchdog_.Disarm();
      if (rc != MPI_SUCCESS) return Internal(std::string("MPI_Allreduce: ") + MpiError(rc));
    }
    return Status::OK();
  }

  int rank_, size_;
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
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return Internal("MPI_Init_thread failed: " + MpiError(rc));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  if (const char* t = std::getenv("STRATA_COLLECTIVE_TIMEOUT")) options.timeout_seconds = std::atof(t);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto c = std::make_shared<MpiWorld>(rank, size, options.timeout_seconds > 0 ? options.timeout_seconds : 30);
  existing = c;
  return std::shared_ptr<Collective>(c);
}

}  // namespace strata::distribute
