// CUDA failures a user can meet — no device, a driver older than the runtime, a device without
// room for the plan — as Status values that say what is wrong and what to do. Plain C++ over the
// numbers the CUDA runtime reports (no CUDA header), so that CI tests the mapping without a GPU.
// Every non-ok Status ends a command with exit 2 (src/cli/exit_codes.h, kExitUnusable); CUDA
// errors that only a bug or a lost device can cause still abort (cuda_check.h).
#pragma once

#include <cstdint>
#include <string>

#include "src/core/status.h"

namespace strata {

// cudaError_t values the mapping tells apart (driver_types.h; cuda_memory.cc checks each against
// the runtime's enum when it compiles).
namespace cuda_error {
inline constexpr int kSuccess = 0;
inline constexpr int kMemoryAllocation = 2;
inline constexpr int kInitializationError = 3;
inline constexpr int kStubLibrary = 34;
inline constexpr int kInsufficientDriver = 35;
inline constexpr int kCallRequiresNewerDriver = 36;
inline constexpr int kDevicesUnavailable = 46;
inline constexpr int kNoDevice = 100;
inline constexpr int kSystemDriverMismatch = 803;
inline constexpr int kCompatNotSupportedOnDevice = 804;
}  // namespace cuda_error

// What strata was doing when CUDA failed.
enum class CudaOperation {
  kFindDevice,          // counting devices, making the backend
  kAllocateDeviceTier,  // the device tier's arena (Backend::AllocateDeviceArena)
  kAllocateScratch,     // the backend's scratch (Backend::ReserveScratch)
  kPinHostMemory,       // pinning the host tier (Backend::PinHostMemory)
};

struct CudaFailure {
  CudaOperation operation = CudaOperation::kFindDevice;
  int error = cuda_error::kSuccess;  // the cudaError_t
  std::string error_name;            // cudaGetErrorName's, e.g. "cudaErrorNoDevice"
  uint64_t bytes = 0;                // allocations and pinning: the bytes asked for
  uint64_t free_bytes = 0;           // device allocations: cudaMemGetInfo's free and total
  uint64_t total_bytes = 0;          // bytes (0: unknown)
  int driver_version = 0;   // cudaDriverGetVersion: 1000 * major + 10 * minor; 0 without a driver
  int runtime_version = 0;  // cudaRuntimeGetVersion: the runtime strata was built with
};

// The Status of a failure (never ok: a kSuccess error is reported as an unexpected one):
//   no device or no driver (kNoDevice, kStubLibrary, kDevicesUnavailable; with a driver version
//   of 0, kInitializationError and the driver errors below, as the runtime reports a missing
//   driver) -> Unsupported, "no CUDA device is visible ... use --device cpu";
//   a driver older than the runtime (kInsufficientDriver, kCallRequiresNewerDriver,
//   kCompatNotSupportedOnDevice, kSystemDriverMismatch) -> Unsupported, naming both versions;
//   kMemoryAllocation at an allocation -> ResourceExhausted naming the bytes asked for, the free
//   bytes, and what to lower; any error when pinning -> ResourceExhausted (the locked-memory
//   limit);
//   anything else -> IoError naming the CUDA error (strata's Status has no internal-error code).
Status CudaFailureStatus(const CudaFailure& failure);

// "13.0" for 13000.
std::string CudaVersionText(int version);

}  // namespace strata
