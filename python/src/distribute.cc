// strata._strata.distribute: the C++ strategies (distribute/strategy.h) and ClusterResolver
// (distribute/cluster_resolver.h). python/strata/distribute/ gives them tf.distribute's names.
#include <pybind11/stl.h>

#include <memory>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "host_info.h"
#include "strata/distribute/cluster_resolver.h"
#include "strata/distribute/collective.h"
#include "strata/distribute/strategy.h"

namespace strata::python {
namespace {

using distribute::ClusterResolver;
using distribute::Strategy;

// The C++ scopes a Python `with strategy.scope():` entered on this thread, innermost last
// (Strategy::Scope is thread-local RAII; Python's with-block enters and exits on one thread).
thread_local std::vector<std::pair<Strategy*, std::unique_ptr<Strategy::Scope>>> g_scopes;

distribute::ReduceOp ReduceOpOf(const std::string& op) {
  if (op == "SUM") return distribute::ReduceOp::kSum;
  if (op == "MEAN") return distribute::ReduceOp::kMean;
  ThrowValueError("reduce_op must be \"SUM\" or \"MEAN\" (or strata.distribute.ReduceOp), got \"" + op + "\"");
}

py::dict ClusterSpecDict(const distribute::ClusterSpec& spec) {
  py::list hosts;
  for (size_t i = 0; i < spec.host_info.size(); ++i) hosts.append(HostInfoDict(spec.host_info[i], i == 0));
  py::dict d;
  d["hosts"] = spec.hosts;
  d["replicas_per_host"] = spec.replicas_per_host;
  d["host_info"] = hosts;
  return d;
}

std::unique_ptr<Strategy> MakeStrategy(Result<std::unique_ptr<Strategy>> r) { return Unwrap(std::move(r)); }

}  // namespace

void RegisterDistribute(py::module_& m) {
  py::module_ d = m.def_submodule("distribute", "Synchronous data parallelism over cores and MPI workers.");

  py::class_<Strategy>(d, "Strategy",
                       "A C++ distribute::Strategy: replicas are pinned threads, one per core. strata.distribute wraps it.")
      .def_property_readonly("num_replicas_in_sync", &Strategy::num_replicas_in_sync)
      .def_property_readonly("num_local_replicas", &Strategy::num_local_replicas)
      .def_property_readonly("num_workers", &Strategy::num_workers)
      .def_property_readonly("worker_index", &Strategy::worker_index)
      .def_property_readonly("name", &Strategy::name)
      .def("_enter_scope", [](Strategy& s) { g_scopes.emplace_back(&s, std::make_unique<Strategy::Scope>(&s)); })
      .def("_exit_scope",
           [](Strategy& s) {
             if (g_scopes.empty() || g_scopes.back().first != &s)
               ThrowValueError("strategy scopes must be exited in the reverse order of entering, on the thread that "
                               "entered them");
             g_scopes.pop_back();
           })
      .def("_is_current", [](Strategy& s) { return Strategy::Current() == &s; })
      // fn(replica) on every replica's own (pinned) thread, the GIL taken in each; waits for all.
      // python/strata/distribute catches fn's exceptions itself: one reaching here is a bug in it.
      .def(
          "_run_per_replica",
          [](Strategy& s, py::function fn) {
            Status st = [&] {
              py::gil_scoped_release release;
              return s.run([&](int r) -> Status {
                py::gil_scoped_acquire acquire;
                try {
                  fn(r);
                } catch (py::error_already_set& e) {
                  return InvalidArgument(std::string("a per-replica function raised: ") + e.what());
                } catch (const std::exception& e) {
                  return InvalidArgument(std::string("a per-replica function raised: ") + e.what());
                }
                return Status::OK();
              });
            }();
            Check(st);
          },
          py::arg("fn"))
      // One value per local replica, reduced over every replica of every worker (an all-reduce
      // across MPI workers).
      .def(
          "_reduce",
          [](const Strategy& s, const std::string& op, std::vector<double> values) {
            if (static_cast<int>(values.size()) != s.num_local_replicas())
              ThrowValueError("reduce: " + std::to_string(values.size()) + " per-replica values for " +
                              std::to_string(s.num_local_replicas()) + " local replicas");
            const distribute::ReduceOp rop = ReduceOpOf(op);
            Result<double> r = [&] {
              py::gil_scoped_release release;  // may wait for the other workers
              return s.reduce(rop, distribute::PerReplica<double>{std::move(values)});
            }();
            return Unwrap(std::move(r));
          },
          py::arg("reduce_op"), py::arg("values"));

  d.def(
      "MirroredStrategy",
      [](int replicas) {
        if (replicas < 0) ThrowValueError("replicas must be >= 0 (0: one per usable core), got " + std::to_string(replicas));
        return MakeStrategy(distribute::MirroredStrategy(replicas));
      },
      py::arg("replicas"));
  d.def("OneDeviceStrategy", [] { return distribute::OneDeviceStrategy(); });
  d.def(
      "MultiWorkerMirroredStrategy",
      [](ClusterResolver* resolver, int replicas_per_worker) {
        if (resolver != nullptr) {
          Result<std::unique_ptr<Strategy>> r = [&] {
            py::gil_scoped_release release;  // connects to the other workers
            return distribute::MultiWorkerMirroredStrategy(*resolver);
          }();
          return MakeStrategy(std::move(r));
        }
        if (replicas_per_worker < 0)
          ThrowValueError("replicas_per_worker must be >= 0 (0: one per usable core), got " +
                          std::to_string(replicas_per_worker));
        Result<std::unique_ptr<Strategy>> r = [&] {
          py::gil_scoped_release release;
          return distribute::MultiWorkerMirroredStrategy(replicas_per_worker);
        }();
        return MakeStrategy(std::move(r));
      },
      py::arg("resolver").none(true), py::arg("replicas_per_worker"));

  py::class_<ClusterResolver>(d, "ClusterResolver", "distribute::ClusterResolver: this job's hosts, from the launch environment.")
      .def(py::init([](bool recalibrate, int replicas, py::object variables) {
             if (replicas < 0) ThrowValueError("replicas must be >= 0 (0: one per usable core), got " + std::to_string(replicas));
             ClusterResolver::Options options{.recalibrate = recalibrate, .replicas = replicas};
             if (variables.is_none()) {
               Result<ClusterResolver> r = [&] {
                 py::gil_scoped_release release;
                 return ClusterResolver::FromEnvironment(options);
               }();
               return std::make_unique<ClusterResolver>(Unwrap(std::move(r)));
             }
             auto vars = variables.cast<std::vector<std::pair<std::string, std::string>>>();
             Result<ClusterResolver> r = [&] {
               py::gil_scoped_release release;
               return ClusterResolver::FromVariables(vars, options);
             }();
             return std::make_unique<ClusterResolver>(Unwrap(std::move(r)));
           }),
           py::arg("recalibrate"), py::arg("replicas"), py::arg("variables").none(true))
      .def("environment",
           [](const ClusterResolver& c) {
             const distribute::ClusterEnvironment& e = c.environment();
             py::dict d;
             d["source"] = e.source;
             d["num_workers"] = e.num_workers;
             d["worker_index"] = e.worker_index;
             d["local_worker_index"] = e.local_worker_index;
             d["launched_under_mpi"] = e.launched_under_mpi;
             d["replicas_per_worker"] = e.replicas_per_worker;
             d["worker_hosts"] = e.worker_hosts;
             return d;
           })
      .def("connect",
           [](ClusterResolver& c) {
             Status s = [&] {
               py::gil_scoped_release release;
               return c.connect();
             }();
             Check(s);
           })
      .def("initialize",
           [](ClusterResolver& c) {
             Status s = [&] {
               py::gil_scoped_release release;
               return c.initialize();
             }();
             Check(s);
           })
      .def("cluster_spec", [](const ClusterResolver& c) { return ClusterSpecDict(c.cluster_spec()); })
      .def_property_readonly("replicas_per_worker", &ClusterResolver::replicas_per_worker);
}

}  // namespace strata::python
