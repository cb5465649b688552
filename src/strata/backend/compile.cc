#include "strata/backend/compile.h"

#include <map>
#include <mutex>
#include <utility>

#include "strata/backend/backend.h"

namespace strata::backend {

Tensor& Program::input(graph::Value v) {
  static Tensor none;
  auto it = inputs_.find(v.node);
  return it == inputs_.end() ? none : it->second;
}

const Tensor& Program::fetch(graph::Value v) const {
  static const Tensor none;
  auto it = fetches_.find({v.node, v.output});
  return it == fetches_.end() ? none : it->second;
}

int64_t Program::matrix_flops_per_step() const {
  int64_t f = 0;
  for (const KernelInfo& k : kernels()) f += k.matrix_flops;
  return f;
}

int64_t Program::executed_matrix_flops_per_step() const {
  int64_t f = 0;
  for (const KernelInfo& k : kernels()) f += k.ExecutedMatrixFlops();
  return f;
}

int64_t Program::flops_per_step() const {
  int64_t f = 0;
  for (const KernelInfo& k : kernels()) f += k.matrix_flops + k.other_flops;
  return f;
}

namespace {
std::map<std::string, std::unique_ptr<Backend>>& Backends() {
  static std::map<std::string, std::unique_ptr<Backend>>* m = [] {
    auto* r = new std::map<std::string, std::unique_ptr<Backend>>;
    for (auto* make : {&NewCpuBackend, &NewReferenceBackend}) {
      std::unique_ptr<Backend> b = make();
      std::string name = b->name();
      (*r)[name] = std::move(b);
    }
    return r;
  }();
  return *m;
}
}  // namespace

Backend* FindBackend(const std::string& name) {
  auto it = Backends().find(name);
  return it == Backends().end() ? nullptr : it->second.get();
}

std::vector<std::string> BackendNames() {
  std::vector<std::string> v;
  for (const auto& [k, _] : Backends()) v.push_back(k);
  return v;
}

Status PrecisionSupported(Precision precision, const std::string& backend) {
  Backend* b = FindBackend(backend);
  if (b == nullptr) return InvalidArgument("unknown backend \"" + backend + "\"");
  return b->SupportsPrecision(precision);
}

std::vector<std::string> TrainablePrecisions(const std::string& backend) {
  std::vector<std::string> v;
  if (PrecisionSupported(Precision::kF32, backend).ok()) v.push_back("f32");
  if (PrecisionSupported(Precision::kBF16, backend).ok()) v.push_back("bf16");
  return v;
}

Result<std::unique_ptr<Program>> Compile(const graph::Graph& g, CompileOptions options) {
  Backend* b = FindBackend(options.backend);
  if (b == nullptr) return InvalidArgument("Compile: unknown backend \"" + options.backend + "\"");
  STRATA_RETURN_IF_ERROR(b->SupportsPrecision(options.precision));
  if (options.threads < 1) return InvalidArgument("Compile: threads must be >= 1");
  for (const graph::Value& f : options.fetches)
    if (!f.valid() || f.graph != &g) return InvalidArgument("Compile: a fetch is not a value of this graph");
  std::shared_ptr<VariableStore> vars = options.variables;
  if (vars == nullptr) {
    STRATA_ASSIGN_OR_RETURN(vars, VariableStore::Create(g));
  } else {
    STRATA_RETURN_IF_ERROR(vars->CheckCompatible(g));
  }
  if (const char* t = std::getenv("STRATA_TRACE"); t != nullptr && t[0] == '1') options.trace = true;
  for (auto [name, flag] : {std::pair{"STRATA_FUSE_BN_RELU6", &options.fuse_bn_relu6},
                            std::pair{"STRATA_FOLD_ZERO_PAD", &options.fold_zero_pad},
                            std::pair{"STRATA_FUSE_RESIDUAL", &options.fuse_residual},
                            std::pair{"STRATA_BROADCAST_KERNELS", &options.broadcast_kernels},
                            std::pair{"STRATA_DEPTHWISE_KERNELS", &options.depthwise_kernels}}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == 0) continue;
    if (std::string(v) != "0" && std::string(v) != "1")
      return InvalidArgument(std::string(name) + "=\"" + v + "\": expected 0 or 1");
    *flag = v[0] == '1';
  }
  if (const char* a = std::getenv("STRATA_CONV_ALGORITHM"); a != nullptr && *a != 0) {
    if (std::string(a) == "direct") {
      options.conv_algorithm = ConvAlgorithm::kDirect;
    } else if (std::string(a) == "auto") {
      options.conv_algorithm = ConvAlgorithm::kAuto;
    } else {
      return InvalidArgument("STRATA_CONV_ALGORITHM=\"" + std::string(a) + "\": expected auto or direct");
    }
  }
  return b->Compile(g, options, std::move(vars));
}

}  // namespace strata::backend
