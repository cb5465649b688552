// A region of a source file compiled for an instruction set beyond the build's baseline (the
// build has no -march; HostIsa() picks the region's functions at run time):
//
//   #include "strata/core/isa_region.h"
//   STRATA_ISA_REGION_BEGIN("avx2,fma")
//   #include <immintrin.h>
//   ... kernels ...
//   STRATA_ISA_REGION_END
//
// STRATA_ISA_VECTORIZED_REGION_BEGIN(isa) also has GCC auto-vectorize the region's loops (it
// does only from -O3 otherwise): for kernels written as plain loops, compiled once per ISA.
//
// GCC takes a target for a region with push_options (and warns falsely inside immintrin.h under
// it, GCC 12: the two uninitialized warnings are off in the region); clang applies the target
// attribute to every function in the region.
#pragma once

#define STRATA_ISA_REGION_STR(x) #x
#define STRATA_ISA_REGION_XSTR(x) STRATA_ISA_REGION_STR(x)

#if defined(__clang__)
#define STRATA_ISA_REGION_BEGIN(isa) \
  _Pragma(STRATA_ISA_REGION_XSTR(clang attribute push(__attribute__((target(isa))), apply_to = function)))
#define STRATA_ISA_VECTORIZED_REGION_BEGIN(isa) STRATA_ISA_REGION_BEGIN(isa)
#define STRATA_ISA_REGION_END _Pragma("clang attribute pop")
#else
#define STRATA_ISA_REGION_BEGIN(isa)                     \
  _Pragma("GCC push_options")                            \
  _Pragma("GCC diagnostic push")                         \
  _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")  \
  _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") \
  _Pragma(STRATA_ISA_REGION_XSTR(GCC target(isa)))
#define STRATA_ISA_VECTORIZED_REGION_BEGIN(isa) \
  STRATA_ISA_REGION_BEGIN(isa)                  \
  _Pragma("GCC optimize(\"tree-vectorize\")")
#define STRATA_ISA_REGION_END \
  _Pragma("GCC diagnostic pop") \
  _Pragma("GCC pop_options")
#endif
