#include "strata/distribute/cluster_resolver.h"

#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "strata/core/cpu.h"
#include "strata/distribute/collective.h"

extern char** environ;

namespace strata::distribute {
namespace {

using Vars = std::vector<std::pair<std::string, std::string>>;

const std::string* Find(const Vars& vars, const std::string& name) {
  for (const auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

Result<int> ParseCount(const Vars& vars, const std::string& name) {
  const std::string* v = Find(vars, name);
  if (!v) return -1;
  char* end = nullptr;
  const long n = std::strtol(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || n < 0 || n > 1'000'000)
    return InvalidArgument(name + "='" + *v + "' is not a worker count or index");
  return static_cast<int>(n);
}

// Slurm's compressed host lists: "node[01-03,07],login1" -> node01 node02 node03 node07 login1.
std::vector<std::string> ExpandSlurmNodeList(const std::string& list) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < list.size()) {
    size_t j = i;
    int depth = 0;
    while (j < list.size() && (list[j] != ',' || depth > 0)) {
      if (list[j] == '[') ++depth;
      if (list[j] == ']') --depth;
      ++j;
    }
    const std::string item = list.substr(i, j - i);
    const size_t open = item.find('['), close = item.find(']');
    if (open == std::string::npos || close == std::string::npos || close < open) {
      if (!item.empty()) out.push_back(item);
    } else {
      const std::string prefix = item.substr(0, open), suffix = item.substr(close + 1);
      const std::string ranges = item.substr(open + 1, close - open - 1);
      size_t a = 0;
      while (a <= ranges.size()) {
        size_t b = ranges.find(',', a);
        if (b == std::string::npos) b = ranges.size();
        const std::string r = ranges.substr(a, b - a);
        const size_t dash = r.find('-');
        if (dash == std::string::npos) {
          out.push_back(prefix + r + suffix);
        } else {
          const std::string lo = r.substr(0, dash), hi = r.substr(dash + 1);
          const long from = std::strtol(lo.c_str(), nullptr, 10), to = std::strtol(hi.c_str(), nullptr, 10);
          for (long n = from; n <= to && out.size() < 100000; ++n) {
            std::string num = std::to_string(n);
            if (num.size() < lo.size()) num = std::string(lo.size() - num.size(), '0') + num;  // keep zero padding
            out.push_back(prefix + num + suffix);
          }
        }
        a = b + 1;
      }
    }
    i = j + 1;
  }
  return out;
}

}  // namespace

Result<ClusterSpec> ClusterResolver::Local(Options options) {
  HostInfo h;
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) == 0) h.hostname = name;
  h.cpu_model = CpuModelName();
  h.cpu_ids = UsableCpuList();
  h.cores = UsableCores();
  h.isa = HostIsa().Names();
  h.memory_bytes = UsableMemoryBytes();
  h.replicas = options.replicas > 0 ? options.replicas : h.cores;
  STRATA_ASSIGN_OR_RETURN(h.peak, CalibratedPeakFlops(options.recalibrate));
  ClusterSpec spec;
  spec.hosts = 1;
  spec.replicas_per_host = h.replicas;
  spec.host_info.push_back(std::move(h));
  return spec;
}

