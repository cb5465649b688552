// AUTOTUNE: sets the parallelism and buffer sizes of AUTOTUNE stages from measured stage
// costs, within a CPU budget and a RAM budget (docs/pipeline.md, "AUTOTUNE", has the
// algorithm with a worked example).
//
// Every period (50 ms at first, doubling to 1 s) the tuner reads the stages' statistics,
// builds a model of the pipeline (one node per stage: its own work per element, how many
// input elements it consumes per output element, its element size) and hill-climbs: from
// every knob at its minimum it repeatedly raises the one knob that most reduces the
// modelled time the consumer waits per element, while the sum of parallelism stays within
// the CPU budget (stages doing under 10 % of the work, such as file readers, are not charged)
// and the buffered bytes within the RAM budget, until no step gains more
// than 1 % or the consumer is modelled to wait less than 2 % of its own step time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strata/data/stats.h"

namespace strata::data {

class Pipeline;

struct ModelNode {
  enum class Kind { kSync, kParallel, kBuffer };  // caller's thread / worker pool / one producer + queue
  std::string path;
  Kind kind = Kind::kSync;
  double self_ns = 0;    // own work per output element (summed over its threads)
  double ratio = 1;      // input elements consumed per output element
  double bytes = 0;      // bytes per output element
  std::vector<int> inputs;  // indices into Model::nodes
  // Share of the pipeline's busy time spent in this stage. Parallel stages under 10 %
  // (file readers, mostly asleep in I/O) are not charged against the CPU budget.
  double work_share = 1;
  bool parallel_inputs = false;  // the workers read the inputs themselves (interleave)
  int parallelism_param = -1;  // index into the parameter vector, or -1 (then `parallelism`)
  int buffer_param = -1;       // index into the parameter vector, or -1 (then `buffer`)
  int64_t parallelism = 1;
  int64_t buffer = 1;
};

struct ModelParam {
  bool is_parallelism = true;  // else a buffer size
  int node = 0;
  int64_t min = 1, max = 1;
};

struct Model {
  std::vector<ModelNode> nodes;
  int root = 0;
  std::vector<ModelParam> params;
};

// Expected wait of a consumer that needs an element every `consumer_ns` from a producer
// that makes one every `producer_ns`, with `buffer` elements of slack (an M/M/1/K queue:
// P(buffer empty) times the producer time).
double QueueWaitNs(double producer_ns, double consumer_ns, double buffer);

// Modelled time the consumer of `node` waits per element, given parameter values.
double ModelWaitNs(const Model& m, const std::vector<int64_t>& values, int node, double consumer_ns);

struct Budget {
  int64_t cpu = 1;           // total parallelism across parallel stages
  int64_t ram_bytes = 1 << 30;
};
// The hill climb. Returns one value per Model::params.
std::vector<int64_t> HillClimb(const Model& m, const Budget& budget, double consumer_ns);

// Builds the model from statistics deltas (see autotune.cc for the mapping).
Model BuildModel(const std::vector<StageStatsSnapshot>& now, const std::vector<StageStatsSnapshot>& before);

// The tuner thread of one Pipeline.
class Autotuner {
 public:
  explicit Autotuner(Pipeline* pipeline);
  ~Autotuner();
  // One tuning round now (tests call it directly).
  void TuneOnce();

 private:
  void Loop();
  Pipeline* pipeline_;
  std::vector<StageStatsSnapshot> last_;
  int64_t last_calls_ = 0, last_outside_ns_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace strata::data
