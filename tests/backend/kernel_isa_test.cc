// Which body of Strata's own multi-body kernels runs (backend/cpu/kernel_isa.h).
#include "strata/backend/cpu/kernel_isa.h"

#include <gtest/gtest.h>

#include <string>

#include "strata/core/cpu.h"

namespace strata::backend::cpu {
namespace {

TEST(KernelIsaTest, DefaultBodyFollowsHostIsa) {
  const KernelIsa want = HostIsa().avx512f && HostIsa().avx512vl ? KernelIsa::kAvx512
                         : HostIsa().avx2                         ? KernelIsa::kAvx2
                                                                  : KernelIsa::kScalar;
  EXPECT_EQ(BestKernelIsa(), want);
  EXPECT_EQ(std::string(KernelImplName(want)),
            want == KernelIsa::kAvx512 ? "strata:avx512" : want == KernelIsa::kAvx2 ? "strata:avx2" : "strata:scalar");
}

TEST(KernelIsaTest, RunnableBodiesAreEveryOneUpToTheDefaultNarrowestFirst) {
  const auto isas = RunnableKernelIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), KernelIsa::kScalar);
  EXPECT_EQ(isas.back(), BestKernelIsa());
  EXPECT_EQ(isas.size(), static_cast<size_t>(BestKernelIsa()) + 1);
}

}  // namespace
}  // namespace strata::backend::cpu
