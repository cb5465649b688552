// Liveness and deadlines of Strata's MPI collectives (mpi_collective.cc): every worker's
// heartbeat thread (Heartbeats) and the watchdog that ends a job whose collective cannot finish,
// naming the worker that stopped answering (Watchdog). docs/distribute.md states the bounds.
// Internal to distribute/; included by mpi_collective.cc only.
#pragma once

// Only the MPI C API: the deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

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

namespace strata::distribute::mpi_internal {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Who a worker is, for messages: "worker 1 (node2, pid 4242)".
struct WorkerName {
  std::string host;
  long pid = 0;
};

// Liveness from the peers themselves: a thread of its own sends every peer a tiny message
// every second on a communicator of its own and records when it last heard from each. A
// worker that is alive but slow (a loaded host, a long kernel, a slow disk) keeps answering,
// because the thread needs a few microseconds of CPU a second; a worker that is stopped
// (SIGSTOP, a hung host, a network partition) or dead goes silent. Needs MPI_THREAD_MULTIPLE
// (this thread calls MPI while replica 0 or the main thread waits in a collective).
// Each heartbeat carries the sender's state: how many collectives it has entered and whether
// it waits in one now, so a peer can tell a worker still computing (slow) from a job where
// every worker waits in a collective that never completes (a deadlock).
class Heartbeats {
 public:
  static constexpr int kTag = 7;
  static constexpr double kPeriodSeconds = 1.0;

