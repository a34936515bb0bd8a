// The CUDA backend's memory and order (src/backend/memory.h): the device tier is one cudaMalloc
// arena, a stream a non-blocking CUDA stream, an event a CUDA event without timing. Host memory
// given to a stream's copies is best pinned (cudaHostRegister): pageable memory makes
// cudaMemcpyAsync wait for the copy.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>

#include "src/backend/cuda/cuda_resources.h"
#include "src/backend/cuda/cuda_status.h"
#include "src/backend/memory.h"
#include "src/core/status.h"

namespace strata {

// One cudaMalloc of `bytes` on the current device; ResourceExhausted saying how much was asked
// for, how much is free and what to do when the device cannot give it (CudaFailureStatus,
// cuda_status.h, for any failure).
Result<std::unique_ptr<DeviceArena>> AllocateCudaDeviceArena(uint64_t bytes);
// The CUDA backend's scratch (Backend::ReserveScratch): one cudaMalloc of `bytes` (none for 0),
// failures as AllocateCudaDeviceArena's.
Result<DeviceBuffer> AllocateCudaScratch(uint64_t bytes);
// The Status of CUDA error `error` during `operation` of `bytes` (cuda_status.h), with the
// device's free memory and the driver and runtime versions filled in.
Status CudaErrorStatus(CudaOperation operation, cudaError_t error, uint64_t bytes = 0);
std::unique_ptr<Stream> MakeCudaBackendStream();
std::unique_ptr<Event> MakeCudaEvent();
// cudaHostRegister of `memory` until the result is destroyed (cudaHostUnregister);
// ResourceExhausted naming the size and what to do when the driver refuses (CudaFailureStatus).
Result<std::unique_ptr<PinnedHost>> PinCudaHostMemory(std::span<uint8_t> memory);

// The device address of a span of an arena AllocateCudaDeviceArena made: for the CUDA backend's
// ops only.
void* CudaAddress(const DeviceSpan& span);
// The CUDA stream of a Stream that MakeCudaStream made.
cudaStream_t CudaStreamOf(Stream& stream);

}  // namespace strata
