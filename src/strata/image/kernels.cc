#include "strata/image/kernels.h"

#include <cstdlib>
#include <cstring>

#include "strata/core/cpu.h"

namespace strata::image::kernels {

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return "scalar";
  }
}

const KernelTable* KernelsFor(Isa isa) {
  const CpuIsa& host = HostIsa();
  switch (isa) {
    case Isa::kAvx512: return host.avx512f && host.avx2 ? &kAvx512Table : nullptr;
    case Isa::kAvx2: return host.avx2 ? &kAvx2Table : nullptr;
    default: return &kScalarTable;
  }
}

const KernelTable& ScalarKernels() { return kScalarTable; }

const KernelTable& Kernels() {
  static const KernelTable* chosen = [] {
    Isa want = Isa::kAvx512;
    if (const char* env = std::getenv("STRATA_IMAGE_ISA")) {
      if (std::strcmp(env, "scalar") == 0) want = Isa::kScalar;
      else if (std::strcmp(env, "avx2") == 0) want = Isa::kAvx2;
    }
    for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kScalar}) {
      if (static_cast<int>(isa) > static_cast<int>(want)) continue;
      if (const KernelTable* t = KernelsFor(isa)) return t;
    }
    return &kScalarTable;
  }();
  return *chosen;
}

}  // namespace strata::image::kernels
