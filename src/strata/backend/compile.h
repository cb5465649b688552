// backend::Compile: a Graph becomes a Program, an ordered list of kernels over planned buffers.
//
// Compile does all shape work, layout choice, primitive creation and memory planning once;
// Program::Run() then only executes kernels: no allocation, no shape logic (tested with a
// counting allocator). The program owns:
//   - one input buffer per graph Input (write the batch there before Run),
//   - one buffer per fetched value (read after Run),
//   - the variables: parameters (trainable first, then state such as batch-norm moving
//     statistics) and gradients of the trainable ones (same order and offsets as the trainable
//     parameters: one buffer to all-reduce), each ONE contiguous f32 block with named views
//     (one write to checkpoint). No optimizer slots: the update runs outside the program, on
//     these blocks (Backend::ApplyUpdate; keras::OptimizerState holds the slots),
//   - one arena for every intermediate value, planned by liveness (graph/memory_plan.h).
//
//   graph::Graph g;  ... build model, loss, grads = Gradients(...) ...
//   STRATA_ASSIGN_OR_RETURN(auto program, backend::Compile(g, {.fetches = {loss}}));
//   std::memcpy(program->input(images).data<float>(), batch, bytes);
//   STRATA_RETURN_IF_ERROR(program->Run());
//   float l = *program->fetch(loss).data<float>();
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/graph/graph.h"

namespace strata::backend {

enum class Precision : uint8_t {
  kF32,
  // TPU `mixed_bfloat16`: variables, losses and updates f32; convolution and matmul (and the
  // batch-norm / activation / pooling kernels between them) in bf16 with f32 accumulation.
  kBF16,
};

// How f32 3x3 stride-1 convolutions are computed. Winograd F(4x4, 3x3) does the same
// convolution with ~2.25x fewer multiplies (oneDNN's jit_wino_4x3): ~30 % faster forward and
// backward-data on the reference CNN; its rounding error is ~6e-6 of the output's RMS against
// ~1e-6 for direct (bf16's own is ~4e-3). Backward-weights stays direct: measured slower.
// oneDNN 2.6 has Winograd only for AVX-512; where it has none (an AVX2 host) and the host has
// AVX2, Strata's own F(4x4, 3x3) (backend/cpu/winograd.h, KernelInfo::impl
// "strata:avx2-winograd") runs f32 forward (with fused bias / ReLU) and backward-data of 3x3,
// stride 1, dilation 1, one-group convolutions with channels in blocks of 8 and at least 64
// output tiles, in one-thread programs (docs/engine.md, "Winograd on AVX2 hosts").
enum class ConvAlgorithm : uint8_t {
  kAuto,    // Winograd for forward and backward-data: oneDNN's where it implements it, else
            // Strata's on AVX2 hosts, else direct
  kDirect,  // direct everywhere (also STRATA_CONV_ALGORITHM=direct)
};

// The variables of one or more programs: two contiguous f32 blocks (parameters and state,
// gradients) with named views.
// Programs compiled from different graphs (train, eval) share one store when the second is
// compiled with CompileOptions::variables = first->variables(); names and shapes must match.
class VariableStore {
 public:
  struct Entry {
    std::string name;
    Shape shape;
    graph::VariableRole role;
    bool trainable;
    int64_t offset;   // elements into params (trainable first); into grads too when trainable
    int64_t size;     // elements
    graph::VariableOptions init;
  };

  // Builds the layout from a graph's variables (trainable parameters first, then the
  // non-trainable ones and state) and initializes values from each variable's initializer.
  static Result<std::shared_ptr<VariableStore>> Create(const graph::Graph& g);
  // Checks that every variable of `g` exists here with the same shape and role.
  Status CheckCompatible(const graph::Graph& g) const;

  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* Find(const std::string& name) const;

  Tensor& params() { return params_; }        // f32 [num_params]: trainable, then state
  Tensor& grads() { return grads_; }          // f32 [num_trainable]: same offsets as params
  int64_t num_trainable() const { return num_trainable_; }
  // A view of the variable's values (in the params block) in its own shape.
  Result<Tensor> Value(const std::string& name) const;
  // A view of the gradient of a trainable variable.
  Result<Tensor> Gradient(const std::string& name) const;
  // Re-runs every initializer (deterministic per variable seed).
  void Initialize();

