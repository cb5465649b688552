#include "strata/keras/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "strata/backend/cpu/optimizer_kernels.h"
#include "strata/graph/autodiff.h"
#include "strata/keras/callbacks.h"
#include "strata/keras/checkpoint.h"
#include "strata/keras/model_internal.h"

namespace strata::keras {

using graph::Value;

double LogValue(const Logs& logs, const std::string& key, double fallback) {
  for (const auto& [k, v] : logs)
    if (k == key) return v;
  return fallback;
}

Model::Model(std::string name, std::vector<KTensor> inputs, std::vector<KTensor> outputs)
    : name_(std::move(name)), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}

Model::~Model() = default;

// The cross-replica sum of synchronized batch norm. Each replica writes its partial sums into
// its slot and meets the others at the strategy barrier; then every replica adds the slots in
// replica order (the same bits everywhere). Across hosts replica 0 (the only thread that talks
// to MPI) all-reduces that sum and a second barrier hands it to the others. Slots alternate by
// call parity: a replica may write call k+1's partial while another still reads call k's, but
// never call k+2's (call k+1's barrier lies between).
struct Model::ReplicaSums {
  std::vector<std::vector<double>> slots[2];  // [parity][replica]: f64 [n] partial sums
  std::vector<double> total[2];               // [parity]: across hosts, the all-reduced sum
  Status status[2];                           // [parity]: the all-reduce's outcome (replica 0 writes)
  std::vector<int64_t> calls;                 // [replica]: calls made in the current step
  int64_t calls_per_step = 0;                 // synchronized batch-norm kernels in one Run
};

// The cross-host all-reduce overlapped with the backward pass. The gradient block is cut into
// buckets (at most STRATA_ALLREDUCE_BUCKET_BYTES) in the order the backward pass finishes them
// (the program's gradient_ready(): the last layers first, which sit at the end of the block).
// After the kernel that finishes a bucket each replica counts itself in; the last replica to
// arrive averages the bucket over the replicas (the same sums, in replica order, as the
// reduce-scatter) and marks it reduced. Replica 0, the only thread that talks to MPI, starts
// every reduced bucket's all-reduce in bucket order after each of its kernels (the same order
// on every worker) and lets MPI progress; after the backward pass it starts the rest, waits
// for all and divides by the worker count before the optimizer runs. No replica ever waits for
// another inside the backward pass, so there is no barrier to deadlock on; the counters are
// reset by replica 0 while the others wait at the barrier that ends the gradient phase.
struct Model::Overlap {
  struct Bucket {
    int64_t begin, end;  // elements of the gradient block
    int kernel;          // final after this kernel of every replica's program (-1: before the first)
  };
  std::vector<Bucket> buckets;                    // in start order: by kernel
  std::vector<int> first;                         // [kernels + 2]: buckets of kernel k are [first[k+1], first[k+2])
  std::unique_ptr<std::atomic<int>[]> arrived;    // [buckets]: replicas past the bucket's kernel, this step
  std::unique_ptr<std::atomic<bool>[]> reduced;   // [buckets]: averaged in-host, may start
  std::vector<const float*> replica_grads;        // each replica's gradient block
  size_t next_start = 0;                          // replica 0: buckets started this step
};

// ---- compile --------------------------------------------------------------------------------

namespace {

// The loss's logits: from_logits = false models end in softmax, whose input is used, so the
// fused, numerically stable cross-entropy op applies (what Keras does internally too).
Result<Value> LogitsFor(const graph::Graph& g, Value output, const Loss& loss) {
  if (loss.from_logits) return output;
  const graph::Node& n = g.node(output.node);
  if (n.kind == graph::OpKind::kSoftmax) return n.inputs[0];
  return InvalidArgument(loss.name() + " with from_logits=false needs the model to end in a softmax; " +
                         g.Describe(output) + " is not one (or pass from_logits=true)");
}

// binary_crossentropy's logits z [b, K]. from_logits = false models end in a sigmoid, whose
// input is used with the logit clipped to [-L, L], L = log((1 - eps) / eps): that is Keras's
// clipping of the probability to [eps, 1 - eps], done exactly (z is untouched inside the
// range; outside it the two relus cancel z and the gradient is 0, as clip_by_value's).
Result<Value> BinaryLogitsFor(graph::Graph& g, Value output, const Loss& loss) {
  if (loss.from_logits) return output;
  const graph::Node& n = g.node(output.node);
  if (n.kind != graph::OpKind::kActivation || n.attrs.activation != graph::Activation::kSigmoid)
    return InvalidArgument(loss.name() + " with from_logits=false needs the model to end in a sigmoid; " +
                           g.Describe(output) + " is not one (or pass from_logits=true)");
  const Value z = n.inputs[0];
  const float limit = static_cast<float>(std::log((1.0 - kEps) / static_cast<double>(kEps)));
  const Value l = g.Constant(limit, z.shape(), "loss/clip_limit");
  STRATA_ASSIGN_OR_RETURN(Value above, g.Sub(z, l, "loss/clip_above"));
  STRATA_ASSIGN_OR_RETURN(above, g.Relu(above, "loss/clip_above_relu"));
  STRATA_ASSIGN_OR_RETURN(Value neg, g.Scale(z, -1.0f, "loss/clip_negate"));
  STRATA_ASSIGN_OR_RETURN(Value below, g.Sub(neg, l, "loss/clip_below"));
  STRATA_ASSIGN_OR_RETURN(below, g.Relu(below, "loss/clip_below_relu"));
  STRATA_ASSIGN_OR_RETURN(Value clipped, g.Sub(z, above, "loss/clip_upper"));
  return g.Add(clipped, below, "loss/clipped_logits");
}

int SlotBlocks(const Optimizer& o) {
  switch (o.kind) {
    case Optimizer::Kind::kSGD: return o.momentum != 0 ? 1 : 0;
    case Optimizer::Kind::kAdam:
    case Optimizer::Kind::kAdamW: return 2;
    case Optimizer::Kind::kRMSprop: return 2;
  }
  return 0;
}

}  // namespace