Result<ClusterResolver> ClusterResolver::FromVariables(const Vars& vars, Options options) {
  ClusterEnvironment env;
  // The launcher, if any.
  STRATA_ASSIGN_OR_RETURN(int ompi_size, ParseCount(vars, "OMPI_COMM_WORLD_SIZE"));
  STRATA_ASSIGN_OR_RETURN(int ompi_rank, ParseCount(vars, "OMPI_COMM_WORLD_RANK"));
  STRATA_ASSIGN_OR_RETURN(int pmi_size, ParseCount(vars, "PMI_SIZE"));
  STRATA_ASSIGN_OR_RETURN(int pmi_rank, ParseCount(vars, "PMI_RANK"));
  STRATA_ASSIGN_OR_RETURN(int slurm_size, ParseCount(vars, "SLURM_NTASKS"));
  STRATA_ASSIGN_OR_RETURN(int slurm_rank, ParseCount(vars, "SLURM_PROCID"));
  if (ompi_size > 0) {
    env.source = "OpenMPI";
    env.num_workers = ompi_size;
    env.worker_index = std::max(ompi_rank, 0);
    env.launched_under_mpi = true;
  } else if (pmi_size > 0) {
    env.source = "MPICH";
    env.num_workers = pmi_size;
    env.worker_index = std::max(pmi_rank, 0);
    env.launched_under_mpi = true;
  } else if (slurm_size > 0 && Find(vars, "SLURM_STEP_ID")) {  // inside srun, not just sbatch
    env.source = "Slurm";
    env.num_workers = slurm_size;
    env.worker_index = std::max(slurm_rank, 0);
    env.launched_under_mpi = true;
  }
  for (const char* local : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    STRATA_ASSIGN_OR_RETURN(int l, ParseCount(vars, local));
    if (env.launched_under_mpi && l >= 0) {
      env.local_worker_index = l;
      break;
    }
  }
  if (const std::string* nodes = Find(vars, "SLURM_JOB_NODELIST")) env.worker_hosts = ExpandSlurmNodeList(*nodes);

  // The spec, checked against the launcher.
  if (const std::string* text = Find(vars, "STRATA_CLUSTER")) {
    nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    auto bad = [&](const std::string& why) {
      return InvalidArgument("STRATA_CLUSTER: " + why + " (expected {\"cluster\": {\"worker\": [hosts...]}, \"task\": "
                             "{\"type\": \"worker\", \"index\": i}, \"replicas_per_worker\": n}); got: " + *text);
    };
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    if (!j.contains("cluster") || !j["cluster"].is_object() || !j["cluster"].contains("worker") ||
        !j["cluster"]["worker"].is_array() || j["cluster"]["worker"].empty())
      return bad("cluster.worker must be a non-empty list of hosts");
    std::vector<std::string> hosts;
    for (const auto& h : j["cluster"]["worker"]) {
      if (!h.is_string()) return bad("cluster.worker entries must be strings");
      hosts.push_back(h.get<std::string>());
    }
    int index = env.worker_index;
    if (j.contains("task")) {
      const auto& t = j["task"];
      if (!t.is_object()) return bad("task must be an object");
      if (t.contains("type") && (!t["type"].is_string() || (t["type"] != "worker" && t["type"] != "chief")))
        return bad("task.type must be \"worker\" (or \"chief\")");
      if (t.contains("index")) {
        if (!t["index"].is_number_integer() || t["index"].get<int64_t>() < 0 ||
            t["index"].get<int64_t>() >= static_cast<int64_t>(hosts.size()))
          return bad("task.index must be 0.." + std::to_string(hosts.size() - 1));
        index = t["index"].get<int>();
      }
    }
    if (j.contains("replicas_per_worker")) {
      if (!j["replicas_per_worker"].is_number_integer() || j["replicas_per_worker"].get<int64_t>() < 1)
        return bad("replicas_per_worker must be a positive integer");
      env.replicas_per_worker = j["replicas_per_worker"].get<int>();
    }
    const int n = static_cast<int>(hosts.size());
    if (env.launched_under_mpi && env.num_workers != n)
      return InvalidArgument("STRATA_CLUSTER lists " + std::to_string(n) + " workers but " + env.source +
                             " started " + std::to_string(env.num_workers) + " processes (-np " +
                             std::to_string(env.num_workers) + "); make them agree");
    if (env.launched_under_mpi && index != env.worker_index)
      return InvalidArgument("STRATA_CLUSTER task.index is " + std::to_string(index) + " but " + env.source +
                             " made this process rank " + std::to_string(env.worker_index));
    if (!env.launched_under_mpi) {
      env.num_workers = n;
      env.worker_index = index;
    }
    env.worker_hosts = hosts;
    env.source = env.launched_under_mpi ? env.source + " + STRATA_CLUSTER" : "STRATA_CLUSTER";
  }

  ClusterResolver r;
  r.env_ = env;
  if (options.replicas <= 0) options.replicas = env.replicas_per_worker;
  STRATA_ASSIGN_OR_RETURN(r.spec_, Local(options));
  return r;
}

Result<ClusterResolver> ClusterResolver::FromEnvironment(Options options) {
  Vars vars;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string k = kv.substr(0, eq);
    if (k.rfind("OMPI_COMM_WORLD_", 0) == 0 || k.rfind("PMI_", 0) == 0 || k.rfind("SLURM_", 0) == 0 ||
        k == "MPI_LOCALRANKID" || k == "STRATA_CLUSTER")
      vars.emplace_back(std::move(k), kv.substr(eq + 1));
  }
  return FromVariables(vars, options);
}