  Heartbeats(int rank, int size, MPI_Comm comm)
      : rank_(rank), size_(size), comm_(comm), last_heard_(std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(size))),
        state_(std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(size))), out_(static_cast<size_t>(size), 0),
        sends_(static_cast<size_t>(size), MPI_REQUEST_NULL) {
    const int64_t now = Clock::now().time_since_epoch().count();
    for (int p = 0; p < size; ++p) {
      last_heard_[p].store(now, std::memory_order_relaxed);
      state_[p].store(0, std::memory_order_relaxed);
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~Heartbeats() { Stop(); }

  // Before MPI_Finalize (idempotent).
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // This worker's state, sent with every heartbeat: collectives entered, and waiting in one now.
  void SetState(int64_t collectives, bool waiting) { mine_.store(collectives * 2 + (waiting ? 1 : 0), std::memory_order_relaxed); }
  // Whether `peer` said, in a heartbeat that arrived after `since`, that it waits in a
  // collective (an older one may tell of the collective before), and in its how-manieth.
  bool PeerWaitsSince(int peer, Clock::time_point since) const {
    const Clock::time_point last{Clock::duration(last_heard_[peer].load(std::memory_order_relaxed))};
    return last > since && (state_[peer].load(std::memory_order_relaxed) & 1) != 0;
  }
  int64_t PeerCollectives(int peer) const { return state_[peer].load(std::memory_order_relaxed) / 2; }

  // Seconds since `peer` was last heard from.
  double Silence(int peer) const {
    const Clock::time_point last{Clock::duration(last_heard_[peer].load(std::memory_order_relaxed))};
    return Seconds(Clock::now() - last);
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        int done = 1;
        // A send still pending (a peer that reads nothing) is not repeated: one in flight each.
        if (sends_[static_cast<size_t>(p)] != MPI_REQUEST_NULL) MPI_Test(&sends_[static_cast<size_t>(p)], &done, MPI_STATUS_IGNORE);
        if (!done) continue;
        out_[static_cast<size_t>(p)] = mine_.load(std::memory_order_relaxed);
        MPI_Isend(&out_[static_cast<size_t>(p)], 1, MPI_LONG_LONG, p, kTag, comm_, &sends_[static_cast<size_t>(p)]);
      }
      for (;;) {  // everything that arrived since the last round
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, kTag, comm_, &flag, &st) != MPI_SUCCESS || !flag) break;
        long long beat = 0;
        if (MPI_Recv(&beat, 1, MPI_LONG_LONG, st.MPI_SOURCE, kTag, comm_, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < size_) {
          state_[st.MPI_SOURCE].store(beat, std::memory_order_relaxed);
          last_heard_[st.MPI_SOURCE].store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
        }
      }
      lock.lock();
      cv_.wait_for(lock, std::chrono::duration<double>(kPeriodSeconds), [this] { return stop_; });
    }
    lock.unlock();
    // Sends a peer never read (it finished first) complete in the background or die with MPI.
    for (MPI_Request& r : sends_)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }

  int rank_, size_;
  MPI_Comm comm_;
  std::unique_ptr<std::atomic<int64_t>[]> last_heard_;  // steady_clock ticks
  std::unique_ptr<std::atomic<int64_t>[]> state_;       // each peer's last state (SetState's encoding)
  std::atomic<int64_t> mine_{0};
  std::vector<long long> out_;                           // each peer's send buffer
  std::vector<MPI_Request> sends_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Ends the job when a collective cannot finish: a peer went silent (no heartbeat for
// `heartbeat_timeout` seconds), or the collective outlived its deadline while every peer,
// answering, says it waits in a collective too (a deadlock, or workers that called different
// collectives); a peer that answers and computes is slow, and is waited for. The deadline scales with the
// job's own pace: max(floor, kPaceFactor x the longest interval between consecutive collective
// returns over the last kPaceWindow collectives, the current one's lead-in included), so a job
// whose steps are ten times slower than usual (a loaded machine) gets a ten times longer
// deadline; the floor (STRATA_COLLECTIVE_TIMEOUT) covers the first steps.
class Watchdog {
 public:
  static constexpr double kPaceFactor = 10;
  static constexpr size_t kPaceWindow = 16;

  Watchdog(int rank, std::vector<WorkerName> names, double floor, double heartbeat_timeout, double launcher_grace,
           std::shared_ptr<Heartbeats> heartbeats)
      : rank_(rank), names_(std::move(names)), floor_(floor), heartbeat_timeout_(heartbeat_timeout), launcher_grace_(launcher_grace),
        heartbeats_(std::move(heartbeats)), last_return_(Clock::now()), thread_([this] { Loop(); }) {}
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
    ++calls_;
    armed_at_ = Clock::now();
    double pace = Seconds(armed_at_ - last_return_);  // this worker's own work since the last collective
    for (double i : intervals_) pace = std::max(pace, i);
    pace_ = pace;
    deadline_seconds_ = std::max(floor_, kPaceFactor * pace);
    armed_ = true;
    if (heartbeats_) heartbeats_->SetState(calls_, true);
    cv_.notify_all();
  }
  void Disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
    named_at_ = {};  // the collective completed: a peer named silent came back (its link did)
    if (heartbeats_) heartbeats_->SetState(calls_, false);
    const Clock::time_point now = Clock::now();
    const double waited = Seconds(now - armed_at_);
    longest_wait_ = std::max(longest_wait_, waited);
    longest_deadline_ = std::max(longest_deadline_, deadline_seconds_);
    const double interval = Seconds(now - last_return_);
    if (intervals_.size() < kPaceWindow) intervals_.push_back(interval);
    else intervals_[next_interval_] = interval;
    next_interval_ = (next_interval_ + 1) % kPaceWindow;
    last_return_ = now;
  }
  double longest_wait() const {
    std::lock_guard<std::mutex> lock(mu_);
    return longest_wait_;
  }
  double floor() const { return floor_; }
  double longest_deadline() const {
    std::lock_guard<std::mutex> lock(mu_);
    return longest_deadline_;
  }

 private:
  std::string Name(int w) const {
    const WorkerName& n = names_[static_cast<size_t>(w)];
    return "worker " + std::to_string(w) + " (" + n.host + ", pid " + std::to_string(n.pid) + ")";
  }

  [[noreturn]] void Abort(const std::string& message) {
    std::fprintf(stderr, "strata: %s\n", message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    std::_Exit(3);
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      // Heartbeats are checked a few times a second; without them only the deadline counts.
      const auto wake = heartbeats_ ? Clock::now() + std::chrono::milliseconds(250) : Deadline();
      cv_.wait_until(lock, wake);
      if (!armed_ || stop_) continue;
      const Clock::time_point now = Clock::now();
      const double waited = Seconds(now - armed_at_);
      char what[160];
      std::snprintf(what, sizeof(what), "%s (collective call %lld of this worker)", op_, static_cast<long long>(calls_));
      if (heartbeats_ && named_at_ == Clock::time_point{}) {
        for (int p = 0; p < static_cast<int>(names_.size()); ++p) {
          if (p == rank_) continue;
          const double silence = heartbeats_->Silence(p);
          if (silence < heartbeat_timeout_) continue;
          char buf[640];
          std::snprintf(buf, sizeof(buf),
                        "%s stopped answering: no heartbeat for %.1f s (STRATA_HEARTBEAT_TIMEOUT %.0f s) while %s waited %.1f s "
                        "in %s; it died, is stopped or its host is unreachable; stopping the job",
                        Name(p).c_str(), silence, heartbeat_timeout_, Name(rank_).c_str(), waited, what);
          if (names_[static_cast<size_t>(p)].host == names_[static_cast<size_t>(rank_)].host) Abort(buf);
          // A peer on another host: the launcher (mpirun's daemon there, over ssh; srun's
          // slurmd) must give that host up before it can end the job, and an MPI_Abort now
          // would leave mpirun waiting on the lost daemon for good (Open MPI 4.1). Name it now,
          // and abort only if the launcher has not ended the job within the grace.
          std::fprintf(stderr, "strata: %s (the launcher ends the job once it gives up on %s; else this worker does in %.0f s)\n",
                       buf, names_[static_cast<size_t>(p)].host.c_str(), launcher_grace_);
          std::fflush(stderr);
          named_at_ = now;
        }
      }
      if (named_at_ != Clock::time_point{} && Seconds(now - named_at_) >= launcher_grace_) {
        char buf[160];
        std::snprintf(buf, sizeof(buf),
                      "the launcher did not end the job within %.0f s of the silent worker's naming (STRATA_LAUNCHER_GRACE); "
                      "stopping it",
                      launcher_grace_);
        Abort(buf);
      }
      if (named_at_ != Clock::time_point{}) continue;
      if (now >= Deadline()) {
        // A peer that answers and has not said, since this collective began, that it waits in
        // one is still computing: slow, not hung. Wait on; the deadline is for when every worker
        // waits (a deadlock; checked again each wake).
        bool someone_computes = false;
        if (heartbeats_)
          for (int p = 0; p < static_cast<int>(names_.size()); ++p)
            if (p != rank_ && !heartbeats_->PeerWaitsSince(p, armed_at_)) someone_computes = true;
        if (someone_computes) continue;
        std::string peers;
        for (int p = 0; p < static_cast<int>(names_.size()); ++p)
          if (p != rank_)
            peers += (peers.empty() ? "" : ", ") + Name(p) +
                     (heartbeats_ ? " in its collective call " + std::to_string(heartbeats_->PeerCollectives(p)) : "");
        char buf[768];
        std::snprintf(buf, sizeof(buf),
                      "%s: %s did not complete within %.3g s (max of STRATA_COLLECTIVE_TIMEOUT %.3g s and %.0f x this job's "
                      "%.2f s pace between collectives); %s; waiting on %s; stopping the job",
                      Name(rank_).c_str(), what, deadline_seconds_, floor_, kPaceFactor, pace_,
                      heartbeats_ ? "every worker answers heartbeats and waits in a collective: a deadlock, or the "
                                    "workers called different collectives"
                                  : "a peer worker died or hangs (no heartbeats: STRATA_HEARTBEAT_TIMEOUT=0, or MPI gives no "
                                  "MPI_THREAD_MULTIPLE)",
                      peers.c_str());
        Abort(buf);
      }
    }
  }

  Clock::time_point Deadline() const {
    return armed_at_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadline_seconds_));
  }

  int rank_;
  std::vector<WorkerName> names_;
  double floor_, heartbeat_timeout_, launcher_grace_;
  std::shared_ptr<Heartbeats> heartbeats_;  // null: the MPI library cannot take a second thread
  Clock::time_point named_at_;               // when a silent peer on another host was named
  mutable std::mutex mu_;
  std::condition_variable cv_;
  const char* op_ = "";
  long long calls_ = 0;
  Clock::time_point armed_at_, last_return_;
  double pace_ = 0, deadline_seconds_ = 0, longest_wait_ = 0, longest_deadline_ = 0;
  std::vector<double> intervals_;  // between consecutive collective returns, the last kPaceWindow
  size_t next_interval_ = 0;
  bool armed_ = false, stop_ = false;
  std::thread thread_;
};

// MPI_SUM over bf16 values carried as MPI_UINT16_T: each partial sum is taken in f32 and
// rounded to nearest even (MPI has no bf16 type).

}  // namespace strata::distribute::mpi_internal
