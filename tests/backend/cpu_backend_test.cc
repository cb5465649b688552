// The compiled training step of the reference CNN on the cpu backend: same numbers as the
// f64 reference, loss goes down on class-structured data in f32 and bf16, one contiguous
// block per kind of state, shared variables, per-kernel trace, errors as values; the optimizer
// update (Backend::ApplyUpdate, outside the program) of the cpu backend against the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include <oneapi/dnnl/dnnl.hpp>

#include "common/bf16_expected.h"
#include "common/reference_cnn_graph.h"
#include "strata/backend/backend.h"
#include "strata/backend/compile.h"
#include "strata/backend/cpu/optimizer_kernels.h"
#include "strata/core/cpu.h"

namespace strata::backend {
namespace {

using graph::Graph;
using graph::Value;
using testing::ReferenceCnn;

// "Real-ish" data: each class is a fixed random 28x28 pattern of strokes; examples are the
// pattern, shifted by up to 2 pixels, scaled and noised. Learnable but not trivially so.
struct SyntheticFashion {
  explicit SyntheticFashion(uint64_t seed) : rng(seed) {
    std::uniform_real_distribution<float> u(0, 1);
    templates.resize(10 * 28 * 28);
    for (float& t : templates) t = u(rng) < 0.3f ? 1.0f : 0.0f;
  }
  void Fill(float* images, int32_t* labels, int64_t batch) {
    std::uniform_int_distribution<int> cls(0, 9), shift(-2, 2);
    std::normal_distribution<float> noise(0, 0.3f);
    for (int64_t b = 0; b < batch; ++b) {
      const int c = cls(rng), dy = shift(rng), dx = shift(rng);
      labels[b] = c;
      for (int y = 0; y < 28; ++y)
        for (int x = 0; x < 28; ++x) {
          const int sy = std::clamp(y + dy, 0, 27), sx = std::clamp(x + dx, 0, 27);
          images[(b * 28 + y) * 28 + x] = templates[(c * 28 + sy) * 28 + sx] + noise(rng);
        }
    }
  }
  std::mt19937_64 rng;
  std::vector<float> templates;
};

bool OneDnnHasAvx512() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512_core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (isa & avx512_core) == avx512_core;
}
// From the CPU's flags and the caps, not from PrecisionSupported (common/bf16_expected.h).
bool Bf16Runs() { return testing::Bf16MustRun(); }

// Compiling a bf16 step where bf16 cannot run is Unimplemented, naming AVX-512 and f32.
void ExpectBf16Refused() {
  Graph g;
  auto m = testing::BuildReferenceCnn(g, {.batch = 4});
  ASSERT_TRUE(m.ok());
  auto p = Compile(g, {.fetches = {m->loss}, .precision = Precision::kBF16});
  ASSERT_FALSE(p.ok()) << "bf16 compiled on a host where PrecisionSupported refuses it";
  EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented) << p.status().ToString();
  EXPECT_NE(p.status().message().find("AVX-512"), std::string::npos) << p.status().ToString();
  EXPECT_NE(p.status().message().find("f32"), std::string::npos) << p.status().ToString();
}

struct StepSetup {
  Graph g;
  ReferenceCnn m;
  std::unique_ptr<Program> program;
  std::vector<float> velocity;  // the SGD momentum slot, outside the program as in keras
  // One training step: the program, then SGD with Nesterov momentum 0.9 through `backend`.
  Status Step(float lr, const std::string& backend = "cpu") {
    STRATA_RETURN_IF_ERROR(program->Run());
    testing::ApplyReferenceSgd(*FindBackend(backend), program->variables(), lr, &velocity);
    return Status::OK();
  }
};