Status Model::compile(CompileOptions options) {
  compile_ = std::move(options);
  if (compile_.precision != "float32" && compile_.precision != "mixed_bfloat16")
    return InvalidArgument("compile: precision must be \"float32\" or \"mixed_bfloat16\", got \"" + compile_.precision + "\"");
  if (compile_.precision == "mixed_bfloat16")
    STRATA_RETURN_IF_ERROR(backend::PrecisionSupported(backend::Precision::kBF16).WithContext("compile"));
  const Optimizer& opt = compile_.optimizer;
  if (!(opt.clipnorm >= 0) || !(opt.global_clipnorm >= 0))
    return InvalidArgument("compile: " + opt.name() + " clipnorm and global_clipnorm must be >= 0 (0: off)");
  if (opt.clipnorm > 0 && opt.global_clipnorm > 0)
    return InvalidArgument("compile: " + opt.name() + " takes clipnorm or global_clipnorm, not both (as Keras)");
  for (const auto& m : compile_.metrics) {
    auto metric = MakeMetric(m, compile_.loss);
    if (!metric.ok()) return metric.status().WithContext("compile");
  }
  strategy_ = compile_.strategy ? compile_.strategy : distribute::Strategy::Current();
  if (!strategy_) {
    owned_strategy_ = distribute::OneDeviceStrategy();
    strategy_ = owned_strategy_.get();
  }
  replicas_.clear();
  eval_ = Compiled{};
  // The variables come from the training graph and do not depend on the batch size: build
  // it at batch 1 now so weights can be loaded (and counted) before the first fit.
  Compiled probe;
  probe.graph = std::make_unique<graph::Graph>();
  STRATA_RETURN_IF_ERROR(BuildTrainGraph(probe, 1, 0));
  STRATA_ASSIGN_OR_RETURN(store_, backend::VariableStore::Create(*probe.graph));
  num_slot_blocks_ = SlotBlocks(compile_.optimizer);
  slots_ = Tensor(DType::kF32, {num_slot_blocks_, store_->num_trainable()});
  clip_groups_.clear();
  if (opt.global_clipnorm > 0) clip_groups_.push_back({0, store_->num_trainable()});
  if (opt.clipnorm > 0)
    for (const auto& e : store_->entries())
      if (e.role == graph::VariableRole::kParameter && e.trainable) clip_groups_.push_back({e.offset, e.offset + e.size});
  clip_partials_.assign(static_cast<size_t>(num_replicas()) * clip_groups_.size(), 0.0);
  gradients_ready_ = false;
  global_step_ = 0;
  compiled_ = true;
  return Status::OK();
}

// Forward (training mode), loss and gradients of one replica; the update is not in the
// graph: it runs after the gradients of all replicas are reduced (ApplyUpdateSlice).
Status Model::BuildTrainGraph(Compiled& c, int64_t batch, uint64_t replica_seed) {
  graph::Graph& g = *c.graph;
  BuildContext ctx;
  ctx.replica = static_cast<int>(replica_seed);
  STRATA_RETURN_IF_ERROR(BuildForward(g, /*training=*/true, batch, &c.inputs, &c.outputs, &ctx));
  if (c.outputs.size() != 1)
    return Unimplemented("model " + name_ + ": training supports one output (this model has " +
                         std::to_string(c.outputs.size()) + ")");
  const Loss& loss = compile_.loss;
  Value out = c.outputs[0];
  Value loss_value;
  if (loss.kind == Loss::Kind::kSparseCategoricalCrossentropy || loss.kind == Loss::Kind::kCategoricalCrossentropy) {
    if (out.shape().rank() != 2)
      return InvalidArgument(loss.name() + ": the model output must be [batch, classes], got " + g.Describe(out));
    c.labels = g.Input("labels", DType::kI32, {batch});
    STRATA_ASSIGN_OR_RETURN(Value logits, LogitsFor(g, out, loss));
    STRATA_ASSIGN_OR_RETURN(loss_value, g.SoftmaxCrossEntropy(logits, c.labels, loss.label_smoothing, "loss"));
  } else if (loss.kind == Loss::Kind::kMeanSquaredError) {
    c.labels = g.Input("labels", DType::kF32, out.shape());
    STRATA_ASSIGN_OR_RETURN(loss_value, g.MeanSquaredError(out, c.labels, "loss"));
  } else if (loss.kind == Loss::Kind::kBinaryCrossentropy) {
    // A two-class softmax cross-entropy over [0, z] for each of the b x K outputs:
    // softmax([0, z])[1] = sigmoid(z), so its loss is -t log(sigmoid(z)) - (1 - t) log(1 - sigmoid(z))
    // for t in {0, 1}, its gradient sigmoid(z) - t, and its mean over b x K is Keras's mean
    // over the outputs, then over the batch.
    STRATA_ASSIGN_OR_RETURN(Value z, BinaryLogitsFor(g, out, loss));
    const int64_t count = z.shape().num_elements();
    if (out.shape().rank() < 1 || out.shape()[0] != batch)
      return InvalidArgument(loss.name() + ": the model output must be [batch, ...], got " + g.Describe(out));
    STRATA_ASSIGN_OR_RETURN(Value column, g.Reshape(z, {count, 1}, "loss/logits"));  // [b K, 1]
    const Value zeros = g.Constant(0.0f, {count, 1}, "loss/zero_logits");
    STRATA_ASSIGN_OR_RETURN(Value pair, g.Concat({zeros, column}, 1, "loss/pair"));  // [b K, 2]
    c.labels = g.Input("labels", DType::kI32, {count});                              // 0/1 [b K]
    STRATA_ASSIGN_OR_RETURN(loss_value, g.SoftmaxCrossEntropy(pair, c.labels, 0, "loss"));
  } else {
    return Unimplemented(loss.name() + " is not trainable in the compiled step");
  }
  // L2 regularizers: loss += l2 * sum(w^2).
  for (const auto& v : ctx.variables) {
    if (v.l2 <= 0) continue;
    STRATA_ASSIGN_OR_RETURN(Value sq, g.Multiply(v.value, v.value, v.layer + "/l2/square"));
    STRATA_ASSIGN_OR_RETURN(Value sum, g.ReduceSum(sq, {}, v.layer + "/l2/sum"));
    STRATA_ASSIGN_OR_RETURN(Value pen, g.Scale(sum, v.l2, v.layer + "/l2"));
    STRATA_ASSIGN_OR_RETURN(loss_value, g.Add(loss_value, pen, v.layer + "/l2/add"));
  }
  c.loss = loss_value;
  STRATA_RETURN_IF_ERROR(graph::Gradients(g, loss_value, graph::TrainableVariables(g)).status());
  c.batch = batch;
  return Status::OK();
}

