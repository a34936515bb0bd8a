#include "src/backend/cuda/cuda_status.h"

#include <cstdio>

namespace strata {
namespace {

std::string Bytes(uint64_t bytes) {
  char text[32];
  const double gib = static_cast<double>(bytes) / (uint64_t{1} << 30);
  if (gib >= 1.0) {
    std::snprintf(text, sizeof(text), "%.2f GiB", gib);
  } else {
    std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (uint64_t{1} << 20));
  }
  return text;
}

bool DriverTooOld(const CudaFailure& f) {
  return f.error == cuda_error::kInsufficientDriver ||
         f.error == cuda_error::kCallRequiresNewerDriver ||
         f.error == cuda_error::kCompatNotSupportedOnDevice ||
         f.error == cuda_error::kSystemDriverMismatch;
}

// No GPU, or no driver at all: the runtime reports a missing driver as an insufficient one, with
// a driver version of 0.
bool NoDevice(const CudaFailure& f) {
  return f.error == cuda_error::kNoDevice || f.error == cuda_error::kStubLibrary ||
         f.error == cuda_error::kDevicesUnavailable ||
         (f.driver_version == 0 &&
          (f.error == cuda_error::kInitializationError || DriverTooOld(f)));
}

std::string Doing(const CudaFailure& f) {
  switch (f.operation) {
    case CudaOperation::kFindDevice: return "looking for a CUDA device";
    case CudaOperation::kAllocateDeviceTier: return "allocating the GPU tier's " + Bytes(f.bytes);
    case CudaOperation::kAllocateScratch:
      return "allocating the CUDA backend's scratch of " + Bytes(f.bytes);
    case CudaOperation::kPinHostMemory: return "pinning " + Bytes(f.bytes) + " of host memory";
  }
  return "?";
}

std::string Name(const CudaFailure& f) {
  return f.error_name.empty() ? "CUDA error " + std::to_string(f.error) : f.error_name;
}

// How much is free, when known: "; 3.20 GiB of 79.10 GiB free".
std::string FreeText(const CudaFailure& f) {
  return f.total_bytes > 0 ? "; " + Bytes(f.free_bytes) + " of " + Bytes(f.total_bytes) + " free"
                           : "";
}

}  // namespace

std::string CudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

Status CudaFailureStatus(const CudaFailure& f) {
  if (NoDevice(f)) {
    const std::string why =
        f.driver_version == 0 ? "no NVIDIA driver is loaded" : "the driver sees no usable GPU";
    return Status::Unsupported("no CUDA device is visible (" + Name(f) + " while " + Doing(f) +
                               ": " + why + "); use --device cpu, or check nvidia-smi and "
                               "CUDA_VISIBLE_DEVICES");
  }
  if (f.error == cuda_error::kSystemDriverMismatch) {
    return Status::Unsupported("the NVIDIA kernel driver and its user-space library (libcuda) "
                               "differ in version (" + Name(f) + "); reinstall the driver or "
                               "reboot, or use --device cpu");
  }
  if (DriverTooOld(f)) {
    return Status::Unsupported(
        "the NVIDIA driver is older than the CUDA runtime strata was built with (" +
        CudaVersionText(f.driver_version) + " < " + CudaVersionText(f.runtime_version) + ", " +
        Name(f) + "); update the driver or use --device cpu");
  }
  if (f.operation == CudaOperation::kPinHostMemory) {
    return Status::ResourceExhausted(
        "cannot pin " + Bytes(f.bytes) + " of host memory for the GPU's copies (" + Name(f) +
        "); raise the locked-memory limit (ulimit -l) or lower the CPU percents of the plan");
  }
  if (f.error == cuda_error::kMemoryAllocation &&
      (f.operation == CudaOperation::kAllocateDeviceTier ||
       f.operation == CudaOperation::kAllocateScratch)) {
    const std::string what = f.operation == CudaOperation::kAllocateDeviceTier
                                 ? "the GPU tier's " + Bytes(f.bytes)
                                 : "the CUDA backend's scratch of " + Bytes(f.bytes) +
                                       " (its ops' buffers and cuBLAS's workspace)";
    return Status::ResourceExhausted(
        "cannot allocate " + what + " on the GPU (" + Name(f) + FreeText(f) +
        "): give the GPU tier less (--gpu-memory) or lower the batch "
        "(--gpu-batch-size), or free the GPU");
  }
  return Status::IoError("CUDA failed while " + Doing(f) + " (" + Name(f) + FreeText(f) +
                         "); check the GPU with nvidia-smi, or use --device cpu");
}

}  // namespace strata
