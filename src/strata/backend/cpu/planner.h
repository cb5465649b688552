// The cpu backend's compile state: kernels, buffers, and where each value lives in which layout.
//
// A value may exist in several layouts at once ("materializations"): the blocked layout a
// convolution wrote, the plain [N, H, W, C] copy a hand-written kernel needs, the bf16 copy a
// matmul reads. Use() returns the one a consumer asks for and inserts a oneDNN reorder only
// when none matches, once per (value, layout): layouts change only where they must.
//
// Kernel positions are indices into `kernels`; buffer live ranges are in positions and feed
// graph::PlanMemory. Pointers exist only after Allocate(); kernels bind then.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/backend/compile.h"
#include "strata/graph/fusion.h"
#include "strata/graph/graph.h"
#include "strata/graph/schedule.h"

namespace strata::backend::cpu {

using md = dnnl::memory::desc;
using dt = dnnl::memory::data_type;

dt ToDnnl(DType t);
DType FromDnnl(dt t);
// The plain (row-major, channels-last) layout of a graph shape: rank 4 [N, H, W, C] as
// oneDNN dims {N, C, H, W} with NHWC strides, a scalar as {1}, others as-is.
md PlainDesc(const Shape& s, dt type);
// Row-major dims as they are (no NCHW reordering for rank 4): a batch of matrices [B, H, T, K]
// as the matmul and transpose kernels see it. The same bytes as PlainDesc for any rank.
md RowMajorDesc(const dnnl::memory::dims& d, dt type);
// HWIO conv kernel [KH, KW, C / G, O] as oneDNN weights dims ({O, I, KH, KW} or
// {G, O / G, I, KH, KW}) over the same plain bytes.
md WeightsView(const Shape& hwio, int groups, dt type);
// "f32[128,32,28,28]:aBcd16b": dims, type and a short layout name for traces.
std::string DescString(const md& d);

struct Buffer {
  int64_t bytes = 0;
  int first = -1, last = -1;  // kernel positions; -1: not yet used
  char* external = nullptr;   // inputs, fetches, variables, constants: not in the arena
  char* ptr = nullptr;        // resolved by Allocate()
};

struct Kernel;
using KernelFn = std::function<Status(Kernel& k, uint64_t step)>;

struct Kernel {
  KernelInfo info;
  // A oneDNN primitive with its arguments (arg id, buffer, layout); executed first.
  std::optional<dnnl::primitive> prim;
  std::vector<std::tuple<int, int, md>> dnnl_args;
  std::vector<dnnl::memory> mems;          // bound once
  std::vector<dnnl_exec_arg_t> exec_args;  // bound once
  // Hand-written work (after the primitive, if both): reads ptrs[i] = buffer bufs[i].
  std::vector<int> bufs;
  std::vector<char*> ptrs;
  KernelFn fn;
};

struct Materialization {
  md desc;
  int buffer;
  bool plain;  // desc == PlainDesc(shape, its data type)
};

class Planner {
 public:
  Planner(const graph::Graph& g, const CompileOptions& o, VariableStore& vars, dnnl::engine& eng);

  const graph::Graph& graph() const { return g_; }
  const CompileOptions& options() const { return o_; }
  dnnl::engine& engine() { return eng_; }
  dnnl::primitive_attr Attr() const;  // user scratchpad mode
  bool bf16() const { return o_.precision == Precision::kBF16; }

  int NewBuffer(int64_t bytes, char* external = nullptr);
  int NewScratchBuffer(const md& d) { return NewBuffer(static_cast<int64_t>(d.get_size())); }
  // Marks buffer b read or written by the kernel about to be appended.
  void Touch(int b) { pending_.push_back(b); }
  // Appends a kernel: every touched buffer's live range now covers its position.
  int Append(Kernel k);
  int position() const { return static_cast<int>(kernels_.size()); }
  void Extend(int b, int pos);

  // The buffer holding value v in layout `want`. `view`: how the consumer reads v's plain
  // bytes in its own dims (weights, a transposed matrix); default PlainDesc of v.
  Result<int> Use(graph::Value v, const md& want, std::optional<md> view = std::nullopt);
  // The layout v exists in first (what a layout-agnostic consumer should take).
  const md& PrimaryDesc(graph::Value v) const;
  bool Has(graph::Value v) const { return mats_.count(Key(v)) > 0; }
  // Makes v live in layout `d` written by the kernel about to be appended; returns its
  // buffer. A value pinned to program memory (fetch, gradient block) in another layout is
  // written to a temporary and reordered after the kernel (FinishOutputs).
  int Define(graph::Value v, const md& d, std::optional<md> view = std::nullopt);
  // v aliases buffer b in layout d (Reshape).
  void Alias(graph::Value v, const md& d, int b);
  // Appends the reorders that copy pinned outputs of the last kernel into place.
  Status FinishOutputs();
  // Pins v to external memory (program-owned) in its plain layout of dtype `type`.
  void Pin(graph::Value v, char* ptr, dt type);
  bool IsPinned(graph::Value v) const { return pinned_.count(Key(v)) > 0; }

  // Workspaces passed from a forward kernel to its backward kernel.
  std::map<int, std::pair<int, md>> workspace;      // forward node -> (buffer, layout)
  // Forward primitive descriptors by node: the hints their backward primitives need.
  std::map<int, std::shared_ptr<dnnl::convolution_forward::primitive_desc>> conv_pd;
  std::map<int, std::shared_ptr<dnnl::batch_normalization_forward::primitive_desc>> bn_pd;
  std::map<int, std::shared_ptr<dnnl::pooling_forward::primitive_desc>> pool_pd;
  // The program's cross-replica sum, called by synchronized batch-norm kernels at run time.
  std::shared_ptr<CrossReplicaSum> cross_replica_sum;
  size_t scratchpad_bytes = 0;
  void NoteScratchpad(const dnnl::primitive_desc_base& pd);
  // Runs `f` (which creates oneDNN objects) and converts any exception into a Status that
  // names the node and its shapes: the one place oneDNN errors are caught.
  Status Guard(int node, const std::function<Status()>& f);

  std::vector<Kernel>& kernels() { return kernels_; }
  std::vector<Buffer>& buffers() { return buffers_; }

  graph::FusionPlan fusion;
  graph::Schedule schedule;

 private:
  static std::pair<int, int> Key(graph::Value v) { return {v.node, v.output}; }
  Result<int> Reorder(int src_buf, const md& src, const md& dst, const std::string& what);

  const graph::Graph& g_;
  const CompileOptions& o_;
  VariableStore& vars_;
  dnnl::engine& eng_;
  std::vector<Kernel> kernels_;
  std::vector<Buffer> buffers_;
  std::vector<int> pending_;
  std::map<std::pair<int, int>, std::vector<Materialization>> mats_;
  std::map<std::pair<int, int>, std::pair<int, md>> pinned_;  // value -> (buffer, plain layout)
  std::vector<std::tuple<graph::Value, int, md, md>> pending_copies_;  // value, temp buf, from, to
};

// Appends the kernels of node i (and of the nodes fused into it), by the op table (ops.cc).
Status PlanNode(Planner& p, int i);
// Whether the cpu backend lowers ops of `kind` (the op-registry test asks).
bool HasCpuKernel(graph::OpKind kind);

}  // namespace strata::backend::cpu