backend::CompileOptions Model::BackendOptions(std::vector<Value> fetches, std::shared_ptr<backend::VariableStore> store) const {
  backend::CompileOptions o;
  o.fetches = std::move(fetches);
  o.threads = compile_.threads;
  o.precision = compile_.precision == "mixed_bfloat16" ? backend::Precision::kBF16 : backend::Precision::kF32;
  o.variables = std::move(store);
  return o;
}

Status Model::EnsureTrainPrograms(int64_t per_replica) {
  if (!compiled_) return InvalidArgument("model " + name_ + ": call compile() before fit()");
  if (!replicas_.empty()) {
    if (per_replica != replicas_[0].batch)
      return InvalidArgument("model " + name_ + ": a batch of " + std::to_string(per_replica * num_replicas()) +
                             " rows, but the step was compiled for " + std::to_string(replicas_[0].batch * num_replicas()) +
                             " (static shapes: batch the training data with drop_remainder=true)");
    return Status::OK();
  }
  const int r_count = num_replicas();
  std::vector<Compiled> built(static_cast<size_t>(r_count));
  for (int r = 0; r < r_count; ++r) {
    Compiled& c = built[static_cast<size_t>(r)];
    c.graph = std::make_unique<graph::Graph>();
    STRATA_RETURN_IF_ERROR(BuildTrainGraph(c, per_replica, static_cast<uint64_t>(strategy_->worker_index() * r_count + r)));
    // Replica 0 trains the model's own variables; the others get copies, refreshed from
    // replica 0 after every update.
    if (r == 0) {
      c.store = store_;
    } else {
      STRATA_ASSIGN_OR_RETURN(c.store, backend::VariableStore::Create(*c.graph));
      std::memcpy(c.store->params().raw_data(), store_->params().raw_data(), store_->params().nbytes());
    }
    auto program = backend::Compile(*c.graph, BackendOptions({c.loss, c.outputs[0]}, c.store));
    if (!program.ok()) return program.status().WithContext("model " + name_ + " replica " + std::to_string(r));
    c.program = std::move(program).value();
  }
  replicas_ = std::move(built);
  // Synchronized batch norm: every replica's program sums its statistics with the others'.
  int64_t sync_kernels = 0;
  for (const backend::KernelInfo& k : replicas_[0].program->kernels())
    sync_kernels += k.op == "bn_fwd_sync" || k.op == "bn_bwd_sync";
  replica_sums_.reset();
  if (sync_kernels > 0 && (r_count > 1 || strategy_->collective() != nullptr)) {
    replica_sums_ = std::make_unique<ReplicaSums>();
    for (auto& slots : replica_sums_->slots) slots.resize(static_cast<size_t>(r_count));
    replica_sums_->calls.assign(static_cast<size_t>(r_count), 0);
    replica_sums_->calls_per_step = sync_kernels;
    for (int r = 0; r < r_count; ++r)
      replicas_[static_cast<size_t>(r)].program->set_cross_replica_sum(
          [this, r](double* data, int64_t n) { return CrossReplicaSum(r, data, n); });
  }
  SetUpOverlap();
  return Status::OK();
}

