// Replays Strata's data-parallel training step on a simulated cluster (SimGrid SMPI): the
// bucketed gradient all-reduce of src/strata/distribute/reducer.cc over Open MPI's libnbc
// (mpi_collective.cc), set against a recorded compute timeline. README.md has the record's
// format and the commands; build with `smpicxx -O2 -std=c++17`, run with smpirun and
// --cfg=smpi/simulate-computation:no (simulate_scaling.py does both).
//
//   allreduce_sim RECORD.json [--steps S] [--seed N] [--progress-interval SECONDS] [--triad BYTES_PER_S]
//                 [--jitter RELATIVE_SD]
//   allreduce_sim --closed-form BYTES [--triad BYTES_PER_S]
//
// Per rank and step: the compute (before_s, forward_backward_s, update_s, each scaled by the
// rank's draw of the jitter) is charged with smpi_execute; each bucket's all-reduce starts at
// its ready time and advances only inside progress calls, one schedule round per call, as
// libnbc's NBC_Progress does (Strata's replica 0 calls MPI_Testsome after each kernel: the
// progress cadence); after the backward pass the rank spins (MPI_Waitsome) until every bucket
// is done, updates, and all-reduces the batch-norm statistics (blocking). SMPI's own
// MPI_Iallreduce is not used: it sends the whole buffer to every rank.
#include <mpi.h>
#include <smpi/smpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

// ---- the step record (README.md, "The step record") ----------------------------------------

struct Bucket {
  int64_t bytes;   // on the wire
  double ready_s;  // from the step's program start, in the recorded run's time
};

struct Record {
  std::string name;
  std::vector<Bucket> buckets;  // start order
  double backward_end_s = 0, forward_backward_s = 0, update_s = 0, before_s = 0;
  int64_t stats_bytes = 0;  // batch-norm moving statistics, all-reduced (blocking, f32) after the update
  int wire_element_bytes = 4;  // libnbc splits buckets by element: 4 for f32, 2 for bf16
  double jitter = 0;           // relative standard deviation of a rank's compute, per step
  double triad_bytes_per_s = 0;
  double progress_interval_s = 0;  // between progress calls (MPI_Testsome) during the backward pass
};

Record ReadRecord(const char* path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "allreduce_sim: cannot read %s\n", path);
    std::exit(2);
  }
  const nlohmann::json j = nlohmann::json::parse(in);
  Record r;
  r.name = j.value("name", std::string(path));
  for (const auto& b : j.at("buckets")) r.buckets.push_back({b.at("bytes").get<int64_t>(), b.at("ready_s").get<double>()});
  r.backward_end_s = j.at("backward_end_s").get<double>();
  r.forward_backward_s = j.value("forward_backward_s", r.backward_end_s);
  r.update_s = j.at("update_s").get<double>();
  r.before_s = j.value("before_s", 0.0);
  r.stats_bytes = j.value("stats_bytes", int64_t{0});
  r.wire_element_bytes = j.value("wire", std::string("f32")) == "bf16" ? 2 : 4;
  r.jitter = j.value("jitter", 0.0);
  r.triad_bytes_per_s = j.at("triad_bytes_per_s").get<double>();
  r.progress_interval_s = j.at("progress_interval_s").get<double>();
  return r;
}

// ---- libnbc's all-reduce schedules ------------------------------------------------------------
//
// A schedule is a list of rounds; a round's sends and receives are posted together and the
// next round starts in the first progress call that finds them all complete (NBC_Progress).
// A reduction is a round of its own, executed when it starts. Offsets and sizes in bytes of
// the bucket; receives land in the bucket's scratch area (tmp) or in the bucket itself (data),
// never where the same round sends from.

enum class Kind { kSend, kRecvTmp, kRecvData, kOp };
struct Action {
  Kind kind;
  int peer;
  int64_t offset, bytes;
};
using Round = std::vector<Action>;

