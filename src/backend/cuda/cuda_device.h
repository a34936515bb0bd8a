// What the CUDA runtime can see. The only header of the CUDA backend that the rest of strata may
// include: it names no CUDA type, so it compiles in builds without a GPU too.
#pragma once

#include <string>

namespace strata {

struct CudaDeviceInfo {
  int device_count = 0;          // 0 when no driver or no GPU
  std::string name;              // of device 0
  int compute_capability = 0;    // major * 10 + minor
  unsigned long long total_memory_bytes = 0;
  unsigned long long free_memory_bytes = 0;  // of device 0, when queried
  std::string error;             // why device_count is 0, when it is
};

CudaDeviceInfo QueryCudaDevices();

}  // namespace strata
