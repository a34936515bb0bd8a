// MakeGpuBackend in builds with the CUDA backend.
#include "src/backend/cuda/cuda_backend.h"
#include "src/backend/cuda/cuda_device.h"
#include "src/cli/device_flags.h"

namespace strata {

std::unique_ptr<Backend> MakeGpuBackend(std::optional<SpanType> activations, std::string* why_not,
                                        int64_t* free_bytes, std::string* name) {
  CudaBackendOptions options;
  options.activations = activations;
  std::unique_ptr<Backend> backend = MakeCudaBackend(options, why_not);
  if (backend == nullptr) return nullptr;
  const CudaDeviceInfo info = QueryCudaDevices();
  *free_bytes = static_cast<int64_t>(info.free_memory_bytes);
  *name = info.name;
  return backend;
}

int64_t GpuFreeBytes() { return static_cast<int64_t>(QueryCudaDevices().free_memory_bytes); }

}  // namespace strata