// Rabenseifner's (ompi/mca/coll/libnbc/nbc_iallreduce.c, allred_sched_redscat_allgather, in
// place): ranks beyond the largest power of two p' fold into it first (the first 2r ranks pair
// up, the odd one hands its half over and drops out), reduce-scatter by recursive halving,
// all-gather by recursive doubling, then the dropped ranks get the result.
std::vector<Round> Rabenseifner(int rank, int p, int64_t count, int64_t elem) {
  int nsteps = 0;
  while ((2 << nsteps) <= p) ++nsteps;
  const int pof2 = 1 << nsteps, rem = p - pof2;
  std::vector<Round> s;
  auto exchange = [&](int peer, int64_t send_at, int64_t send_n, Kind into, int64_t recv_at, int64_t recv_n) {
    s.push_back({{Kind::kSend, peer, send_at * elem, send_n * elem}, {into, peer, recv_at * elem, recv_n * elem}});
  };
  auto op = [&](int64_t n) { s.push_back({{Kind::kOp, -1, 0, n * elem}}); };
  int vrank;
  const int64_t lhalf = count / 2, rhalf = count - lhalf;
  if (rank < 2 * rem) {
    if (rank % 2) {  // hands its left half to rank - 1, reduces the right one, sends it back
      exchange(rank - 1, 0, lhalf, Kind::kRecvTmp, lhalf, rhalf);
      op(rhalf);
      s.push_back({{Kind::kSend, rank - 1, lhalf * elem, rhalf * elem}});
      vrank = -1;
    } else {
      exchange(rank + 1, lhalf, rhalf, Kind::kRecvTmp, 0, lhalf);
      op(lhalf);
      s.push_back({{Kind::kRecvData, rank + 1, lhalf * elem, rhalf * elem}});
      vrank = rank / 2;
    }
  } else {
    vrank = rank - rem;
  }
  if (vrank != -1) {
    std::vector<int64_t> rindex(nsteps), sindex(nsteps), rcount(nsteps), scount(nsteps);
    auto real = [&](int v) { return v < rem ? v * 2 : v + rem; };
    int64_t wsize = count;
    for (int step = 0, mask = 1; mask < pof2; mask <<= 1) {  // reduce-scatter
      const int dest = real(vrank ^ mask);
      if (rank < dest) {
        rcount[step] = wsize / 2;
        scount[step] = wsize - rcount[step];
        sindex[step] = rindex[step] + rcount[step];
      } else {
        scount[step] = wsize / 2;
        rcount[step] = wsize - scount[step];
        rindex[step] = sindex[step] + scount[step];
      }
      exchange(dest, sindex[step], scount[step], Kind::kRecvTmp, rindex[step], rcount[step]);
      op(rcount[step]);
      if (step + 1 < nsteps) {
        rindex[step + 1] = sindex[step + 1] = rindex[step];
        wsize = rcount[step];
        ++step;
      }
    }
    for (int step = nsteps - 1, mask = pof2 >> 1; mask > 0; mask >>= 1, --step)  // all-gather
      exchange(real(vrank ^ mask), rindex[step], rcount[step], Kind::kRecvData, sindex[step], scount[step]);
  }
  if (rank < 2 * rem)
    s.push_back({rank % 2 ? Action{Kind::kRecvData, rank - 1, 0, count * elem} : Action{Kind::kSend, rank + 1, 0, count * elem}});
  return s;
}

// libnbc's ring (allred_sched_ring, in place): what Strata's setting (algorithm 3) gets when
// the bucket has fewer elements than p' (a small bucket at hundreds of hosts).
std::vector<Round> Ring(int r, int p, int64_t count, int64_t elem) {
  std::vector<int64_t> size(p), offset(p + 1, 0);
  for (int i = 0; i < p; ++i) {
    size[i] = count / p + (i < count % p ? 1 : 0);
    offset[i + 1] = offset[i] + size[i];
  }
  const int speer = (r + 1) % p, rpeer = (r - 1 + p) % p;
  std::vector<Round> s;
  for (int round = 0; round < 2 * p - 2; ++round) {
    const int sel = (r + 1 - round + 2 * p) % p, rel = (r - round + 2 * p) % p;
    const bool reducing = round < p - 1;
    s.push_back({{Kind::kSend, speer, offset[sel] * elem, size[sel] * elem},
                 {reducing ? Kind::kRecvTmp : Kind::kRecvData, rpeer, reducing ? 0 : offset[rel] * elem, size[rel] * elem}});
    if (reducing) s.push_back({{Kind::kOp, -1, 0, size[rel] * elem}});
  }
  return s;
}

// ---- one all-reduce in flight --------------------------------------------------------------

struct Cost {
  double triad_bytes_per_s;  // 0: reductions are free
  double reduced_s = 0;      // charged so far (this step)
};