void MakeStep(StepSetup& s, int64_t batch, CompileOptions o, float dropout = 0.3f) {
  auto m = testing::BuildReferenceCnn(s.g, {.batch = batch, .dropout = dropout});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  s.m = *m;
  o.fetches.push_back(s.m.loss);
  auto p = Compile(s.g, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  s.program = std::move(*p);
}

void ExpectStepMatchesReferenceEvaluator(ConvAlgorithm conv_algorithm) {
  StepSetup cpu, ref;
  ASSERT_NO_FATAL_FAILURE(MakeStep(cpu, 4, {.conv_algorithm = conv_algorithm}));
  ASSERT_NO_FATAL_FAILURE(MakeStep(ref, 4, {.backend = "reference"}));
  SyntheticFashion data(1);
  data.Fill(cpu.program->input(cpu.m.images).data<float>(), cpu.program->input(cpu.m.labels).data<int32_t>(), 4);
  std::memcpy(ref.program->input(ref.m.images).raw_data(), cpu.program->input(cpu.m.images).raw_data(), 4 * 28 * 28 * 4);
  std::memcpy(ref.program->input(ref.m.labels).raw_data(), cpu.program->input(cpu.m.labels).raw_data(), 4 * 4);
  // Same initial variables (initializers are deterministic per seed).
  ASSERT_EQ(cpu.program->variables().params().nbytes(), ref.program->variables().params().nbytes());
  ASSERT_EQ(0, std::memcmp(cpu.program->variables().params().raw_data(), ref.program->variables().params().raw_data(),
                           cpu.program->variables().params().nbytes()));
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(cpu.Step(0.05f).ok());
    Status st = ref.Step(0.05f, "reference");
    ASSERT_TRUE(st.ok()) << st.ToString();
    const float lc = *cpu.program->fetch(cpu.m.loss).data<float>();
    const float lr = *ref.program->fetch(ref.m.loss).data<float>();
    EXPECT_NEAR(lc, lr, 1e-4 * std::max(1.0f, std::fabs(lr))) << "step " << step;
    // Gradients (before the update) and parameters (after it), block against block.
    for (int which = 0; which < 2; ++which) {
      const Tensor& a = which == 0 ? cpu.program->variables().grads() : cpu.program->variables().params();
      const Tensor& b = which == 0 ? ref.program->variables().grads() : ref.program->variables().params();
      double scale = 1e-3, worst = 0;
      for (int64_t e = 0; e < b.num_elements(); ++e) scale = std::max(scale, std::fabs(double(b.data<float>()[e])));
      for (int64_t e = 0; e < b.num_elements(); ++e)
        worst = std::max(worst, std::fabs(double(a.data<float>()[e]) - b.data<float>()[e]));
      EXPECT_LT(worst, 2e-4 * scale) << "step " << step << (which == 0 ? " grads" : " params");
    }
  }
  // Batch-norm moving statistics moved and agree.
  auto mm_c = cpu.program->variables().Value("conv2d_bn/moving_mean");
  auto mm_r = ref.program->variables().Value("conv2d_bn/moving_mean");
  ASSERT_TRUE(mm_c.ok() && mm_r.ok());
  EXPECT_NE(mm_c->data<float>()[0], 0.0f);
  EXPECT_NEAR(mm_c->data<float>()[0], mm_r->data<float>()[0], 1e-5);
}

TEST(CpuBackendTest, ReferenceCnnStepMatchesReferenceEvaluator) {  // Winograd where it applies
  ExpectStepMatchesReferenceEvaluator(ConvAlgorithm::kAuto);
}

TEST(CpuBackendTest, ReferenceCnnStepMatchesReferenceEvaluatorDirect) {
  ExpectStepMatchesReferenceEvaluator(ConvAlgorithm::kDirect);
}

