// The narrow interface between the graph and the machines that run it.
//
// A Backend turns a checked Graph into a Program (backend/compile.h). The graph layer knows
// nothing about oneDNN: the "cpu" backend (backend/cpu/) owns layouts, primitives and
// fusion; the "reference" backend (backend/reference/) interprets the graph in f64 with
// straightforward loops, the oracle the tests compare against. A "cuda" backend (cuDNN,
// cuBLAS) registers here the same way without touching graph/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/backend/compile.h"
#include "strata/backend/update_rule.h"

namespace strata::backend {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // OK when this backend can run `precision` on this host; otherwise Unimplemented with a
  // one-line reason that names what is missing and the alternative.
  virtual Status SupportsPrecision(Precision precision) const { return Status::OK(); }
  // `variables` is never null here: Compile() creates or checks it before calling.
  virtual Result<std::unique_ptr<Program>> Compile(const graph::Graph& g, const CompileOptions& options,
                                                   std::shared_ptr<VariableStore> variables) = 0;
  // The optimizer's update of b.n parameters where this backend's variables live (the
  // sharded update calls it on each replica's slice of the flat parameter block).
  virtual void ApplyUpdate(const UpdateRule& rule, const UpdateBuffers& b) const = 0;
};

// Backends by name ("cpu", "reference"); nullptr when unknown.
Backend* FindBackend(const std::string& name);
std::vector<std::string> BackendNames();

// Defined by each backend's .cc file (listed in backend.cc so static linking keeps them).
std::unique_ptr<Backend> NewCpuBackend();
std::unique_ptr<Backend> NewReferenceBackend();

}  // namespace strata::backend