class AllReduce {
 public:
  AllReduce(char* data, char* tmp, int64_t bytes, int64_t elem, int tag, Cost* cost) : data_(data), tmp_(tmp), tag_(tag), cost_(cost) {
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    const int64_t count = bytes / elem;
    int pof2 = 1;
    while (pof2 * 2 <= p) pof2 *= 2;
    ring_ = count < pof2;  // libnbc: algorithm 3 needs count >= p'; else its default, the ring
    if (p > 1) rounds_ = ring_ ? Ring(rank, p, count, elem) : Rabenseifner(rank, p, count, elem);
    if (rounds_.empty()) complete_ = true;  // one rank: libnbc's no-op request
    else StartRound();                      // MPI_Iallreduce starts the first round (NBC_Start)
  }
  AllReduce(const AllReduce&) = delete;
  AllReduce& operator=(const AllReduce&) = delete;

  // Complete: a progress call found the last round done (libnbc completes a request only there).
  bool done() const { return complete_; }
  bool ring() const { return ring_; }
  std::vector<MPI_Request>& requests() { return requests_; }
  // Strata's MPI_Testsome returns a completed request once; then it is MPI_REQUEST_NULL.
  bool returned = false;

  // One NBC_Progress: if the current round is complete, start the next (or complete). Returns
  // whether anything moved. Completed requests are MPI_REQUEST_NULL: Harvest and WaitAll
  // complete them with MPI_Waitany, never with MPI_Test (see Harvest).
  bool Progress() {
    if (complete_ || !RoundComplete()) return false;
    requests_.clear();
    if (next_ < rounds_.size()) StartRound();
    else complete_ = true;
    return true;
  }

 private:
  void StartRound() {
    for (const Action& a : rounds_[next_]) {
      MPI_Request q;
      const int n = static_cast<int>(a.bytes);
      switch (a.kind) {
        case Kind::kSend:
          MPI_Isend(data_ + a.offset, n, MPI_BYTE, a.peer, tag_, MPI_COMM_WORLD, &q);
          requests_.push_back(q);
          break;
        case Kind::kRecvTmp:
        case Kind::kRecvData:
          MPI_Irecv((a.kind == Kind::kRecvTmp ? tmp_ : data_) + a.offset, n, MPI_BYTE, a.peer, tag_, MPI_COMM_WORLD, &q);
          requests_.push_back(q);
          break;
        case Kind::kOp:
          // inout[i] += in[i]: read two, write one, as the triad counts its bytes.
          if (cost_->triad_bytes_per_s > 0) {
            const double s = 3.0 * static_cast<double>(a.bytes) / cost_->triad_bytes_per_s;
            smpi_execute(s);
            cost_->reduced_s += s;
          }
          break;
      }
    }
    ++next_;
  }

  bool RoundComplete() const {
    return std::all_of(requests_.begin(), requests_.end(), [](MPI_Request q) { return q == MPI_REQUEST_NULL; });
  }

  char *data_, *tmp_;
  int tag_;
  Cost* cost_;
  bool ring_ = false, complete_ = false;
  std::vector<Round> rounds_;
  size_t next_ = 0;
  std::vector<MPI_Request> requests_;  // the current round's
};

// The requests of the rounds in flight, and where each is kept.
void Pending(std::vector<AllReduce*>& active, std::vector<MPI_Request>& pending, std::vector<MPI_Request*>& where) {
  pending.clear();
  where.clear();
  for (AllReduce* a : active)
    for (MPI_Request& q : a->requests())
      if (q != MPI_REQUEST_NULL) {
        pending.push_back(q);
        where.push_back(&q);
      }
}