// Which convolutions take Winograd: f32 forward, backward-data and (oneDNN's, AVX-512 only)
// backward-weights of the layers with whole channel blocks; never the 1-channel first layer
// (padded to a block it is slower) or bf16. Who implements it depends on the CPU: oneDNN on
// AVX-512, Strata's own F(4x4, 3x3) forward and backward-data on AVX2 (backend/cpu/winograd.h),
// nobody without AVX2.
TEST(CpuBackendTest, WinogradForF32ConvolutionsOfBlockedChannels) {
  const bool any_winograd = OneDnnHasAvx512() || HostIsa().avx2;
  for (ConvAlgorithm a : {ConvAlgorithm::kAuto, ConvAlgorithm::kDirect}) {
    for (Precision precision : {Precision::kF32, Precision::kBF16}) {
      if (precision == Precision::kBF16 && !Bf16Runs()) continue;  // refused: BF16IsRefusedWhereItCannotRun
      StepSetup s;
      ASSERT_NO_FATAL_FAILURE(MakeStep(s, 8, {.precision = precision, .conv_algorithm = a}));
      int wino = 0;
      for (const KernelInfo& k : s.program->kernels()) {
        if (k.impl.find("wino") == std::string::npos) continue;
        ++wino;
        const bool weights_too = OneDnnHasAvx512();
        EXPECT_TRUE(k.op == "conv_fwd" || k.op == "conv_bwd_data" || (weights_too && k.op == "conv_bwd_weights"))
            << k.op << " " << k.name;
        EXPECT_EQ(k.name.find("conv2d "), std::string::npos) << "the 1-channel first layer: " << k.name;
        if (!OneDnnHasAvx512()) {
          EXPECT_EQ(k.impl, "strata:avx2-winograd") << k.name;
        }
      }
      // conv2d_1..3 forward and backward-data, and on AVX-512 backward-weights.
      const int expect = a == ConvAlgorithm::kAuto && precision == Precision::kF32 && any_winograd
                             ? (OneDnnHasAvx512() ? 9 : 6)
                             : 0;
      EXPECT_EQ(wino, expect) << (a == ConvAlgorithm::kAuto ? "auto " : "direct ")
                              << (precision == Precision::kF32 ? "f32" : "bf16");
    }
  }
}

double TrainLoss(Precision precision, int steps, float* first) {
  StepSetup s;
  MakeStep(s, 32, {.precision = precision});
  if (s.program == nullptr) return 0;
  SyntheticFashion data(3);
  double tail = 0;
  for (int i = 0; i < steps; ++i) {
    data.Fill(s.program->input(s.m.images).data<float>(), s.program->input(s.m.labels).data<int32_t>(), 32);
    EXPECT_TRUE(s.Step(0.02f).ok());
    const float loss = *s.program->fetch(s.m.loss).data<float>();
    EXPECT_TRUE(std::isfinite(loss));
    if (i == 0) *first = loss;
    if (i >= steps - 5) tail += loss / 5;
  }
  return tail;
}

TEST(CpuBackendTest, LossDecreasesF32) {
  float first = 0;
  const double last = TrainLoss(Precision::kF32, 40, &first);
  EXPECT_GT(first, 1.5);        // about ln(10) at the start
  EXPECT_LT(last, 0.5 * first);  // learned something
}

TEST(CpuBackendTest, LossDecreasesBF16) {
  if (!Bf16Runs()) return ExpectBf16Refused();
  float first = 0;
  const double last = TrainLoss(Precision::kBF16, 40, &first);
  EXPECT_GT(first, 1.5);
  EXPECT_LT(last, 0.5 * first);
}

TEST(CpuBackendTest, BF16StepRunsConvolutionsInBF16) {
  if (!Bf16Runs()) return ExpectBf16Refused();
  StepSetup s;
  ASSERT_NO_FATAL_FAILURE(MakeStep(s, 8, {.precision = Precision::kBF16}));
  int bf16_convs = 0;
  for (const KernelInfo& k : s.program->kernels())
    if (k.op.rfind("conv_", 0) == 0 && k.impl.find("bf16") != std::string::npos) ++bf16_convs;
  EXPECT_GE(bf16_convs, 8) << "expected oneDNN bf16 implementations for the convolutions";
}

// Where oneDNN has AVX-512 (natively or capped by nothing), bf16 compiles; below it the compile
// is refused with one line that names AVX-512 and the way out, before any kernel exists.
TEST(CpuBackendTest, BF16IsRefusedWhereItCannotRun) {
  EXPECT_EQ(PrecisionSupported(Precision::kBF16).ok(), Bf16Runs()) << PrecisionSupported(Precision::kBF16).ToString();
  EXPECT_EQ(Bf16Runs(), OneDnnHasAvx512() && HostIsa().avx512f);
  const std::vector<std::string> precisions = TrainablePrecisions();
  ASSERT_FALSE(precisions.empty());
  EXPECT_EQ(precisions[0], "f32");
  EXPECT_EQ(precisions.size(), Bf16Runs() ? 2u : 1u);
  if (!Bf16Runs()) ExpectBf16Refused();
}

