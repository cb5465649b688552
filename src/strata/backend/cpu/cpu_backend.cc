// The "cpu" backend: compiles a graph into oneDNN primitives and hand-written kernels over
// one planned arena, and runs them.
//
// Threads: Debian's oneDNN uses OpenMP (DNNL_CPU_RUNTIME == OMP). OpenMP's thread count is
// a per-thread setting, so each program sets it on the thread that compiles (primitives
// partition work by it) and on the thread that runs it: several programs side by side, one
// per replica thread, each with threads = 1, never oversubscribe the cores. libgomp is loaded
// by libdnnl; omp_set_num_threads is looked up there rather than linked.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "strata/backend/backend.h"
#include "strata/backend/cpu/optimizer_kernels.h"
#include "strata/backend/cpu/planner.h"
#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/graph/memory_plan.h"

namespace strata::backend::cpu {
namespace {

using graph::OpKind;
using graph::Value;

void SetOmpThreads(int n) {
  using Fn = void (*)(int);
  static Fn fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (fn != nullptr) fn(n);
}

class CpuProgram : public Program {
 public:
  Status Build(const graph::Graph& g, const CompileOptions& o, std::shared_ptr<VariableStore> vars) {
    vars_ = std::move(vars);
    threads_ = o.threads;
    trace_ = o.trace;
    SetOmpThreads(threads_);
    eng_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
    stream_ = dnnl::stream(eng_);
    Planner p(g, o, *vars_, eng_);
    p.cross_replica_sum = cross_replica_sum_;

    // Gradients of variables are computed whenever the graph has them (they are the
    // program's product for a replica that all-reduces them before the update).
    std::vector<Value> roots = o.fetches;
    for (int i = 0; i < g.num_nodes(); ++i)
      for (int k = 0; k < static_cast<int>(g.node(i).out_shapes.size()); ++k)
        if (g.GradientOf(g.output(i, k)) >= 0) roots.push_back(g.output(i, k));
    p.schedule = graph::MakeSchedule(g, roots);
    // Batch norm + ReLU6 (norm_act_kernels.h): f32, single-threaded kernels, so programs of
    // one thread only (a wider one keeps oneDNN's parallel primitives).
    p.fusion = graph::PlanFusion(
        g, p.schedule,
        {.enabled = o.fuse,
         .bn_act = o.fuse_bn_relu6 && o.threads == 1 && o.precision == Precision::kF32,
         .zero_pad = o.fold_zero_pad,
         .residual = o.fuse_residual},
        o.fetches);

    // Program-owned memory: inputs, variables, constants, gradients, fetches.
    for (int i = 0; i < g.num_nodes(); ++i) {
      const graph::Node& n = g.node(i);
      const Value v = g.output(i);
      if (n.kind == OpKind::kInput) {
        inputs_[i] = Tensor(n.out_dtypes[0], n.out_shapes[0]);
        p.Pin(v, static_cast<char*>(inputs_[i].raw_data()), ToDnnl(n.out_dtypes[0]));
      } else if (n.kind == OpKind::kVariable) {
        STRATA_ASSIGN_OR_RETURN(Tensor t, vars_->Value(n.name));
        p.Pin(v, static_cast<char*>(t.raw_data()), dt::f32);
      } else if (n.kind == OpKind::kConstant) {
        Tensor t(DType::kF32, n.out_shapes[0]);
        for (int64_t e = 0; e < t.num_elements(); ++e) t.data<float>()[e] = graph::ConstantAt(n, e);
        p.Pin(v, static_cast<char*>(t.raw_data()), dt::f32);
        constants_.push_back(std::move(t));
      }
      for (int k = 0; k < static_cast<int>(n.out_shapes.size()); ++k) {
        const int var = g.GradientOf(g.output(i, k));
        if (var < 0) continue;
        STRATA_ASSIGN_OR_RETURN(Tensor t, vars_->Gradient(g.node(var).name));
        p.Pin(g.output(i, k), static_cast<char*>(t.raw_data()), dt::f32);
        grad_views_[{i, k}] = t;
      }
    }
    for (const Value& f : o.fetches) {
      const auto key = std::make_pair(f.node, f.output);
      if (fetches_.count(key)) continue;
      const graph::Node& n = g.node(f.node);
      if (n.kind == OpKind::kInput) {
        fetches_[key] = inputs_[f.node];
      } else if (n.kind == OpKind::kVariable) {
        STRATA_ASSIGN_OR_RETURN(fetches_[key], vars_->Value(n.name));
      } else if (grad_views_.count(key)) {
        fetches_[key] = grad_views_[key];
      } else if (n.kind == OpKind::kConstant) {
        fetches_[key] = Tensor(DType::kF32, f.shape());
        for (int64_t e = 0; e < f.shape().num_elements(); ++e) fetches_[key].data<float>()[e] = graph::ConstantAt(n, e);
      } else {
        fetches_[key] = Tensor(f.dtype(), f.shape());
        p.Pin(f, static_cast<char*>(fetches_[key].raw_data()), ToDnnl(f.dtype()));
      }
    }

    for (int i : p.schedule.order) {
      if (p.fusion.absorbed_by[i] >= 0) continue;
      STRATA_RETURN_IF_ERROR(p.Guard(i, [&] { return PlanNode(p, i); }));
    }

    // Memory: the arena by liveness, then bind every kernel to its addresses.
    std::vector<Buffer>& bufs = p.buffers();
    std::vector<graph::BufferLife> lives;
    std::vector<int> arena_ids;
    for (size_t b = 0; b < bufs.size(); ++b) {
      if (bufs[b].external != nullptr) {
        bufs[b].ptr = bufs[b].external;
        continue;
      }
      if (bufs[b].first < 0) continue;  // planned but never touched
      lives.push_back({bufs[b].bytes, bufs[b].first, bufs[b].last});
      arena_ids.push_back(static_cast<int>(b));
    }
    const graph::MemoryPlan plan = graph::PlanMemory(lives);
    arena_ = Tensor(DType::kU8, Shape{std::max<int64_t>(plan.arena_bytes, 64)});  // zeroed: pages touched now
    scratch_ = Tensor(DType::kU8, Shape{static_cast<int64_t>(std::max<size_t>(p.scratchpad_bytes, 64))});
    arena_bytes_ = plan.arena_bytes;
    naive_bytes_ = plan.naive_bytes;
    for (size_t j = 0; j < arena_ids.size(); ++j)
      bufs[arena_ids[j]].ptr = static_cast<char*>(arena_.raw_data()) + plan.offsets[j];
    char* scratch = static_cast<char*>(scratch_.raw_data());
    return p.Guard(p.schedule.order.empty() ? 0 : p.schedule.order.back(), [&]() -> Status {
      for (Kernel& k : p.kernels()) {
        for (auto& [arg, b, d] : k.dnnl_args) {
          char* ptr = b == -2 ? scratch : bufs[b].ptr;
          if (ptr == nullptr) return Internal(k.info.name + ": a buffer has no address");
          k.mems.emplace_back(d, eng_, ptr);
          k.exec_args.push_back({arg, k.mems.back().get()});
        }
        for (int b : k.bufs) k.ptrs.push_back(bufs[b].ptr);
        infos_.push_back(k.info);
      }
      kernels_ = std::move(p.kernels());
      // A gradient is final after the last kernel that touches its (pinned) buffer.
      const char* grads = static_cast<const char*>(vars_->grads().raw_data());
      const char* grads_end = grads + vars_->grads().nbytes();
      for (const Buffer& b : bufs) {
        if (b.external == nullptr || b.external < grads || b.external >= grads_end) continue;
        const int64_t begin = (b.external - grads) / 4;
        gradient_ready_.push_back({begin, begin + b.bytes / 4, b.last});
      }
      std::sort(gradient_ready_.begin(), gradient_ready_.end(), [](const GradientReady& a, const GradientReady& b) {
        return a.kernel != b.kernel ? a.kernel < b.kernel : a.begin < b.begin;
      });
      return Status::OK();
    });
  }

