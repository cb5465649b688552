// Which body of Strata's own vectorised kernels runs (broadcast_kernels.h, depthwise_kernels.h):
// each is one loop compiled three times, for AVX-512, AVX2 and a generic target. The default is
// the widest HostIsa() allows (STRATA_MAX_ISA caps it); tests pass a narrower one to check the
// other bodies on a wide host.
#pragma once

#include <vector>

namespace strata::backend::cpu {

enum class KernelIsa { kScalar, kAvx2, kAvx512 };

// The widest body HostIsa() allows.
KernelIsa BestKernelIsa();
// Every body this host can run, narrowest first, up to BestKernelIsa(): what tests check each of.
std::vector<KernelIsa> RunnableKernelIsas();
// "strata:avx512", "strata:avx2" or "strata:scalar": the implementation a trace line names.
const char* KernelImplName(KernelIsa isa);

}  // namespace strata::backend::cpu
