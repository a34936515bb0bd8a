// MakeGpuBackend in builds without the CUDA backend.
#include "src/cli/device_flags.h"

namespace strata {

std::unique_ptr<Backend> MakeGpuBackend(std::optional<SpanType>, std::string* why_not, int64_t*,
                                        std::string*) {
  *why_not =
      "this strata was built without the CUDA backend (configured with STRATA_CUDA=OFF, or "
      "where nvcc was not found); rebuild with -DSTRATA_CUDA=ON";
  return nullptr;
}

int64_t GpuFreeBytes() { return 0; }

}  // namespace strata
