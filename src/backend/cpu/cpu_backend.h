// The CPU backend (kernels/cpu over host memory) and the CPU thread count its kernels use. Only
// the commands (src/cli) name it; the engine takes a Backend&.
#pragma once

#include <memory>

#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_memory.h"

namespace strata {

struct CpuBackendOptions {
  // How its streams run their work (cpu_memory.h): inline by default; tests run them on worker
  // threads with random delays.
  CpuStreamOptions streams;
  // Its ActivationType (kF32, kF16 or kBF16): the runtime then keeps its activations in that
  // type, and the ops read and store them through fp32 (cpu_activations.h). Not kF32 only to
  // stand in for a GPU's half activations in tests and CPU runs.
  SpanType activations = SpanType::kF32;
};

std::unique_ptr<Backend> MakeCpuBackend(const CpuBackendOptions& options = {});

// Threads of the CPU kernels (their OpenMP loops): n > 0 sets the count, n == 0 keeps the
// default (all cores). Process-wide; call before any backend work starts.
void SetCpuThreads(int n);
int CpuThreads();

}  // namespace strata