TEST(CpuBackendTest, ContiguousBlocksWithNamedViews) {
  StepSetup s;
  ASSERT_NO_FATAL_FAILURE(MakeStep(s, 4, {}));
  VariableStore& v = s.program->variables();
  // 4 convs + 2 dense: kernels, biases, and batch-norm gamma/beta are trainable.
  const int64_t trainable = (9 * 32 + 32) + (9 * 32 * 32 + 32) + (9 * 32 * 64 + 64) + (9 * 64 * 64 + 64) +
                            (3136 * 128 + 128) + (128 * 10 + 10) + 2 * (32 + 32 + 64 + 64);
  EXPECT_EQ(v.num_trainable(), trainable);
  EXPECT_EQ(v.grads().num_elements(), trainable);
  EXPECT_EQ(v.params().num_elements(), trainable + 2 * (32 + 32 + 64 + 64));  // + moving statistics
  // Parameters and state only: trainable ones first, at the offsets of their gradients; then
  // the moving statistics. No optimizer slots (they live outside the program).
  int64_t next = 0;
  for (const VariableStore::Entry& e : v.entries()) {
    EXPECT_TRUE(e.role == graph::VariableRole::kParameter || e.role == graph::VariableRole::kState) << e.name;
    EXPECT_EQ(e.trainable, e.role == graph::VariableRole::kParameter) << e.name;
    EXPECT_EQ(e.offset, next) << e.name;
    next += e.size;
  }
  EXPECT_EQ(next, v.params().num_elements());
  EXPECT_EQ(v.entries().size(), 4u * 6 + 4);  // conv kernel, bias, gamma, beta, moving mean, variance; 2 dense
  auto k = v.Value("conv2d_1/kernel");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->shape(), (Shape{3, 3, 32, 32}));
  auto gk = v.Gradient("conv2d_1/kernel");
  ASSERT_TRUE(gk.ok());
  // Views alias the blocks: one write to checkpoint, one buffer to all-reduce.
  const char* base = static_cast<const char*>(v.params().raw_data());
  const char* view = static_cast<const char*>(k->raw_data());
  EXPECT_TRUE(view >= base && view < base + v.params().nbytes());
  EXPECT_FALSE(v.Gradient("conv2d_bn/moving_mean").ok());
  EXPECT_FALSE(v.Value("nope").ok());
}

TEST(CpuBackendTest, EvalProgramSharesVariablesWithTrainProgram) {
  StepSetup train;
  ASSERT_NO_FATAL_FAILURE(MakeStep(train, 8, {}));
  Graph eval_graph;
  auto em = testing::BuildReferenceCnn(eval_graph, {.batch = 8, .training = false});
  ASSERT_TRUE(em.ok());
  auto eval = Compile(eval_graph, {.fetches = {em->logits}, .variables = train.program->shared_variables()});
  ASSERT_TRUE(eval.ok()) << eval.status().ToString();
  SyntheticFashion data(5);
  data.Fill(train.program->input(train.m.images).data<float>(), train.program->input(train.m.labels).data<int32_t>(), 8);
  std::memcpy((*eval)->input(em->images).raw_data(), train.program->input(train.m.images).raw_data(), 8 * 28 * 28 * 4);
  ASSERT_TRUE((*eval)->Run().ok());
  std::vector<float> before((*eval)->fetch(em->logits).data<float>(), (*eval)->fetch(em->logits).data<float>() + 80);
  ASSERT_TRUE(train.Step(0.1f).ok());
  ASSERT_TRUE((*eval)->Run().ok());
  int changed = 0;
  for (int i = 0; i < 80; ++i) changed += before[i] != (*eval)->fetch(em->logits).data<float>()[i];
  EXPECT_GT(changed, 40) << "the eval program must see the train program's updated weights";
  // A graph whose variable has another shape is refused.
  Graph other;
  auto ov = other.Variable("dense/kernel", {10, 10});
  ASSERT_TRUE(ov.ok());
  auto bad = Compile(other, {.fetches = {*ov}, .variables = train.program->shared_variables()});
  EXPECT_FALSE(bad.ok());
}

