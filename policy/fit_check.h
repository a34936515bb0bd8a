// Whether a memory plan fits a machine, and if not, why and what would make it fit.
#pragma once

#include "policy/hardware_spec.h"
#include "policy/memory_accounting.h"
#include "policy/plan.h"
#include "src/core/status.h"

namespace strata {

// Ok when the plan's total_bytes fit every tier's capacity. Otherwise ResourceExhausted naming the
// binding constraint — all tiers together (no placement can fit), else the first tier that
// overflows (GPU, CPU, disk) — by how much, its largest parts, and what would make it fit.
Status CheckFits(const MemoryPlan& memory, const HardwareSpec& hardware, const Plan& plan);

}  // namespace strata