  uint64_t step() const override { return step_; }
  void set_step(uint64_t step) override { step_ = step; }
  Status Run() override {
    SetOmpThreads(threads_);
    const bool hooked = hook_ && hook_after_.size() == kernels_.size() + 1;
    if (hooked && hook_after_[0]) STRATA_RETURN_IF_ERROR(hook_(-1));
    for (size_t i = 0; i < kernels_.size(); ++i) {
      Kernel& k = kernels_[i];
      const int64_t t0 = trace_ ? NowNanos() : 0;
      if (k.prim) {
        const dnnl_status_t st = dnnl_primitive_execute(k.prim->get(), stream_.get(),
                                                        static_cast<int>(k.exec_args.size()), k.exec_args.data());
        if (st != dnnl_success)
          return Internal(k.info.name + ": oneDNN execute failed with status " + std::to_string(st) + " (" +
                          k.info.shapes + ")");
      }
      if (k.fn) STRATA_RETURN_IF_ERROR(k.fn(k, step_));
      if (trace_)
        std::fprintf(stderr, "strata_trace,%s,%s,%s,%s,%.1f us\n", k.info.op.c_str(), k.info.name.c_str(),
                     k.info.impl.c_str(), k.info.shapes.c_str(), static_cast<double>(NowNanos() - t0) * 1e-3);
      if (hooked && hook_after_[i + 1]) {
        stream_.wait();  // the kernel's writes are done before anyone reads them
        STRATA_RETURN_IF_ERROR(hook_(static_cast<int>(i)));
      }
    }
    stream_.wait();
    ++step_;
    return Status::OK();
  }