// What a test sees at this instant: every request already complete becomes
// MPI_REQUEST_NULL. Not with MPI_Test: in SimGrid 3.32 a request that MPI_Test or MPI_Testall
// completes stays in its rank's activity list for good, and every later smpi_execute scans
// that list (16 ranks of ResNet50: the first step took 2 s of wall time, the fourth 7 s);
// MPI_Request_get_status says complete at once. MPI_Waitany returns the first complete
// request in array order, so with a zero-byte message to itself at the end (complete at once
// over the platform's zero-latency loopback) it returns each complete request in turn and
// then the sentinel: nothing else is complete now.
void Harvest(std::vector<AllReduce*>& active, int rank) {
  constexpr int kSentinelTag = 30001;  // above the all-reduces' tags
  std::vector<MPI_Request> pending;
  std::vector<MPI_Request*> where;
  Pending(active, pending, where);
  if (pending.empty()) return;
  char out = 0, in = 0;
  MPI_Request sentinel[2];
  MPI_Irecv(&in, 0, MPI_BYTE, rank, kSentinelTag, MPI_COMM_WORLD, &sentinel[0]);
  MPI_Isend(&out, 0, MPI_BYTE, rank, kSentinelTag, MPI_COMM_WORLD, &sentinel[1]);
  for (;;) {
    pending.push_back(sentinel[0]);
    int index = MPI_UNDEFINED;
    MPI_Waitany(static_cast<int>(pending.size()), pending.data(), &index, MPI_STATUS_IGNORE);
    if (index == static_cast<int>(pending.size()) - 1) break;
    *where[static_cast<size_t>(index)] = MPI_REQUEST_NULL;
    Pending(active, pending, where);
  }
  MPI_Wait(&sentinel[1], MPI_STATUS_IGNORE);
}

// Waiting for the started all-reduces (Strata's MPI_Waitsome loop, MPI_Waitall for the
// statistics): Open MPI spins in opal_progress, so every round that can move does at once;
// when none can, the next completed message is the next event.
void WaitAll(std::vector<AllReduce*>& active) {
  std::vector<MPI_Request> pending;
  std::vector<MPI_Request*> where;
  for (;;) {
    for (bool moved = true; moved;) {
      moved = false;
      for (AllReduce* a : active) moved = a->Progress() || moved;
    }
    Pending(active, pending, where);
    if (pending.empty()) return;  // an all-reduce not done waits on a message: none left, all done
    int index = MPI_UNDEFINED;
    MPI_Waitany(static_cast<int>(pending.size()), pending.data(), &index, MPI_STATUS_IGNORE);
    if (index != MPI_UNDEFINED) *where[static_cast<size_t>(index)] = MPI_REQUEST_NULL;
  }
}