 private:
  std::vector<Entry> entries_;
  Tensor params_, grads_;
  int64_t num_trainable_ = 0;
};

struct CompileOptions {
  std::vector<graph::Value> fetches;  // values readable after Run (losses, logits, grads)
  int threads = 1;                    // oneDNN threads of this program (one per replica)
  Precision precision = Precision::kF32;
  std::shared_ptr<VariableStore> variables;  // null: a fresh store initialized from the graph
  std::string backend = "cpu";        // "cpu" (oneDNN); the narrow Backend interface allows more
  bool trace = false;                 // also enabled by STRATA_TRACE=1: one line per kernel run
  bool fuse = true;                   // conv/matmul+bias+act, bn+relu (off: for tests)
  // With fuse: batch norm + ReLU6, hard swish or swish as one kernel each way (one-thread f32 programs; env
  // STRATA_FUSE_BN_RELU6=0 turns it off), and ZeroPadding2D folded into the padding of the
  // 'valid' convolution after it (STRATA_FOLD_ZERO_PAD=0 turns it off), and a convolution's
  // residual sum (with the activation after it) inside the convolution, Add + activation as one
  // kernel (STRATA_FUSE_RESIDUAL=0 turns them off). Off: to measure them.
  bool fuse_bn_relu6 = true;
  bool fold_zero_pad = true;
  bool fuse_residual = true;
  // A multiply by a factor broadcast along one run of axes (squeeze-and-excitation,
  // drop-connect) and a global average pool's gradient as Strata's own vectorised kernels
  // (backend/cpu/broadcast_kernels.h) instead of oneDNN 2.6's reference ones (env
  // STRATA_BROADCAST_KERNELS=0 turns them off: to measure them).
  bool broadcast_kernels = true;
  // A depthwise convolution's weight gradient (one-thread programs, depth multiplier 1)
  // that oneDNN 2.6 would run as im2col + gemm (every size but its jit_dw's 3x3: EfficientNet's
  // 5x5) as Strata's own vectorised kernel (backend/cpu/depthwise_kernels.h; env
  // STRATA_DEPTHWISE_KERNELS=0 turns it off: to measure it).
  bool depthwise_kernels = true;
  ConvAlgorithm conv_algorithm = ConvAlgorithm::kAuto;
};

// One kernel of a compiled program, for the monitor and `strata bench-step`.
struct KernelInfo {
  std::string name;     // the node(s): "conv2d_1 (Conv2D+BiasAdd+Relu)"
  std::string op;       // "conv_fwd", "bn_bwd", "reorder", "sgd" ...
  std::string impl;     // oneDNN implementation ("jit:avx512_core") or "strata:avx512"
  std::string shapes;   // "f32[128,28,28,1] x f32[3,3,1,32] -> bf16[128,28,28,32]"
  int64_t matrix_flops = 0;  // conv and matmul multiply-adds x 2 (the direct count)
  int64_t other_flops = 0;   // element-wise and reduction work (approximate: 1 per element op)
  // What the kernel executes of matrix_flops where that differs: a Winograd F(4x4, 3x3)
  // convolution multiplies 6x6 transformed tiles, 36 products for 16 outputs where the direct
  // count has 144. -1: matrix_flops. The peak's self-correction compares this (a rate counted
  // directly could beat a right peak), the utilization % quotes matrix_flops.
  int64_t executed_matrix_flops = -1;
  int64_t ExecutedMatrixFlops() const { return executed_matrix_flops >= 0 ? executed_matrix_flops : matrix_flops; }
};

// Sums data[0, n) in place over every replica of the step (synchronized batch norm), each
// replica's program calling it at the same kernels in the same order; installed by the
// model that runs the replicas. A program without one sums over itself alone.
using CrossReplicaSum = std::function<Status(double* data, int64_t n)>;

// Where a part of the trainable-gradient block becomes final during Run(): once kernel
// `kernel` (an index into kernels(); -1: no kernel touches it) has run, no later kernel of the
// same Run reads or writes elements [begin, end) of variables().grads(). The backward pass runs
// in reverse layer order, so the last layers' gradients are final first.
struct GradientReady {
  int64_t begin = 0, end = 0;  // elements of the gradient block
  int kernel = -1;
};

// Called by Run() between kernels (see Program::set_kernel_hook); an error ends the Run.
using KernelHook = std::function<Status(int kernel)>;

class Program {
 public:
  virtual ~Program() = default;
  void set_cross_replica_sum(CrossReplicaSum fn) { *cross_replica_sum_ = std::move(fn); }
  // One entry per gradient the program writes, by kernel then offset. Empty when the backend
  // does not know (the reference backend): callers then wait for the whole Run.
  virtual const std::vector<GradientReady>& gradient_ready() const { return no_gradient_ready_; }
  // Run() calls hook(k) after kernel k for every k with after[k + 1] != 0, and hook(-1) before
  // the first kernel when after[0] != 0 (after: kernels().size() + 1 flags). This is how the
  // cross-host all-reduce of a gradient bucket starts while the rest of the backward pass runs.
  // An empty hook removes it. Set between runs only; backends that cannot call it ignore it.
  void set_kernel_hook(std::vector<uint8_t> after, KernelHook hook) {
    hook_after_ = std::move(after);
    hook_ = std::move(hook);
  }
  // Executes every kernel once: forward, loss, gradients and updates as the graph says.
  virtual Status Run() = 0;
  // The counter that seeds per-step randomness (dropout masks); Run() advances it by one.
  // A run resumed from a checkpoint sets it, so the masks continue where they stopped.
  virtual uint64_t step() const = 0;
  virtual void set_step(uint64_t step) = 0;
  // The same as Run(): one training step of a training graph.
  Status Step() { return Run(); }