void Model::SetUpOverlap() {
  overlap_.reset();
  distribute::Collective* hosts = strategy_->collective();
  const char* env = std::getenv("STRATA_ALLREDUCE_OVERLAP");
  if (!hosts || !hosts->can_overlap() || (env && std::string(env) == "0")) return;
  const backend::Program& p0 = *replicas_[0].program;
  std::vector<backend::GradientReady> ready = p0.gradient_ready();
  const int64_t n = store_->num_trainable();
  const int kernels = static_cast<int>(p0.kernels().size());
  if (ready.empty() || n == 0) return;  // a backend that does not say: the whole block after the backward pass
  for (const Compiled& c : replicas_)
    if (c.program->kernels().size() != p0.kernels().size()) return;
  // Parts of the block no kernel writes (a variable without a gradient) are ready at once.
  std::sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  std::vector<backend::GradientReady> all;
  int64_t cursor = 0;
  for (const auto& g : ready) {
    if (g.begin < cursor || g.end > n) return;  // overlapping or outside: not a layout to cut
    if (g.begin > cursor) all.push_back({cursor, g.begin, -1});
    all.push_back(g);
    cursor = g.end;
  }
  if (cursor < n) all.push_back({cursor, n, -1});
  // Start order: by the kernel that finishes them, then from the end of the block.
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.kernel != b.kernel ? a.kernel < b.kernel : a.begin > b.begin; });
  auto o = std::make_unique<Overlap>();
  const int64_t cap = std::max<int64_t>(16, hosts->bucket_bytes() / 4);
  for (const auto& g : all) {
    for (int64_t end = g.end; end > g.begin;) {
      const int64_t begin = std::max(g.begin, end - cap);
      Overlap::Bucket* last = o->buckets.empty() ? nullptr : &o->buckets.back();
      if (last && last->begin == end && last->end - begin <= cap) {
        last->begin = begin;  // grows down the block, as the backward pass goes
        last->kernel = std::max(last->kernel, g.kernel);
      } else if (last && last->end == begin && end - last->begin <= cap) {
        last->end = end;  // a layer's bias finished after its kernel: just above
        last->kernel = std::max(last->kernel, g.kernel);
      } else {
        o->buckets.push_back({begin, end, g.kernel});
      }
      end = begin;
    }
  }
  o->first.assign(static_cast<size_t>(kernels) + 2, 0);
  for (int j = 0; j < kernels + 2; ++j)
    o->first[static_cast<size_t>(j)] = static_cast<int>(
        std::lower_bound(o->buckets.begin(), o->buckets.end(), j - 1,
                         [](const Overlap::Bucket& b, int k) { return b.kernel < k; }) -
        o->buckets.begin());
  o->arrived = std::make_unique<std::atomic<int>[]>(o->buckets.size());
  o->reduced = std::make_unique<std::atomic<bool>[]>(o->buckets.size());
  for (size_t b = 0; b < o->buckets.size(); ++b) {
    o->arrived[b] = 0;
    o->reduced[b] = false;
  }
  for (const Compiled& c : replicas_) o->replica_grads.push_back(c.store->grads().data<float>());
  overlap_ = std::move(o);
  for (int r = 0; r < num_replicas(); ++r) {
    // Replica 0 is called after every kernel (it starts buckets and lets MPI progress); the
    // others only after the kernels that finish a bucket.
    std::vector<uint8_t> after(static_cast<size_t>(kernels) + 1, 0);
    for (int k = -1; k < kernels; ++k)
      after[static_cast<size_t>(k + 1)] =
          r == 0 || overlap_->first[static_cast<size_t>(k + 1)] < overlap_->first[static_cast<size_t>(k + 2)];
    replicas_[static_cast<size_t>(r)].program->set_kernel_hook(std::move(after),
                                                               [this, r](int k) { return GradientReadyHook(r, k); });
  }
}

Status Model::GradientReadyHook(int r, int k) {
  Overlap& o = *overlap_;
  const int R = num_replicas();
  for (int b = o.first[static_cast<size_t>(k + 1)]; b < o.first[static_cast<size_t>(k + 2)]; ++b) {
    if (o.arrived[b].fetch_add(1, std::memory_order_acq_rel) + 1 != R) continue;
    // The last replica here: every replica's gradient for the bucket is final.
    if (R > 1) {
      const Overlap::Bucket& bk = o.buckets[static_cast<size_t>(b)];
      distribute::Strategy::ReduceRange(o.replica_grads, store_->grads().data<float>(), bk.begin, bk.end,
                                        distribute::ReduceOp::kMean);
    }
    o.reduced[b].store(true, std::memory_order_release);
  }
  return r == 0 ? StartReadyBuckets() : Status::OK();
}

Status Model::StartReadyBuckets() {
  Overlap& o = *overlap_;
  distribute::Collective* hosts = strategy_->collective();
  float* g = store_->grads().data<float>();
  while (o.next_start < o.buckets.size() && o.reduced[o.next_start].load(std::memory_order_acquire)) {
    const Overlap::Bucket& b = o.buckets[o.next_start];
    STRATA_RETURN_IF_ERROR(hosts->StartAllReduceSum(g + b.begin, b.end - b.begin));
    ++o.next_start;
  }
  return hosts->Progress();
}

Status Model::EnsureEvalProgram(int64_t batch) {
  if (!compiled_) return InvalidArgument("model " + name_ + ": call compile() before evaluate() or predict()");
  if (eval_.program && eval_.batch == batch) return Status::OK();
  eval_ = Compiled{};
  eval_.graph = std::make_unique<graph::Graph>();
  BuildContext ctx;
  STRATA_RETURN_IF_ERROR(BuildForward(*eval_.graph, /*training=*/false, batch, &eval_.inputs, &eval_.outputs, &ctx));
  STRATA_ASSIGN_OR_RETURN(eval_.program, backend::Compile(*eval_.graph, BackendOptions(eval_.outputs, store_)));
  eval_.batch = batch;
  return Status::OK();
}

std::vector<std::unique_ptr<Metric>> Model::MakeMetrics() const {
  std::vector<std::unique_ptr<Metric>> m;
  for (const auto& name : compile_.metrics) m.push_back(std::move(MakeMetric(name, compile_.loss).value()));
  return m;
}

double Model::learning_rate() const {
  if (lr_override_ >= 0) return lr_override_ * lr_scale_;
  return compile_.optimizer.learning_rate(global_step_) * lr_scale_;
}

// ---- the training step ------------------------------------------------------------------------

// What the replicas of one step share. Every replica runs the same sequence of barriers, even
// after an error, so none waits forever; a failure anywhere skips the update for all.
struct Model::StepSync {
  std::atomic<bool> failed{false};
  Status cross_host;  // written by replica 0 only
};