  const std::vector<KernelInfo>& kernels() const override { return infos_; }
  const std::vector<GradientReady>& gradient_ready() const override { return gradient_ready_; }
  int64_t arena_bytes() const override { return arena_bytes_; }
  int64_t total_bytes() const override {
    int64_t t = static_cast<int64_t>(arena_.nbytes() + scratch_.nbytes());
    for (const auto& [_, x] : inputs_) t += static_cast<int64_t>(x.nbytes());
    for (const auto& x : constants_) t += static_cast<int64_t>(x.nbytes());
    t += static_cast<int64_t>(vars_->params().nbytes() + vars_->grads().nbytes());
    return t;
  }

 private:
  int threads_ = 1;
  bool trace_ = false;
  dnnl::engine eng_;
  dnnl::stream stream_;
  std::vector<Kernel> kernels_;
  std::vector<KernelInfo> infos_;
  std::vector<GradientReady> gradient_ready_;
  std::map<std::pair<int, int>, Tensor> grad_views_;
  std::vector<Tensor> constants_;
  Tensor arena_, scratch_;
  int64_t arena_bytes_ = 0, naive_bytes_ = 0;
  uint64_t step_ = 0;
};

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  // bf16 runs on oneDNN's AVX-512 kernels: natively with AVX512_BF16, emulated (correct,
  // slower) without. oneDNN 2.6 has no bf16 convolution for AVX2, and Strata's own bf16
  // kernels assume AVX-512 too, so an AVX2 host (or one capped by ONEDNN_MAX_CPU_ISA or
  // STRATA_MAX_ISA) is refused before any work, with the way out.
  Status SupportsPrecision(Precision precision) const override {
    if (precision != Precision::kBF16) return Status::OK();
    const auto onednn = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto avx512_core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    const bool onednn_avx512 = (onednn & avx512_core) == avx512_core;
    if (onednn_avx512 && HostIsa().avx512f) return Status::OK();
    const bool capped = DetectedIsa().avx512f;
    return Unimplemented(std::string("bf16 (mixed_bfloat16) needs AVX-512, which ") +
                         (capped ? "is capped off here (ONEDNN_MAX_CPU_ISA / STRATA_MAX_ISA)"
                                 : "this CPU lacks (it has AVX2 at most)") +
                         ": oneDNN has no bf16 kernels below AVX-512; use --precision f32 (float32)");
  }
  Result<std::unique_ptr<Program>> Compile(const graph::Graph& g, const CompileOptions& o,
                                           std::shared_ptr<VariableStore> vars) override {
    auto program = std::make_unique<CpuProgram>();
    STRATA_RETURN_IF_ERROR(program->Build(g, o, std::move(vars)));
    return std::unique_ptr<Program>(std::move(program));
  }
  void ApplyUpdate(const UpdateRule& r, const UpdateBuffers& b) const override {
    switch (r.kind) {
      case UpdateRule::Kind::kSgd: SgdUpdate(b.w, b.g, b.s0, b.n, {r.lr, r.momentum, r.nesterov}); break;
      case UpdateRule::Kind::kAdam:
        AdamUpdate(b.w, b.g, b.s0, b.s1, b.n, {r.lr, r.beta_1, r.beta_2, r.epsilon, r.weight_decay, r.step});
        break;
      case UpdateRule::Kind::kRmsProp: RmsPropUpdate(b.w, b.g, b.s0, b.s1, b.n, {r.lr, r.rho, r.momentum, r.epsilon}); break;
    }
  }
};

}  // namespace
}  // namespace strata::backend::cpu

namespace strata::backend {
std::unique_ptr<Backend> NewCpuBackend() { return std::make_unique<cpu::CpuBackend>(); }
}  // namespace strata::backend
