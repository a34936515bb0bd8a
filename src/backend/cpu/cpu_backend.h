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
};

std::unique_ptr<Backend> MakeCpuBackend(const CpuBackendOptions& options = {});

// Threads of the CPU kernels (their OpenMP loops): n > 0 sets the count, n == 0 keeps the
// default (all cores). Process-wide; call before any backend work starts.
void SetCpuThreads(int n);
int CpuThreads();

}  // namespace strata