// Strata's Progress (after each kernel of replica 0): MPI_Testsome over the buckets in flight.
// Open MPI returns those that libnbc completed in earlier progress calls and then makes no
// progress call; when there are none, it calls opal_progress once: one round of each.
void TestSome(std::vector<AllReduce*>& active) {
  bool returned = false;
  for (AllReduce* a : active)
    if (a->done()) returned = a->returned = true;
  if (!returned)
    for (AllReduce* a : active) a->Progress();
  active.erase(std::remove_if(active.begin(), active.end(), [](AllReduce* a) { return a->returned; }), active.end());
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- the closed-form check: one bucket, no compute ----------------------------------------

int ClosedForm(int64_t bytes, double triad) {
  int rank, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  char* data = static_cast<char*>(SMPI_SHARED_MALLOC(static_cast<size_t>(bytes)));
  char* tmp = static_cast<char*>(SMPI_SHARED_MALLOC(static_cast<size_t>(bytes)));
  Cost cost{triad};
  const double t0 = MPI_Wtime();  // every rank is here at simulated time 0: no barrier skew
  AllReduce a(data, tmp, bytes, 4, 1, &cost);
  std::vector<AllReduce*> active = {&a};
  WaitAll(active);
  const double mine[2] = {MPI_Wtime() - t0, cost.reduced_s};
  double worst[2];
  MPI_Reduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("{\"mode\": \"closed-form\", \"ranks\": %d, \"bytes\": %lld, \"algorithm\": \"%s\", \"seconds\": %.9g, "
                "\"reduce_seconds\": %.9g}\n",
                p, static_cast<long long>(bytes), a.ring() ? "ring" : "rabenseifner", worst[0], worst[1]);
  SMPI_SHARED_FREE(data);
  SMPI_SHARED_FREE(tmp);
  return 0;
}

// ---- the training steps --------------------------------------------------------------------

struct StepTimes {
  double duration, wait, backward_end, compute;
};

class Replay {
 public:
  Replay(const Record& r, uint64_t seed) : r_(r), cost_{r.triad_bytes_per_s} {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &p_);
    int64_t total = 0;
    for (const Bucket& b : r_.buckets) {
      offset_.push_back(total);
      total += b.bytes;
    }
    // The gradient block and libnbc's scratch, one area per bucket (all may be in flight at
    // once); shared between the simulated ranks, so memory does not grow with them.
    grads_ = static_cast<char*>(SMPI_SHARED_MALLOC(static_cast<size_t>(std::max<int64_t>(total, 1))));
    scratch_ = static_cast<char*>(SMPI_SHARED_MALLOC(static_cast<size_t>(std::max<int64_t>(total, 1))));
    stats_ = static_cast<char*>(SMPI_SHARED_MALLOC(static_cast<size_t>(std::max<int64_t>(r_.stats_bytes, 1))));
    stats_scratch_ = static_cast<char*>(SMPI_SHARED_MALLOC(static_cast<size_t>(std::max<int64_t>(r_.stats_bytes, 1))));
    rng_.seed(seed * 1000003u + static_cast<uint64_t>(rank_));
    // Log-normal with median 1 and the record's relative standard deviation.
    sigma_ = std::sqrt(std::log(1.0 + r_.jitter * r_.jitter));
  }
  ~Replay() {
    SMPI_SHARED_FREE(grads_);
    SMPI_SHARED_FREE(scratch_);
    SMPI_SHARED_FREE(stats_);
    SMPI_SHARED_FREE(stats_scratch_);
  }

  StepTimes Step(double interval) {
    const double f = sigma_ > 0 ? std::lognormal_distribution<double>(0.0, sigma_)(rng_) : 1.0;
    const double start = MPI_Wtime();
    cost_.reduced_s = 0;
    Execute(r_.before_s * f);
    // Program time: the backward pass ends at T; a bucket is ready at its recorded time,
    // stretched to this step's compute. Hooks (Strata's AfterKernel on replica 0) run every
    // `interval` of compute and where a bucket becomes ready: start what is ready, then one
    // MPI_Testsome (TestSome).
    const double T = r_.forward_backward_s * f;
    const double scale = r_.backward_end_s > 0 ? T / r_.backward_end_s : 0;
    const double tick = interval > 0 ? interval * f : T;
    std::vector<std::unique_ptr<AllReduce>> started;
    std::vector<AllReduce*> active;  // started, not done
    size_t next = 0;
    double tau = 0, next_tick = tick;
    auto ready = [&](size_t b) { return std::min(T, r_.buckets[b].ready_s * scale); };
    for (;;) {
      // With nothing in flight a hook has nothing to do: compute on to the next bucket.
      const double bucket = next < r_.buckets.size() ? ready(next) : T;
      const double until = std::min({T, bucket, active.empty() ? T : next_tick});
      Execute(until - tau);
      tau = until;
      if (tau >= T) break;
      for (; next < r_.buckets.size() && ready(next) <= tau; ++next) {
        started.push_back(Start(next));
        active.push_back(started.back().get());
      }
      Harvest(active, rank_);
      TestSome(active);
      next_tick = tick * (std::floor(tau / tick) + 1);
      if (next_tick <= tau) next_tick += tick;  // tau on a tick, floor's rounding below it
    }
    const double backward_end = MPI_Wtime();
    for (; next < r_.buckets.size(); ++next) {
      started.push_back(Start(next));
      active.push_back(started.back().get());
    }
    WaitAll(active);
    const double waited = MPI_Wtime() - backward_end;
    Execute(r_.update_s * f);
    if (r_.stats_bytes > 0 && p_ > 1) {  // MeanOverReplicas: MPI_Iallreduce + MPI_Waitall
      AllReduce stats(stats_, stats_scratch_, r_.stats_bytes, 4, NextTag(), &cost_);
      std::vector<AllReduce*> one = {&stats};
      WaitAll(one);
    }
    const double end = MPI_Wtime();
    // The same compute on one host, without the network (and without the reductions).
    const double alone = (r_.before_s + r_.forward_backward_s + r_.update_s) * f;
    return {end - start, waited, backward_end - start, alone};
  }

  int ring_buckets = 0;

 private:
  std::unique_ptr<AllReduce> Start(size_t b) {
    auto a = std::make_unique<AllReduce>(grads_ + offset_[b], scratch_ + offset_[b], r_.buckets[b].bytes,
                                         r_.wire_element_bytes, NextTag(), &cost_);
    ring_buckets += a->ring();
    return a;
  }
  // Every rank starts the same collectives in the same order (libnbc's per-communicator tag).
  int NextTag() { return 1 + (tag_++ % 30000); }
  static void Execute(double seconds) {
    if (seconds > 0) smpi_execute(seconds);
  }

  const Record& r_;
  Cost cost_;
  int rank_ = 0, p_ = 1, tag_ = 0;
  std::vector<int64_t> offset_;
  char *grads_, *scratch_, *stats_, *stats_scratch_;
  std::mt19937_64 rng_;
  double sigma_ = 0;
};

