// Strata's Winograd F(4x4, 3x3) (backend/cpu/winograd.h) against oneDNN's direct convolution,
// forward and backward-data, on the reference CNN's layers (batch 128) and ResNet-style 3x3
// layers (batch 8), one thread; and oneDNN's own Winograd backward-weights (AVX-512 only)
// against its direct one on the reference CNN's, DenseNet121's and ResNet50's 3x3 layers at
// the batch bench-step trains them at (OneDnnWeights/). To see the AVX2 host this kernel is for on an AVX-512
// machine, run with ONEDNN_MAX_CPU_ISA=AVX2 STRATA_MAX_ISA=avx2 (oneDNN then has no
// Winograd and picks its AVX2 direct kernel, nChw8c). Counter "GFLOP/s" is the direct
// convolution's FLOPs (2 x multiply-adds) per second, for both: effective for Winograd.
//
//   ONEDNN_MAX_CPU_ISA=AVX2 STRATA_MAX_ISA=avx2 OMP_NUM_THREADS=1 taskset -c 1 build-wino/bench/winograd_bench
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/backend/cpu/winograd.h"

namespace strata::backend::cpu::winograd {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

struct Layer {
  int64_t n, h, w, cin, cout;
};
const Layer kLayers[] = {
    {128, 28, 28, 32, 32}, {128, 14, 14, 32, 64}, {128, 14, 14, 64, 64},  // reference CNN
    {8, 56, 56, 64, 64},   {8, 28, 28, 128, 128}, {8, 14, 14, 256, 256}, {8, 7, 7, 512, 512},  // ResNet
};

void OneThread() {
  using Fn = void (*)(int);
  static Fn fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (fn != nullptr) fn(1);
}

std::vector<float> Random(int64_t count) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(count);
  for (float& f : v) f = u(rng);
  return v;
}

// Backward-weights: the reference CNN (128), DenseNet121's 128 -> 32 and ResNet50's (32 a replica).
const Layer kWeightLayers[] = {
    {128, 28, 28, 32, 32}, {128, 14, 14, 32, 64}, {128, 14, 14, 64, 64},
    {32, 56, 56, 128, 32}, {32, 28, 28, 128, 32}, {32, 14, 14, 128, 32}, {32, 7, 7, 128, 32},
    {32, 56, 56, 64, 64},  {32, 28, 28, 128, 128}, {32, 14, 14, 256, 256}, {32, 7, 7, 512, 512},
};

double Flops(const Layer& l) { return 2.0 * l.n * l.h * l.w * l.cin * l.cout * 9; }