Status ClusterResolver::connect() {
  if (connected_) return Status::OK();
  if (env_.num_workers > 1 && !env_.launched_under_mpi)
    return InvalidArgument("the cluster (" + env_.source + ") has " + std::to_string(env_.num_workers) +
                              " workers but no MPI launcher started this process: run it as `mpirun -np " +
                              std::to_string(env_.num_workers) + " strata ...` or under srun");
  if (env_.launched_under_mpi) {
    STRATA_ASSIGN_OR_RETURN(collective_, MpiCollective());
    STRATA_ASSIGN_OR_RETURN(auto all, collective_->AllGather(HostInfoJson(spec_.host_info[0])));
    ClusterSpec spec;
    spec.hosts = static_cast<int>(all.size());
    spec.replicas_per_host = spec_.replicas_per_host;
    for (size_t i = 0; i < all.size(); ++i) {
      auto h = HostInfoFromJson(all[i]);
      if (!h.ok()) return h.status().WithContext("the description worker " + std::to_string(i) + " sent");
      spec.host_info.push_back(std::move(h).value());
    }
    spec_ = std::move(spec);
  }
  connected_ = true;
  return Status::OK();
}

Status ClusterResolver::initialize() {
  STRATA_RETURN_IF_ERROR(connect());
  const int mine = spec_.host_info[static_cast<size_t>(collective_ ? collective_->rank() : 0)].replicas;
  std::string differ;
  for (size_t i = 0; i < spec_.host_info.size(); ++i)
    if (spec_.host_info[i].replicas != spec_.host_info[0].replicas)
      differ += (differ.empty() ? "" : ", ") + std::string("worker ") + std::to_string(i) + " (" +
                spec_.host_info[i].hostname + ") runs " + std::to_string(spec_.host_info[i].replicas);
  if (!differ.empty())
    return InvalidArgument("workers disagree on replicas per worker: worker 0 (" + spec_.host_info[0].hostname +
                              ") runs " + std::to_string(spec_.host_info[0].replicas) + ", " + differ +
                              "; give every worker the same --replicas (or the same usable cores)");
  spec_.replicas_per_host = mine;
  return Status::OK();
}

std::string HostInfoJson(const HostInfo& h) {
  nlohmann::json j = {{"hostname", h.hostname},
                      {"cpu_model", h.cpu_model},
                      {"cores", h.cores},
                      {"cpu_ids", h.cpu_ids},
                      {"isa", h.isa},
                      {"memory_bytes", h.memory_bytes},
                      {"replicas", h.replicas},
                      {"peak_gflops_f32_per_core", h.peak.f32_gflops_per_core},
                      {"peak_gflops_bf16_per_core", h.peak.bf16_gflops_per_core},
                      {"peak_kernels", {{"f32", h.peak.f32_kernel}, {"bf16", h.peak.bf16_kernel}}},
                      {"peak_from_cache", h.peak.from_cache},
                      {"peak_provisional", h.peak.provisional},
                      {"peak_cores_measured", h.peak.cores_measured},
                      {"peak_note", h.peak.note}};
  return j.dump();
}

Result<HostInfo> HostInfoFromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Corruption("host description is not a JSON object: " + text.substr(0, 80));
  HostInfo h;
  try {
    h.hostname = j.at("hostname").get<std::string>();
    h.cpu_model = j.at("cpu_model").get<std::string>();
    h.cores = j.at("cores").get<int>();
    h.cpu_ids = j.at("cpu_ids").get<std::vector<int>>();
    h.isa = j.at("isa").get<std::vector<std::string>>();
    h.memory_bytes = j.at("memory_bytes").get<int64_t>();
    h.replicas = j.at("replicas").get<int>();
    h.peak.f32_gflops_per_core = j.at("peak_gflops_f32_per_core").get<double>();
    h.peak.bf16_gflops_per_core = j.at("peak_gflops_bf16_per_core").get<double>();
    h.peak.f32_kernel = j.at("peak_kernels").at("f32").get<std::string>();
    h.peak.bf16_kernel = j.at("peak_kernels").at("bf16").get<std::string>();
    h.peak.from_cache = j.at("peak_from_cache").get<bool>();
    h.peak.provisional = j.value("peak_provisional", false);
    h.peak.cores_measured = j.value("peak_cores_measured", 0);
    h.peak.note = j.value("peak_note", "");
  } catch (const nlohmann::json::exception& e) {
    return Corruption(std::string("host description: ") + e.what());
  }
  return h;
}

}  // namespace strata::distribute