int Train(const Record& r, int steps, uint64_t seed, double interval) {
  int rank, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  std::vector<double> mine(4 * static_cast<size_t>(steps));
  int ring_buckets = 0;
  {
    Replay replay(r, seed);
    for (int k = 0; k < steps; ++k) {
      const StepTimes t = replay.Step(interval);
      mine[4 * k] = t.duration;
      mine[4 * k + 1] = t.wait;
      mine[4 * k + 2] = t.backward_end;
      mine[4 * k + 3] = t.compute;
    }
    ring_buckets = replay.ring_buckets / steps;
  }
  // The slowest rank of each step (its duration, wait and backward end), and the least wait
  // (the slowest rank's own, where the others also wait for it).
  std::vector<double> most(mine.size()), least(mine.size());
  MPI_Reduce(mine.data(), most.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(mine.data(), least.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
  if (rank != 0) return 0;
  std::vector<double> step, wait, least_wait, backward, alone;
  for (int k = 0; k < steps; ++k) {
    step.push_back(most[4 * k]);
    wait.push_back(most[4 * k + 1]);
    least_wait.push_back(least[4 * k + 1]);
    backward.push_back(most[4 * k + 2]);
    alone.push_back(mine[4 * k + 3]);  // rank 0's own compute: one host, the same draws
  }
  // Rank 0's step is its compute plus waits, and the slowest rank's step is at least rank 0's:
  // step by step, and so in the median, the efficiency cannot pass 100 %.
  const double single = Median(alone), median = Median(step);
  const double efficiency = single / median;
  int64_t wire = r.stats_bytes;
  for (const Bucket& b : r.buckets) wire += b.bytes;
  std::printf("{\"record\": \"%s\", \"ranks\": %d, \"steps\": %d, \"step_s_median\": %.9g, \"step_s_max\": %.9g, "
              "\"wait_s_median\": %.9g, \"least_wait_s_median\": %.9g, \"backward_end_s_median\": %.9g, "
              "\"single_host_step_s\": %.9g, \"efficiency\": %.6f, \"buckets\": %zu, \"ring_buckets\": %d, "
              "\"wire_bytes_per_step\": %lld, \"progress_interval_s\": %.6g, \"jitter\": %.4g}\n",
              r.name.c_str(), p, steps, median, *std::max_element(step.begin(), step.end()), Median(wait),
              Median(least_wait), Median(backward), single, efficiency, r.buckets.size(), ring_buckets,
              static_cast<long long>(wire), interval, r.jitter);
  if (efficiency > 1.0 + 1e-9) {
    std::fprintf(stderr, "allreduce_sim: efficiency %.4f above 100 %%: a bug\n", efficiency);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* record = nullptr;
  int steps = 5;
  uint64_t seed = 1;
  double interval = -1, triad = -1, jitter = -1;
  int64_t closed_form = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--steps" && has_value) steps = std::atoi(argv[++i]);
    else if (a == "--seed" && has_value) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--progress-interval" && has_value) interval = std::atof(argv[++i]);
    else if (a == "--triad" && has_value) triad = std::atof(argv[++i]);
    else if (a == "--jitter" && has_value) jitter = std::atof(argv[++i]);
    else if (a == "--closed-form" && has_value) closed_form = std::atoll(argv[++i]);
    else if (a[0] != '-' && !record) record = argv[i];
    else {
      std::fprintf(stderr, "allreduce_sim: unknown argument %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  int rc;
  if (closed_form > 0) {
    rc = ClosedForm(closed_form, triad < 0 ? 0 : triad);
  } else if (!record || steps < 1) {
    std::fprintf(stderr, "usage: allreduce_sim RECORD.json [--steps S] [--seed N] [--progress-interval S] [--triad B/s] [--jitter SD]\n"
                         "       allreduce_sim --closed-form BYTES [--triad B/s]\n");
    rc = 2;
  } else {
    Record r = ReadRecord(record);
    if (triad >= 0) r.triad_bytes_per_s = triad;
    if (jitter >= 0) r.jitter = jitter;
    rc = Train(r, steps, seed, interval >= 0 ? interval : r.progress_interval_s);
  }
  MPI_Finalize();
  return rc;
}