Status Model::CrossReplicaSum(int r, double* data, int64_t n) {
  ReplicaSums& rs = *replica_sums_;
  const int R = num_replicas();
  const int parity = static_cast<int>(rs.calls[static_cast<size_t>(r)]++ & 1);
  std::vector<std::vector<double>>& slots = rs.slots[parity];
  if (n >= 0) {
    slots[static_cast<size_t>(r)].assign(data, data + n);
  } else {
    slots[static_cast<size_t>(r)].clear();
  }
  strategy_->barrier();
  auto label = [&] { return "model " + name_ + " replica " + std::to_string(r) + ": synchronized batch norm: "; };
  // Every slot must hold this call's n values; a replica that failed left its slot empty.
  size_t len = slots[0].size();
  bool complete = true;
  for (const auto& slot : slots) {
    len = std::max(len, slot.size());
    complete = complete && slot.size() == slots[0].size() && !slot.empty();
  }
  distribute::Collective* hosts = strategy_->collective();
  if (hosts == nullptr) {
    if (n < 0) return Status::OK();
    if (!complete) return Internal(label() + "another replica failed this step");
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int q = 0; q < R; ++q) sum += slots[static_cast<size_t>(q)][static_cast<size_t>(j)];
      data[j] = sum;
    }
    return Status::OK();
  }
  if (r == 0) {
    // The all-reduce runs even when a local replica failed, so the other workers do not wait:
    // every worker makes the same calls in the same order.
    std::vector<double>& total = rs.total[parity];
    total.assign(len, 0.0);
    for (int q = 0; q < R; ++q)
      for (size_t j = 0; j < slots[static_cast<size_t>(q)].size() && j < len; ++j) total[j] += slots[static_cast<size_t>(q)][j];
    rs.status[parity] = len == 0 ? Status::OK() : hosts->AllReduceSum(total.data(), static_cast<int64_t>(len));
    if (rs.status[parity].ok() && !complete) rs.status[parity] = Internal(label() + "a replica of this worker failed this step");
  }
  strategy_->barrier();
  if (n < 0) return Status::OK();
  if (!rs.status[parity].ok()) return rs.status[parity];
  std::copy(rs.total[parity].begin(), rs.total[parity].end(), data);
  return Status::OK();
}

void Model::ClipPartialSums(int replica) {
  const size_t groups = clip_groups_.size();
  const auto [begin, end] = strategy_->Slice(store_->num_trainable(), replica);
  const float* g = store_->grads().data<float>();
  double* out = clip_partials_.data() + static_cast<size_t>(replica) * groups;
  for (size_t v = 0; v < groups; ++v) {
    const int64_t b = std::max(begin, clip_groups_[v].first), e = std::min(end, clip_groups_[v].second);
    double sum = 0;
    for (int64_t i = b; i < e; ++i) sum += static_cast<double>(g[i]) * g[i];
    out[v] = sum;
  }
}

void Model::ApplyUpdateSlice(int replica, float lr) {
  const int64_t n = store_->num_trainable();
  auto [begin, end] = strategy_->Slice(n, replica);
  if (begin >= end) return;
  float* w = store_->params().data<float>() + begin;
  float* g = store_->grads().data<float>() + begin;
  const int64_t len = end - begin;
  float* s0 = num_slot_blocks_ > 0 ? slots_.data<float>() + begin : nullptr;
  float* s1 = num_slot_blocks_ > 1 ? slots_.data<float>() + n + begin : nullptr;
  const Optimizer& o = compile_.optimizer;
  // Clipping by norm comes first, as in Keras. A group's norm adds every replica's partial
  // sum in replica order, so all replicas agree on it; a norm within the limit leaves the
  // gradient untouched.
  if (!clip_groups_.empty()) {
    const double limit = o.clipnorm > 0 ? o.clipnorm : o.global_clipnorm;
    const size_t groups = clip_groups_.size();
    float* grads = store_->grads().data<float>();
    for (size_t v = 0; v < groups; ++v) {
      const int64_t b = std::max(begin, clip_groups_[v].first), e = std::min(end, clip_groups_[v].second);
      if (b >= e) continue;
      double sum = 0;
      for (int q = 0; q < num_replicas(); ++q) sum += clip_partials_[static_cast<size_t>(q) * groups + v];
      const double norm = std::sqrt(sum);
      if (!(norm > limit)) continue;
      const float scale = static_cast<float>(limit / norm);
      for (int64_t i = b; i < e; ++i) grads[i] *= scale;
    }
  }
  // L2-style decay on the gradient (SGD, Adam, RMSprop); AdamW decays inside its kernel.
  if (o.weight_decay > 0 && o.kind != Optimizer::Kind::kAdamW) {
    const float wd = static_cast<float>(o.weight_decay);
    for (int64_t i = 0; i < len; ++i) g[i] += wd * w[i];
  }
  switch (o.kind) {
    case Optimizer::Kind::kSGD:
      backend::cpu::SgdUpdate(w, g, s0, len, {lr, static_cast<float>(o.momentum), o.nesterov});
      break;
    case Optimizer::Kind::kAdam:
    case Optimizer::Kind::kAdamW:
      backend::cpu::AdamUpdate(w, g, s0, s1, len,
                               {lr, static_cast<float>(o.beta_1), static_cast<float>(o.beta_2),
                                static_cast<float>(o.epsilon),
                                o.kind == Optimizer::Kind::kAdamW ? static_cast<float>(o.weight_decay) : 0.0f,
                                static_cast<float>(global_step_ + 1)});
      break;
    case Optimizer::Kind::kRMSprop:
      backend::cpu::RmsPropUpdate(w, g, s0, s1, len,
                                  {lr, static_cast<float>(o.rho), static_cast<float>(o.momentum), static_cast<float>(o.epsilon)});
      break;
  }
}