TEST(CpuBackendTest, BadLabelIsAnErrorNamingTheExample) {
  StepSetup s;
  ASSERT_NO_FATAL_FAILURE(MakeStep(s, 4, {}));
  s.program->input(s.m.labels).data<int32_t>()[2] = 12;
  Status st = s.program->Run();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("label 12 of example 2"), std::string::npos) << st.ToString();
}

TEST(CpuBackendTest, TracePrintsOneLinePerKernel) {
  StepSetup s;
  ASSERT_NO_FATAL_FAILURE(MakeStep(s, 4, {.trace = true}));
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(s.program->Run().ok());
  const std::string err = ::testing::internal::GetCapturedStderr();
  size_t lines = 0;
  for (size_t pos = 0; (pos = err.find("strata_trace,", pos)) != std::string::npos; ++pos) ++lines;
  EXPECT_EQ(lines, s.program->kernels().size());
  EXPECT_NE(err.find("conv_fwd"), std::string::npos);
  EXPECT_NE(err.find(" us"), std::string::npos);
}

TEST(CpuBackendTest, FlopCountsAndArenaPlan) {
  StepSetup s;
  ASSERT_NO_FATAL_FAILURE(MakeStep(s, 16, {}));
  const double per_image = static_cast<double>(s.program->matrix_flops_per_step()) / 16;
  EXPECT_NEAR(per_image / 1e6, 111.8, 0.5);
  EXPECT_GT(s.program->flops_per_step(), s.program->matrix_flops_per_step());
  EXPECT_GT(s.program->arena_bytes(), 0);
  // Fused kernels: four conv+bias(+nothing), four bn+relu, four relu-grad+bn-grad, four
  // conv-weights+bias-grad, one dense+bias+relu.
  int fused = 0;
  for (const KernelInfo& k : s.program->kernels()) fused += k.name.find('+') != std::string::npos;
  EXPECT_GE(fused, 17);
}

TEST(CpuBackendTest, ProgramWithTwoThreadsMatchesOneThread) {
  StepSetup a, b;
  ASSERT_NO_FATAL_FAILURE(MakeStep(a, 8, {.threads = 1}, 0.0f));
  ASSERT_NO_FATAL_FAILURE(MakeStep(b, 8, {.threads = 2}, 0.0f));
  SyntheticFashion data(9);
  data.Fill(a.program->input(a.m.images).data<float>(), a.program->input(a.m.labels).data<int32_t>(), 8);
  std::memcpy(b.program->input(b.m.images).raw_data(), a.program->input(a.m.images).raw_data(), 8 * 28 * 28 * 4);
  std::memcpy(b.program->input(b.m.labels).raw_data(), a.program->input(a.m.labels).raw_data(), 8 * 4);
  ASSERT_TRUE(a.program->Run().ok());
  ASSERT_TRUE(b.program->Run().ok());
  EXPECT_NEAR(*a.program->fetch(a.m.loss).data<float>(), *b.program->fetch(b.m.loss).data<float>(), 1e-4);
}

TEST(OptimizerKernelsTest, VectorisedMatchesScalar) {
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0, 1);
  const int64_t count = 1003;  // not a multiple of the vector width
  std::vector<float> w(count), g(count), m(count), v(count);
  for (int64_t i = 0; i < count; ++i) { w[i] = n(rng); g[i] = n(rng); m[i] = n(rng) * 0.1f; v[i] = std::fabs(n(rng)); }
  auto check = [&](auto run) {
    std::vector<float> w1 = w, m1 = m, v1 = v, w2 = w, m2 = m, v2 = v;
    run(false, w1.data(), m1.data(), v1.data());
    run(true, w2.data(), m2.data(), v2.data());
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_NEAR(w1[i], w2[i], 1e-6f * std::max(1.0f, std::fabs(w1[i])));
      ASSERT_NEAR(m1[i], m2[i], 1e-6f * std::max(1.0f, std::fabs(m1[i])));
    }
  };
  check([&](bool fast, float* ww, float* mm, float*) {
    cpu::SgdParams p{0.1f, 0.9f, true};
    fast ? cpu::SgdUpdate(ww, g.data(), mm, count, p) : cpu::scalar::SgdUpdate(ww, g.data(), mm, count, p);
  });
  check([&](bool fast, float* ww, float* mm, float* vv) {
    cpu::AdamParams p{0.01f, 0.9f, 0.999f, 1e-7f, 0.01f, 3};
    fast ? cpu::AdamUpdate(ww, g.data(), mm, vv, count, p) : cpu::scalar::AdamUpdate(ww, g.data(), mm, vv, count, p);
  });
  check([&](bool fast, float* ww, float* mm, float* vv) {
    cpu::RmsPropParams p{0.01f, 0.9f, 0.5f, 1e-7f};
    fast ? cpu::RmsPropUpdate(ww, g.data(), vv, mm, count, p) : cpu::scalar::RmsPropUpdate(ww, g.data(), vv, mm, count, p);
  });
  // Nesterov SGD by hand for one element.
  float w0 = 1, v0 = 0.5f, g0 = 2;
  cpu::SgdUpdate(&w0, &g0, &v0, 1, {0.1f, 0.9f, true});
  EXPECT_NEAR(v0, 0.9f * 0.5f - 0.2f, 1e-6);
  EXPECT_NEAR(w0, 1 + 0.9f * v0 - 0.2f, 1e-6);
}