void BM_Winograd(benchmark::State& state, Layer l, Pass pass) {
  Geometry g;
  g.batch = l.n;
  g.in_channels = l.cin;
  g.out_channels = l.cout;
  g.in_h = g.out_h = l.h;
  g.in_w = g.out_w = l.w;
  g.pad_top = g.pad_left = 1;
  Conv3x3 conv(g, pass);
  const bool fwd = pass == Pass::kForward;
  std::vector<float> src = Random(l.n * l.h * l.w * (fwd ? l.cin : l.cout));
  std::vector<float> dst(l.n * l.h * l.w * (fwd ? l.cout : l.cin));
  std::vector<float> w = Random(9 * l.cin * l.cout), bias = Random(l.cout);
  std::vector<char> scratch(conv.scratch_bytes());
  for (auto _ : state) {
    conv.Run(src.data(), w.data(), fwd ? bias.data() : nullptr, dst.data(), scratch.data());
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetLabel(IsaName(conv.isa()));
  state.counters["GFLOP/s"] = benchmark::Counter(Flops(l) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// Fills (and so first-touches) a oneDNN primitive's arguments, then times its runs on one thread.
void TimePrimitive(benchmark::State& state, const dnnl::primitive& prim, dnnl::stream& s,
                   std::unordered_map<int, dnnl::memory>& args, const Layer& l) {
  for (auto& [id, m] : args) {
    float* p = static_cast<float*>(m.get_data_handle());
    const size_t count = m.get_desc().get_size() / sizeof(float);
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<float>(i % 17) * 0.01f;
  }
  for (auto _ : state) {
    prim.execute(s, args);
    s.wait();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(Flops(l) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_OneDnnDirect(benchmark::State& state, Layer l, Pass pass) {
  OneThread();
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const dnnl::memory::dims x{l.n, l.cin, l.h, l.w}, y{l.n, l.cout, l.h, l.w}, wd{l.cout, l.cin, 3, 3}, st{1, 1},
      pad{1, 1};
  const dnnl::memory::desc xa(x, dt::f32, tag::any), ya(y, dt::f32, tag::any), wa(wd, dt::f32, tag::any);
  dnnl::convolution_forward::primitive_desc fpd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, xa, wa,
                                      dnnl::memory::desc({l.cout}, dt::f32, tag::a), ya, st, pad, pad),
      eng);
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
  if (pass == Pass::kForward) {
    prim = dnnl::convolution_forward(fpd);
    args = {{DNNL_ARG_SRC, dnnl::memory(fpd.src_desc(), eng)},
            {DNNL_ARG_WEIGHTS, dnnl::memory(fpd.weights_desc(), eng)},
            {DNNL_ARG_BIAS, dnnl::memory(fpd.bias_desc(), eng)},
            {DNNL_ARG_DST, dnnl::memory(fpd.dst_desc(), eng)}};
    state.SetLabel(fpd.impl_info_str());
  } else {
    dnnl::convolution_backward_data::primitive_desc bpd(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, xa, wa, ya, st, pad, pad), eng,
        fpd);
    prim = dnnl::convolution_backward_data(bpd);
    args = {{DNNL_ARG_DIFF_DST, dnnl::memory(bpd.diff_dst_desc(), eng)},
            {DNNL_ARG_WEIGHTS, dnnl::memory(bpd.weights_desc(), eng)},
            {DNNL_ARG_DIFF_SRC, dnnl::memory(bpd.diff_src_desc(), eng)}};
    state.SetLabel(bpd.impl_info_str());
  }
  TimePrimitive(state, prim, s, args, l);
}

// oneDNN's backward-weights of a 3x3 'same' convolution with bias, direct or Winograd (which
// takes the Winograd forward as its hint, as the cpu backend's plan does).
void BM_OneDnnWeights(benchmark::State& state, Layer l, dnnl::algorithm alg) {
  OneThread();
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const dnnl::memory::dims x{l.n, l.cin, l.h, l.w}, y{l.n, l.cout, l.h, l.w}, wd{l.cout, l.cin, 3, 3}, st{1, 1},
      pad{1, 1};
  const dnnl::memory::desc xa(x, dt::f32, tag::any), ya(y, dt::f32, tag::any), wa(wd, dt::f32, tag::any),
      ba({l.cout}, dt::f32, tag::a);
  std::optional<dnnl::convolution_backward_weights::primitive_desc> pd;
  try {
    dnnl::convolution_forward::primitive_desc fpd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, xa, wa, ba, ya, st, pad, pad), eng);
    pd.emplace(dnnl::convolution_backward_weights::desc(alg, xa, wa, ba, ya, st, pad, pad), eng, fpd);
  } catch (const dnnl::error&) {
    state.SkipWithError("oneDNN has no such kernel on this CPU (Winograd: AVX-512 only)");
    return;
  }
  dnnl::convolution_backward_weights prim(*pd);
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, dnnl::memory(pd->src_desc(), eng)},
                                                {DNNL_ARG_DIFF_DST, dnnl::memory(pd->diff_dst_desc(), eng)},
                                                {DNNL_ARG_DIFF_WEIGHTS, dnnl::memory(pd->diff_weights_desc(), eng)},
                                                {DNNL_ARG_DIFF_BIAS, dnnl::memory(pd->diff_bias_desc(), eng)}};
  state.SetLabel(pd->impl_info_str());
  TimePrimitive(state, prim, s, args, l);
}

std::string ShapeName(const Layer& l) {
  return std::to_string(l.n) + "x" + std::to_string(l.h) + "x" + std::to_string(l.w) + "x" + std::to_string(l.cin) +
         "to" + std::to_string(l.cout);
}

const bool kRegistered = [] {
  for (const Layer& l : kLayers) {
    const std::string shape = ShapeName(l);
    for (Pass pass : {Pass::kForward, Pass::kBackwardData}) {
      const std::string p = pass == Pass::kForward ? "fwd/" : "bwd_data/";
      benchmark::RegisterBenchmark(("Winograd/" + p + shape).c_str(), BM_Winograd, l, pass)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
      benchmark::RegisterBenchmark(("OneDnnDirect/" + p + shape).c_str(), BM_OneDnnDirect, l, pass)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
    }
  }
  for (const Layer& l : kWeightLayers) {
    for (const auto& [name, alg] : {std::pair{"direct/", dnnl::algorithm::convolution_direct},
                                    std::pair{"winograd/", dnnl::algorithm::convolution_winograd}}) {
      benchmark::RegisterBenchmark(("OneDnnWeights/" + std::string(name) + ShapeName(l)).c_str(), BM_OneDnnWeights, l,
                                   alg)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
    }
  }
  return true;
}();

}  // namespace
}  // namespace strata::backend::cpu::winograd
BENCHMARK_MAIN();