Status Model::PrepareStep(const data::Element& batch, int64_t rows, int64_t* shard) {
  const int R = num_replicas();
  if (rows % R != 0)
    return InvalidArgument("model " + name_ + ": a global batch of " + std::to_string(rows) + " rows does not split over " +
                           std::to_string(R) + " replicas (use a multiple of the replica count)");
  *shard = rows / R;
  STRATA_RETURN_IF_ERROR(EnsureTrainPrograms(*shard));
  const int64_t per_row = replicas_[0].outputs[0].shape().num_elements() / replicas_[0].batch;  // K
  return PrepareLabels(batch, rows, per_row, replicas_[0].inputs.size());
}

Status Model::GradientPhase(int r, const data::Element& batch, int64_t shard, StepSync& sync) {
  const int R = num_replicas();
  Compiled& c = replicas_[static_cast<size_t>(r)];
  // 1. This replica's shard of the global batch, then forward + backward.
  Status s = FeedInputs(c, batch, r * shard, shard, /*with_labels=*/true);
  c.program->set_step(static_cast<uint64_t>(global_step_));  // dropout masks follow the global step
  if (replica_sums_) replica_sums_->calls[static_cast<size_t>(r)] = 0;
  if (s.ok()) s = c.program->Run();
  if (!s.ok()) sync.failed = true;
  // A replica that stopped early still meets the others at every synchronized batch norm.
  if (replica_sums_)
    while (replica_sums_->calls[static_cast<size_t>(r)] < replica_sums_->calls_per_step) (void)CrossReplicaSum(r, nullptr, -1);
  strategy_->barrier();
  const int64_t num_trainable = store_->num_trainable();
  if (overlap_) {
    // 2'. The buckets were averaged in-host and (mostly) started during the backward pass:
    //     replica 0 starts the rest, waits for all and divides by the worker count.
    distribute::Collective* hosts = strategy_->collective();
    if (r == 0) {
      Overlap& o = *overlap_;
      Status started = sync.failed ? Status::OK() : StartReadyBuckets();
      if (started.ok() && !sync.failed && o.next_start != o.buckets.size())
        started = Internal("model " + name_ + ": gradient bucket " + std::to_string(o.next_start) + " of " +
                           std::to_string(o.buckets.size()) + " was not reduced by every replica");
      Status waited = hosts->WaitAll();  // what was started is always finished
      sync.cross_host = started.ok() ? waited : started;
      if (!sync.cross_host.ok()) sync.failed = true;
      if (!sync.failed) {
        const float workers = static_cast<float>(strategy_->num_workers());
        float* g = store_->grads().data<float>();
        for (int64_t i = 0; i < num_trainable; ++i) g[i] /= workers;
      }
      for (size_t b = 0; b < o.buckets.size(); ++b) {
        o.arrived[b].store(0, std::memory_order_relaxed);
        o.reduced[b].store(false, std::memory_order_relaxed);
      }
      o.next_start = 0;
    }
    strategy_->barrier();
    return s;
  }
  // 2. Reduce-scatter the gradients: replica r averages slice r over the local replicas...
  if (!sync.failed && R > 1) {
    std::vector<const float*> grads;
    for (auto& rep : replicas_) grads.push_back(rep.store->grads().data<float>());
    strategy_->ReduceScatter(grads, store_->grads().data<float>(), num_trainable, r, distribute::ReduceOp::kMean);
  }
  // ...and across hosts the host means are averaged over MPI (replica 0 talks to MPI).
  if (distribute::Collective* hosts = strategy_->collective()) {
    strategy_->barrier();
    if (r == 0 && !sync.failed) {
      sync.cross_host = hosts->AllReduceSum(store_->grads().data<float>(), num_trainable);
      if (sync.cross_host.ok()) {
        const float workers = static_cast<float>(strategy_->num_workers());
        float* g = store_->grads().data<float>();
        for (int64_t i = 0; i < num_trainable; ++i) g[i] /= workers;
      } else {
        sync.failed = true;
      }
    }
    strategy_->barrier();
  }
  return s;
}

void Model::UpdatePhase(int r, float lr, StepSync& sync) {
  const int R = num_replicas();
  distribute::Collective* hosts = strategy_->collective();
  // 3. Clipping by norm needs every slice's sum of squares before any replica scales its own;
  //    then each replica updates its own slice of the weights (the sharded update).
  if (!clip_groups_.empty()) {
    if (!sync.failed) ClipPartialSums(r);
    if (R > 1) strategy_->barrier();
  }
  if (!sync.failed) ApplyUpdateSlice(r, lr);
  if (R == 1 && !hosts) return;
  strategy_->barrier();
  // 4. Moving statistics (state after the trainable block): the mean over all replicas.
  const int64_t num_params = store_->params().num_elements(), num_trainable = store_->num_trainable();
  if (!sync.failed && r == 0 && num_params > num_trainable) {
    float* dst = store_->params().data<float>();
    for (int64_t i = num_trainable; i < num_params; ++i) {
      float sum = dst[i];
      for (int q = 1; q < R; ++q) sum += replicas_[static_cast<size_t>(q)].store->params().data<float>()[i];
      dst[i] = sum / static_cast<float>(R);
    }
    if (hosts) {
      Status hs = hosts->AllReduceSum(dst + num_trainable, num_params - num_trainable);
      if (hs.ok()) {
        const float workers = static_cast<float>(strategy_->num_workers());
        for (int64_t i = num_trainable; i < num_params; ++i) dst[i] /= workers;
      } else {
        sync.cross_host = hs;
        sync.failed = true;
      }
    }
  }
  strategy_->barrier();
  // 5. Every other replica takes the new weights.
  Compiled& c = replicas_[static_cast<size_t>(r)];
  if (!sync.failed && r > 0) std::memcpy(c.store->params().raw_data(), store_->params().raw_data(), store_->params().nbytes());
}