// The optimizer update runs outside the program, through Backend::ApplyUpdate: the cpu
// backend's vector kernels match the reference backend's f64 loops over 3 steps on the same
// gradients, for every rule keras::OptimizerState asks for. 1003 elements: the vector body and
// a tail (not a multiple of the vector width); weights and slots are compared.
TEST(CpuBackendTest, ApplyUpdateMatchesReference) {
  using Kind = UpdateRule::Kind;
  struct Case {
    const char* name;
    UpdateRule rule;
    int slots;
  };
  auto rule = [](Kind kind) {
    UpdateRule r;
    r.kind = kind;
    r.lr = 0.01f;
    return r;
  };
  std::vector<Case> cases = {{"sgd", rule(Kind::kSgd), 0},          {"sgd momentum", rule(Kind::kSgd), 1},
                             {"sgd nesterov", rule(Kind::kSgd), 1}, {"adam", rule(Kind::kAdam), 2},
                             {"adamw", rule(Kind::kAdam), 2},       {"rmsprop", rule(Kind::kRmsProp), 1},
                             {"rmsprop momentum", rule(Kind::kRmsProp), 2}};
  cases[1].rule.momentum = 0.9f;
  cases[2].rule.momentum = 0.9f;
  cases[2].rule.nesterov = true;
  cases[4].rule.weight_decay = 0.05f;
  cases[6].rule.momentum = 0.5f;
  const Backend* cpu = FindBackend("cpu");
  const Backend* ref = FindBackend("reference");
  ASSERT_TRUE(cpu != nullptr && ref != nullptr);
  const int64_t n = 1003;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> w0(n);
  for (float& x : w0) x = u(rng);
  for (Case& c : cases) {
    std::vector<float> w[2] = {w0, w0}, s0[2], s1[2];
    for (int b = 0; b < 2; ++b) {
      s0[b].assign(n, 0.0f);
      s1[b].assign(n, 0.0f);
    }
    for (int step = 1; step <= 3; ++step) {
      std::vector<float> g(n);
      for (float& x : g) x = u(rng);
      c.rule.step = static_cast<float>(step);
      for (int b = 0; b < 2; ++b)
        (b == 0 ? cpu : ref)
            ->ApplyUpdate(c.rule, {w[b].data(), g.data(), c.slots > 0 ? s0[b].data() : nullptr,
                                   c.slots > 1 ? s1[b].data() : nullptr, n});
    }
    double moved = 0;
    for (int64_t e = 0; e < n; ++e) {
      moved = std::max(moved, std::fabs(double(w[1][e]) - w0[e]));
      ASSERT_NEAR(w[0][e], w[1][e], 1e-5) << c.name << " weight " << e;
      ASSERT_NEAR(s0[0][e], s0[1][e], 1e-5) << c.name << " slot 0, " << e;
      ASSERT_NEAR(s1[0][e], s1[1][e], 1e-5) << c.name << " slot 1, " << e;
    }
    EXPECT_GT(moved, 1e-3) << c.name << ": the update must move the weights";
  }
}

}  // namespace
}  // namespace strata::backend
