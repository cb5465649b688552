// Fault injection for the recovery tests (docs/distribute.md, "Faults"). STRATA_FAULT_PAUSE
// names one point where the process stops and waits to be killed, so a test's kill -9 lands at
// a known step, or inside a backup write after its bytes are in the temporary file and before
// the rename that publishes it:
//   STRATA_FAULT_PAUSE=after-step:K[@W]    after global step K (and the backup due at K, if any)
//   STRATA_FAULT_PAUSE=backup-write:N[@W]  inside this process's N-th backup write
// @W limits it to worker W. The process prints one line to stderr, "strata: fault point
// after-step:K reached (STRATA_FAULT_PAUSE): worker W, pid P paused ...", then sleeps (up to
// 10 minutes, then goes on). Unset, as in production, each call reads one cached flag.
#pragma once

#include <cstdint>
#include <string>

namespace strata::keras {

enum class FaultPoint { kAfterStep, kBackupWrite };

// Pauses when STRATA_FAULT_PAUSE names `point` with count `n` (and this worker, if it names one);
// `detail` goes into the message (e.g. the temporary file being written).
void PauseAtFaultPoint(FaultPoint point, int64_t n, int worker, const std::string& detail = "");

}  // namespace strata::keras
