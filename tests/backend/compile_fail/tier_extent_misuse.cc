// Compiled three ways by tests/backend/CMakeLists.txt: as it is, which must build (the control),
// and with STRATA_CPU_EXTENT_AS_DEVICE or STRATA_GPU_EXTENT_AS_HOST, which must not: an
// extent's tier is part of its type, so MemoryTiers gives device memory for GPU extents only and
// host addresses for CPU extents only.
#include <cstdint>

#include "src/memory/memory_tiers.h"

namespace strata {

uint64_t Misuse(const MemoryTiers& tiers, const GpuExtent& gpu, const CpuExtent& cpu) {
#if defined(STRATA_CPU_EXTENT_AS_DEVICE)
  return tiers.Device(cpu).bytes();
#elif defined(STRATA_GPU_EXTENT_AS_HOST)
  return tiers.At(gpu) != nullptr ? gpu.bytes : 0;
#else
  return tiers.Device(gpu).bytes() + (tiers.At(cpu) != nullptr ? cpu.bytes : 0);
#endif
}

}  // namespace strata