  // The preallocated buffer of an Input (contiguous, the Input's dtype and shape); an empty
  // tensor for a value that is no Input.
  Tensor& input(graph::Value v);
  // The buffer of a fetched value, valid after Run (contiguous, plain layout, its dtype); an
  // empty tensor for a value not fetched.
  const Tensor& fetch(graph::Value v) const;
  VariableStore& variables() { return *vars_; }
  std::shared_ptr<VariableStore> shared_variables() { return vars_; }

  virtual const std::vector<KernelInfo>& kernels() const = 0;
  // Sums over kernels(): the FLOPs of one Run() (executed: KernelInfo::ExecutedMatrixFlops).
  int64_t matrix_flops_per_step() const;
  int64_t executed_matrix_flops_per_step() const;
  int64_t flops_per_step() const;
  // Bytes of the planned arena (intermediate values) and of all program-owned memory.
  virtual int64_t arena_bytes() const = 0;
  virtual int64_t total_bytes() const = 0;

 protected:
  // What each backend's program fills when it compiles: the variables, the Inputs' buffers by
  // node, the fetched values' buffers by (node, output).
  std::shared_ptr<VariableStore> vars_;
  std::map<int, Tensor> inputs_;
  std::map<std::pair<int, int>, Tensor> fetches_;
  // Shared with the kernels that call it (empty: no other replica).
  std::shared_ptr<CrossReplicaSum> cross_replica_sum_ = std::make_shared<CrossReplicaSum>();
  std::vector<uint8_t> hook_after_;  // [kernels + 1]: call hook_ before kernel 0 / after kernel k
  KernelHook hook_;

 private:
  std::vector<GradientReady> no_gradient_ready_;
};

Result<std::unique_ptr<Program>> Compile(const graph::Graph& g, CompileOptions options);

// Whether `backend` can train in `precision` on this host: OK, or Unimplemented with one line
// naming the missing instruction set and the alternative. Compile() checks it first, so a
// job that cannot run stops before any work. On the cpu backend bf16 needs AVX-512 (oneDNN 2.6
// has bf16 kernels for AVX-512 with or without AVX512_BF16, none for AVX2): see docs/engine.md.
Status PrecisionSupported(Precision precision, const std::string& backend = "cpu");
// "f32", "bf16": the precisions `backend` trains in on this host.
std::vector<std::string> TrainablePrecisions(const std::string& backend = "cpu");

}  // namespace strata::backend

#pragma GCC visibility pop
