// Whether a memory plan fits a machine, and if not, why and what would make it fit.
#pragma once

#include <cstdint>

#include "policy/hardware_spec.h"
#include "policy/memory_accounting.h"
#include "policy/model_spec.h"
#include "policy/plan.h"
#include "policy/workload.h"
#include "src/core/status.h"

namespace strata {

// Ok when the plan's total_bytes fit every tier's capacity. Otherwise ResourceExhausted naming the
// binding constraint — all tiers together (no placement can fit), else the first tier that
// overflows (GPU, CPU, disk) — by how much, its largest parts, and what would make it fit.
Status CheckFits(const MemoryPlan& memory, const HardwareSpec& hardware, const Plan& plan);

// Host memory a run of `plan` allocates: its GPU and CPU total_bytes, since the engine keeps the
// device tier in host memory too (the CPU build's emulated device, src/memory/memory_tiers.h),
// plus, with compress_weight on weights not stored 4-bit, the 4-bit copy of every weight that
// setup quantizes before they go home (the accounting's weight bytes).
int64_t HostBytesOf(const MemoryPlan& memory, const ModelSpec& model, const Plan& plan);

// Host memory a run takes besides its plan's bytes, kept free when a plan is checked against
// what is available: the process's code, heap and threads, the tokenizer and job buffers, the
// window disk weights are written through (src/memory/weight_homes.h).
inline constexpr int64_t kHostMemoryReserveBytes = int64_t{512} << 20;

// Ok when HostBytesOf the plan and kHostMemoryReserveBytes fit `available_bytes` (what the machine
// can give now: src/core/host_memory.h's AvailableHostBytes). Otherwise ResourceExhausted with the
// figures, the device and CPU tiers' shares, the largest parts, and the plan nearest to `plan`
// that fits: its weights moved to disk (only as many percent as needed, the CPU share first),
// else also its KV cache, then its activations, then fewer micro-batches and smaller ones, written
// as flags (PlanToFlexGenFlags) with what it needs in host memory and on disk; or that nothing
// fits. The accounting's own errors (AccountMemory) are returned as they are.
Status CheckHostMemory(const ModelSpec& model, const Workload& workload, const Plan& plan,
                       int64_t available_bytes);
// The same for a plan whose accounting `memory` (AccountMemory of model, workload and plan) the
// caller already has.
Status CheckHostMemory(const MemoryPlan& memory, const ModelSpec& model, const Workload& workload,
                       const Plan& plan, int64_t available_bytes);

}  // namespace strata
