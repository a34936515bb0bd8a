// The CUDA backend's memory and order (src/backend/memory.h): the device tier is one cudaMalloc
// arena, a stream a non-blocking CUDA stream, an event a CUDA event without timing. Host memory
// given to a stream's copies is best pinned (cudaHostRegister): pageable memory makes
// cudaMemcpyAsync wait for the copy.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>

#include "src/backend/memory.h"
#include "src/core/status.h"

namespace strata {

// One cudaMalloc of `bytes` on the current device; ResourceExhausted saying how much was asked
// for, how much is free and what to do when the device cannot give it.
Result<std::unique_ptr<DeviceArena>> AllocateCudaDeviceArena(uint64_t bytes);
std::unique_ptr<Stream> MakeCudaBackendStream();
std::unique_ptr<Event> MakeCudaEvent();
// cudaHostRegister of `memory` until the result is destroyed (cudaHostUnregister);
// ResourceExhausted naming the size and what to do when the driver refuses.
Result<std::unique_ptr<PinnedHost>> PinCudaHostMemory(std::span<uint8_t> memory);

// The device address of a span of an arena AllocateCudaDeviceArena made: for the CUDA backend's
// ops only.
void* CudaAddress(const DeviceSpan& span);
// The CUDA stream of a Stream that MakeCudaStream made.
cudaStream_t CudaStreamOf(Stream& stream);

}  // namespace strata