Model::GradientTape Model::StepOutputs() {
  GradientTape tape;
  const int R = num_replicas();
  const int64_t shard = replicas_[0].batch;
  double loss_sum = 0;
  for (int r = 0; r < R; ++r) {
    Compiled& c = replicas_[static_cast<size_t>(r)];
    loss_sum += *c.program->fetch(c.loss).data<float>();
    const Tensor& out = c.program->fetch(c.outputs[0]);
    const int64_t k = out.num_elements() / shard;
    const int64_t* labels = label_scratch_.empty() ? nullptr : label_scratch_.data();
    if (compile_.loss.kind == Loss::Kind::kBinaryCrossentropy)  // every output is one yes/no prediction
      tape.replicas.push_back({out.data<float>(), shard * k, 1, labels + r * shard * k, nullptr});
    else
      tape.replicas.push_back({out.data<float>(), shard, k, labels ? labels + r * shard : nullptr, nullptr});
  }
  tape.loss = loss_sum / R;
  return tape;
}

Status Model::TrainStep(const data::Element& batch, int64_t rows, Logs* logs,
                        std::vector<std::unique_ptr<Metric>>& metrics, Mean& loss_mean) {
  int64_t shard = 0;
  STRATA_RETURN_IF_ERROR(PrepareStep(batch, rows, &shard));
  const float lr = static_cast<float>(learning_rate());
  StepSync sync;
  Status st = strategy_->run([&](int r) -> Status {
    if (observer_) observer_->StepBegin(r);
    Status s = GradientPhase(r, batch, shard, sync);  // 1-2: gradients, averaged
    UpdatePhase(r, lr, sync);                          // 3-5: the sharded update
    if (observer_) {
      const Compiled& c = replicas_[static_cast<size_t>(r)];
      observer_->StepEnd(r, static_cast<double>(c.program->matrix_flops_per_step()), shard);
    }
    return s;
  });
  STRATA_RETURN_IF_ERROR(sync.cross_host.WithContext("worker " + std::to_string(strategy_->worker_index())));
  STRATA_RETURN_IF_ERROR(st);
  ++global_step_;

  // 6. Loss and metrics from every replica's outputs.
  GradientTape out = StepOutputs();
  for (const MetricBatch& b : out.replicas)
    for (auto& m : metrics) m->Update(b);
  loss_mean.Update(out.loss);
  *logs = {{"loss", loss_mean.Result()}};
  for (auto& m : metrics) logs->emplace_back(m->name(), m->Result());
  return Status::OK();
}

Result<Model::GradientTape> Model::compute_gradients(const data::Element& batch) {
  if (!compiled_) return InvalidArgument("model " + name_ + ": call compile() before compute_gradients()");
  if (batch.size() < 2 || batch[0].rank() == 0)
    return InvalidArgument("compute_gradients: a batch is (x..., y) with a batch dimension; got " + batch.DebugString());
  gradients_ready_ = false;
  int64_t shard = 0;
  STRATA_RETURN_IF_ERROR(PrepareStep(batch, batch[0].shape()[0], &shard));
  StepSync sync;
  Status st = strategy_->run([&](int r) { return GradientPhase(r, batch, shard, sync); });
  STRATA_RETURN_IF_ERROR(sync.cross_host.WithContext("worker " + std::to_string(strategy_->worker_index())));
  STRATA_RETURN_IF_ERROR(st.WithContext("compute_gradients, step " + std::to_string(global_step_)));
  gradients_ready_ = true;
  return StepOutputs();
}

Status Model::apply_gradients() {
  if (!gradients_ready_)
    return InvalidArgument("model " + name_ + ": apply_gradients() needs compute_gradients(batch) first (once per step)");
  gradients_ready_ = false;
  const float lr = static_cast<float>(learning_rate());
  StepSync sync;
  Status st = strategy_->run([&](int r) {
    UpdatePhase(r, lr, sync);
    return Status::OK();
  });
  STRATA_RETURN_IF_ERROR(sync.cross_host.WithContext("worker " + std::to_string(strategy_->worker_index())));
  STRATA_RETURN_IF_ERROR(st);
  ++global_step_;
  return Status::OK();
}

Result<Logs> Model::train_on_batch(const std::vector<Tensor>& x, const Tensor& y) {
  if (x.empty() || x[0].rank() == 0) return InvalidArgument("train_on_batch: x needs a batch dimension");
  data::Element e;
  e.tensors = x;
  e.tensors.push_back(y);
  auto metrics = MakeMetrics();
  Mean loss;
  Logs logs;
  STRATA_RETURN_IF_ERROR(TrainStep(e, x[0].shape()[0], &logs, metrics, loss));
  return logs;
}

// ---- evaluate / predict -----------------------------------------------------------------------

