#include <cuda_runtime.h>

#include "kernels/cuda/norm.cuh"
#include "src/backend/cuda/cuda_device.h"

namespace strata {

CudaDeviceInfo QueryCudaDevices() {
  CudaDeviceInfo info;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info.error = cudaGetErrorString(err);
    return info;
  }
  info.device_count = count;
  if (count == 0) return info;
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    info.name = prop.name;
    info.compute_capability = prop.major * 10 + prop.minor;
    info.total_memory_bytes = prop.totalGlobalMem;
  }
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (cudaSetDevice(0) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    info.free_memory_bytes = free_bytes;
  }
  return info;
}

}  // namespace strata
