// A host's description (distribute::HostInfo) as the dict strata.Device is built from; shared by
// devices.cc (strata.devices()) and distribute.cc (ClusterResolver.cluster_spec()).
#pragma once
#include <pybind11/pybind11.h>

#include "strata/distribute/cluster_resolver.h"

namespace strata::python {

// `this_host`: the precisions come from this process's backend (which honours
// ONEDNN_MAX_CPU_ISA / STRATA_MAX_ISA), as `strata devices` prints them; another worker's
// follow from its ISA list.
pybind11::dict HostInfoDict(const distribute::HostInfo& h, bool this_host);

}  // namespace strata::python