Result<Logs> Model::RunEvaluation(const data::Dataset& ds, int64_t steps, Tensor* predictions) {
  STRATA_ASSIGN_OR_RETURN(auto it, ds.make_iterator());
  auto metrics = MakeMetrics();
  Mean loss_mean;
  std::vector<float> per_example, collected;
  std::vector<int64_t> row_shape;
  int64_t total_rows = 0;
  for (int64_t step = 0; steps < 0 || step < steps; ++step) {
    data::Element batch;
    bool end = false;
    STRATA_RETURN_IF_ERROR(it->GetNext(&batch, &end));
    if (end) break;
    if (batch.size() == 0 || batch[0].rank() == 0) return InvalidArgument("evaluate: elements must be batches");
    const int64_t rows = batch[0].shape()[0];
    // The first batch fixes the program's batch; a shorter last batch is padded and cut.
    if (!eval_.program || rows > eval_.batch) STRATA_RETURN_IF_ERROR(EnsureEvalProgram(rows));
    STRATA_RETURN_IF_ERROR(FeedInputs(eval_, batch, 0, rows, /*with_labels=*/false));
    STRATA_RETURN_IF_ERROR(eval_.program->Run());
    const Tensor& out = eval_.program->fetch(eval_.outputs[0]);
    const int64_t k = out.num_elements() / eval_.batch;
    if (predictions) {
      collected.insert(collected.end(), out.data<float>(), out.data<float>() + rows * k);
      row_shape.assign(out.shape().dims().begin() + 1, out.shape().dims().end());
      total_rows += rows;
      continue;
    }
    const size_t label_index = eval_.inputs.size();
    STRATA_RETURN_IF_ERROR(PrepareLabels(batch, rows, k, label_index));
    const bool sparse = !label_scratch_.empty() && compile_.loss.sparse_labels();
    Tensor dense;
    if (compile_.loss.kind == Loss::Kind::kBinaryCrossentropy) {  // the 0/1 labels PrepareLabels checked
      dense = Tensor(DType::kF32, {rows, k});
      for (int64_t i = 0; i < rows * k; ++i) dense.data<float>()[i] = static_cast<float>(label_scratch_[static_cast<size_t>(i)]);
    } else if (!compile_.loss.sparse_labels()) {
      dense = batch[label_index].Contiguous();
      if (dense.dtype() != DType::kF32 || dense.num_elements() != rows * k)
        return InvalidArgument("evaluate: " + compile_.loss.name() + " expects f32 labels [" + std::to_string(rows) + ", " +
                               std::to_string(k) + "], got " + dense.DebugString());
    }
    per_example.resize(static_cast<size_t>(rows));
    STRATA_RETURN_IF_ERROR(HostLoss(compile_.loss, out.data<float>(), rows, k, sparse ? label_scratch_.data() : nullptr,
                                    sparse ? nullptr : dense.data<float>(), per_example.data()));
    for (float l : per_example) loss_mean.Update(l);
    MetricBatch mb{out.data<float>(), rows, k, sparse ? label_scratch_.data() : nullptr, sparse ? nullptr : dense.data<float>()};
    if (compile_.loss.kind == Loss::Kind::kBinaryCrossentropy) mb = {out.data<float>(), rows * k, 1, label_scratch_.data(), nullptr};
    for (auto& m : metrics) m->Update(mb);
  }
  if (predictions) {
    std::vector<int64_t> dims = {total_rows};
    dims.insert(dims.end(), row_shape.begin(), row_shape.end());
    *predictions = Tensor(DType::kF32, Shape(dims));
    if (!collected.empty()) std::memcpy(predictions->raw_data(), collected.data(), collected.size() * sizeof(float));
    return Logs{};
  }
  Logs logs = {{"loss", loss_mean.Result()}};
  for (auto& m : metrics) logs.emplace_back(m->name(), m->Result());
  return logs;
}

Result<Logs> Model::evaluate(const data::Dataset& ds, EvaluateOptions options) {
  STRATA_ASSIGN_OR_RETURN(Logs logs, RunEvaluation(ds, options.steps, nullptr));
  if (options.verbose) {
    std::string line;
    for (const auto& [k, v] : logs) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%s%s: %.4f", line.empty() ? "" : " - ", k.c_str(), v);
      line += buf;
    }
    std::printf("%s\n", line.c_str());
  }
  return logs;
}

Result<Tensor> Model::predict(const data::Dataset& ds, int64_t steps) {
  Tensor out;
  STRATA_RETURN_IF_ERROR(RunEvaluation(ds, steps, &out).status());
  return out;
}

// ---- state ----------------------------------------------------------------------------------

Result<std::vector<float>> Model::get_state() const {
  if (!store_) return InvalidArgument("model " + name_ + ": not compiled");
  const Tensor& p = store_->params();
  std::vector<float> v(p.data<float>(), p.data<float>() + p.num_elements());
  v.insert(v.end(), slots_.data<float>(), slots_.data<float>() + slots_.num_elements());
  return v;
}

Status Model::set_state(const std::vector<float>& v) {
  if (!store_) return InvalidArgument("model " + name_ + ": not compiled");
  const size_t np = static_cast<size_t>(store_->params().num_elements()), ns = static_cast<size_t>(slots_.num_elements());
  if (v.size() != np + ns)
    return InvalidArgument("set_state: " + std::to_string(v.size()) + " values for " + std::to_string(np + ns));
  std::memcpy(store_->params().raw_data(), v.data(), np * sizeof(float));
  if (ns) std::memcpy(slots_.raw_data(), v.data() + np, ns * sizeof(float));
  for (size_t r = 1; r < replicas_.size(); ++r)
    std::memcpy(replicas_[r].store->params().raw_data(), v.data(), np * sizeof(float));
  return Status::OK();
}

Status Model::save_weights(const std::string& path) const {
  if (!store_) return InvalidArgument("save_weights: model " + name_ + " is not compiled");
  CheckpointState st;
  st.global_step = global_step_;
  st.epoch = epoch_;
  return WriteCheckpoint(path, *store_, slots_, st);
}

Status Model::load_weights(const std::string& path) {
  if (!store_) return InvalidArgument("load_weights: compile model " + name_ + " first");
  CheckpointState st;
  STRATA_RETURN_IF_ERROR(ReadCheckpoint(path, store_.get(), &slots_, &st));
  for (size_t r = 1; r < replicas_.size(); ++r)
    std::memcpy(replicas_[r].store->params().raw_data(), store_->params().raw_data(), store_->params().nbytes());
  global_step_ = st.global_step;
  epoch_ = static_cast<int>(st.epoch);
  return Status::OK();
}

}  // namespace strata::keras
