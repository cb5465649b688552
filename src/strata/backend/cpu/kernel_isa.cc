#include "strata/backend/cpu/kernel_isa.h"

#include "strata/core/cpu.h"

namespace strata::backend::cpu {

KernelIsa BestKernelIsa() {
  const CpuIsa& isa = HostIsa();
  if (isa.avx512f && isa.avx512vl) return KernelIsa::kAvx512;
  if (isa.avx2) return KernelIsa::kAvx2;
  return KernelIsa::kScalar;
}

std::vector<KernelIsa> RunnableKernelIsas() {
  std::vector<KernelIsa> isas = {KernelIsa::kScalar};
  const KernelIsa best = BestKernelIsa();
  if (best >= KernelIsa::kAvx2) isas.push_back(KernelIsa::kAvx2);
  if (best >= KernelIsa::kAvx512) isas.push_back(KernelIsa::kAvx512);
  return isas;
}

const char* KernelImplName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512: return "strata:avx512";
    case KernelIsa::kAvx2: return "strata:avx2";
    case KernelIsa::kScalar: return "strata:scalar";
  }
  return "strata:scalar";
}

}  // namespace strata::backend::cpu
