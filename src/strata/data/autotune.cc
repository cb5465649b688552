#include "strata/data/autotune.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "strata/core/log.h"
#include "strata/data/pipeline.h"

namespace strata::data {

double QueueWaitNs(double producer_ns, double consumer_ns, double buffer) {
  if (producer_ns <= 0) return 0;
  if (consumer_ns <= 0) return producer_ns;  // the consumer always waits a full production
  const double rho = consumer_ns / producer_ns;  // arrivals per service, as in tf.data's model
  double p_empty;
  if (std::abs(rho - 1) < 1e-9) {
    p_empty = 1.0 / (buffer + 1);
  } else {
    // (1 - rho) / (1 - rho^(n+1)), computed stably for rho > 1.
    const double lp = (buffer + 1) * std::log(rho);
    if (lp > 700) return 0;
    p_empty = (1 - rho) / (1 - std::exp(lp));
  }
  return std::clamp(p_empty, 0.0, 1.0) * producer_ns;
}

namespace {

int64_t Value(const ModelNode& n, const std::vector<int64_t>& v, bool parallelism) {
  if (parallelism) return n.parallelism_param >= 0 ? v[n.parallelism_param] : n.parallelism;
  return n.buffer_param >= 0 ? v[n.buffer_param] : n.buffer;
}

// Time per element the node's input chain takes to produce, when its consumer asks every
// `consumer_ns`: the wait of the input plus the input's own sync work.
double InputNs(const Model& m, const std::vector<int64_t>& v, const ModelNode& n, double consumer_ns) {
  double worst = 0;
  for (int in : n.inputs) worst = std::max(worst, ModelWaitNs(m, v, in, consumer_ns));
  return worst;
}

}  // namespace

double ModelWaitNs(const Model& m, const std::vector<int64_t>& v, int index, double consumer_ns) {
  const ModelNode& n = m.nodes[index];
  switch (n.kind) {
    case ModelNode::Kind::kSync: {
      // Runs in its consumer's thread: its input is asked once per (consumer + own) time.
      const double per_input_consumer = (consumer_ns + n.self_ns) / std::max(n.ratio, 1e-9);
      return n.self_ns + n.ratio * InputNs(m, v, n, per_input_consumer);
    }
    case ModelNode::Kind::kParallel: {
      const double p = static_cast<double>(std::max<int64_t>(1, Value(n, v, true)));
      double producer;
      if (n.parallel_inputs) {  // interleave: p workers each read an open input
        producer = (n.self_ns + n.ratio * InputNs(m, v, n, 0)) / p;
      } else {  // map: inputs are read one at a time, the function runs p wide
        const double read = n.ratio * InputNs(m, v, n, n.self_ns / p);
        producer = std::max((n.self_ns + read) / p, read);
      }
      return QueueWaitNs(producer, consumer_ns, 2 * p);
    }
    case ModelNode::Kind::kBuffer: {
      const double producer = n.self_ns + n.ratio * InputNs(m, v, n, 0);
      return QueueWaitNs(producer, consumer_ns, static_cast<double>(Value(n, v, false)));
    }
  }
  return 0;
}

std::vector<int64_t> HillClimb(const Model& m, const Budget& budget, double consumer_ns) {
  std::vector<int64_t> v(m.params.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = m.params[i].min;
  if (v.empty() || m.nodes.empty()) return v;
  auto cpu_used = [&](const std::vector<int64_t>& x) {
    int64_t c = 0;
    for (const auto& n : m.nodes)
      if (n.kind == ModelNode::Kind::kParallel && n.work_share >= 0.1) c += Value(n, x, true);
    return c;
  };
  auto ram_used = [&](const std::vector<int64_t>& x) {
    double r = 0;
    for (const auto& n : m.nodes) {
      if (n.kind == ModelNode::Kind::kParallel) r += 2.0 * Value(n, x, true) * n.bytes;
      if (n.kind == ModelNode::Kind::kBuffer) r += Value(n, x, false) * n.bytes;
    }
    return r;
  };
  double wait = ModelWaitNs(m, v, m.root, consumer_ns);
  for (int step = 0; step < 256; ++step) {
    if (consumer_ns > 0 && wait <= 0.02 * consumer_ns) break;  // the consumer is fed
    int best = -1;
    double best_wait = wait;
    std::vector<int64_t> best_v;
    for (size_t i = 0; i < v.size(); ++i) {
      const ModelParam& p = m.params[i];
      if (v[i] >= p.max) continue;
      std::vector<int64_t> t = v;
      t[i] = p.is_parallelism ? v[i] + 1 : std::min(p.max, std::max(v[i] + 1, v[i] * 2));
      if (cpu_used(t) > std::max<int64_t>(budget.cpu, cpu_used(v))) continue;
      if (ram_used(t) > static_cast<double>(budget.ram_bytes)) continue;
      const double w = ModelWaitNs(m, t, m.root, consumer_ns);
      if (w < best_wait) {
        best_wait = w;
        best = static_cast<int>(i);
        best_v = std::move(t);
      }
    }
    if (best < 0 || wait - best_wait < 0.01 * wait) break;
    v = std::move(best_v);
    wait = best_wait;
  }
  return v;
}

Model BuildModel(const std::vector<StageStatsSnapshot>& now, const std::vector<StageStatsSnapshot>& before) {
  Model m;
  std::map<std::string, const StageStatsSnapshot*> prev;
  for (const auto& s : before) prev[s.path] = &s;
  std::map<std::string, int> index;
  for (const auto& s : now) {
    ModelNode n;
    n.path = s.path;
    if (s.name == "prefetch") n.kind = ModelNode::Kind::kBuffer;
    else if (s.name == "parallel_map" || s.name == "parallel_interleave") n.kind = ModelNode::Kind::kParallel;
    int64_t elements = s.elements, inputs = s.inputs, busy = s.busy_ns, bytes = s.bytes;
    auto p = prev.find(s.path);
    if (p != prev.end() && s.elements - p->second->elements >= 8) {  // enough in the window
      elements -= p->second->elements;
      inputs -= p->second->inputs;
      busy -= p->second->busy_ns;
      bytes -= p->second->bytes;
    }
    if (elements > 0) {
      n.self_ns = static_cast<double>(busy) / elements;
      n.ratio = inputs > 0 ? static_cast<double>(inputs) / elements : 1.0;
      n.bytes = static_cast<double>(bytes) / elements;
    }
    n.work_share = static_cast<double>(std::max<int64_t>(busy, 0));  // normalised below
    n.parallelism = std::max<int64_t>(1, s.parallelism);
    n.buffer = std::max<int64_t>(1, s.buffer_capacity);
    index[s.path] = static_cast<int>(m.nodes.size());
    m.nodes.push_back(std::move(n));
  }
  double total_busy = 0;
  for (const auto& n : m.nodes) total_busy += n.work_share;
  for (auto& n : m.nodes) n.work_share = total_busy > 0 ? n.work_share / total_busy : 1.0;
  // Inputs: "P.f" (what an interleave opened) stands for its input, else "P.0", "P.1", ...
  for (auto& n : m.nodes) {
    auto f = index.find(n.path + ".f");
    if (f != index.end()) {
      n.inputs.push_back(f->second);
      n.parallel_inputs = true;
      // The interleave hands on its opened datasets' elements one for one.
      n.ratio = 1;
      continue;
    }
    for (int i = 0;; ++i) {
      auto it = index.find(n.path + "." + std::to_string(i));
      if (it == index.end()) break;
      n.inputs.push_back(it->second);
    }
  }
  auto r = index.find("0");
  m.root = r == index.end() ? 0 : r->second;
  return m;
}

Autotuner::Autotuner(Pipeline* pipeline) : pipeline_(pipeline) { thread_ = std::thread([this] { Loop(); }); }

Autotuner::~Autotuner() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Autotuner::Loop() {
  int64_t period_ms = std::max<int64_t>(1, pipeline_->autotune().period_ms);
  std::unique_lock<std::mutex> l(mu_);
  while (!cv_.wait_for(l, std::chrono::milliseconds(period_ms), [&] { return stop_; })) {
    l.unlock();
    TuneOnce();
    l.lock();
    period_ms = std::min<int64_t>(period_ms * 2, 1000);
  }
}

void Autotuner::TuneOnce() {
  std::vector<StageStatsSnapshot> now = pipeline_->Snapshot();
  Model m = BuildModel(now, last_);
  last_ = now;
  // Attach the tunables.
  std::vector<std::shared_ptr<Tunable>> tunables = pipeline_->Tunables();
  std::vector<std::shared_ptr<Tunable>> order;
  for (const auto& t : tunables) {
    for (size_t i = 0; i < m.nodes.size(); ++i) {
      if (m.nodes[i].path != t->stats()->path) continue;
      ModelParam p;
      p.is_parallelism = t->kind() == Tunable::Kind::kParallelism;
      p.node = static_cast<int>(i);
      p.min = t->min();
      p.max = t->max();
      (p.is_parallelism ? m.nodes[i].parallelism_param : m.nodes[i].buffer_param) = static_cast<int>(m.params.size());
      m.params.push_back(p);
      order.push_back(t);
    }
  }
  if (m.params.empty()) return;
  // The consumer's own time per element in this window.
  const int64_t calls = pipeline_->consumer_calls_.load(std::memory_order_relaxed);
  const int64_t outside = pipeline_->consumer_outside_ns_.load(std::memory_order_relaxed);
  const double consumer_ns =
      calls > last_calls_ + 1 ? static_cast<double>(outside - last_outside_ns_) / (calls - last_calls_) : 0.0;
  last_calls_ = calls;
  last_outside_ns_ = outside;
  Budget b{pipeline_->cpu_budget(), pipeline_->ram_budget_bytes()};
  std::vector<int64_t> v = HillClimb(m, b, consumer_ns);
  for (size_t i = 0; i < v.size(); ++i) {
    order[i]->Set(v[i]);
    if (order[i]->kind() == Tunable::Kind::kParallelism)
      order[i]->stats()->parallelism.store(order[i]->value(), std::memory_order_relaxed);
    else
      order[i]->stats()->buffer_capacity.store(order[i]->value(), std::memory_order_relaxed);
  }
  STRATA_LOG(kDebug) << "autotune: consumer " << consumer_ns << " ns/element, modelled wait "
                     << ModelWaitNs(m, v, m.root, consumer_ns) << " ns";
}

}  // namespace strata::data
