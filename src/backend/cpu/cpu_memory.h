// The CPU backend's memory and order (src/backend/memory.h): the emulated device tier is a
// capacity-limited host arena, and a stream runs its work either on the thread that gives it
// (the executor's lane threads are then the copy engines) or, in the test mode, on a worker
// thread of its own that sleeps a random while before each piece of work, so that a missing event wait
// shows up as wrong bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "src/backend/memory.h"
#include "src/core/status.h"

namespace strata {

struct CpuStreamOptions {
  // false (default): work runs on the calling thread when it is given, and a Wait blocks that
  // thread until the event completes. true: work runs in order on the stream's own worker thread.
  bool threaded = false;
  // With `threaded`, the worker sleeps a uniformly random 0..max_delay_us before each piece of
  // work. Default 0.
  int max_delay_us = 0;
  uint32_t seed = 1;  // of the delays
};

// A host arena of `bytes` (zero-filled, 64-byte aligned); ResourceExhausted naming the size when
// the memory cannot be had.
Result<std::unique_ptr<DeviceArena>> AllocateCpuDeviceArena(uint64_t bytes);
// An arena over host memory the caller owns and keeps while the arena lives.
std::unique_ptr<DeviceArena> CpuArenaOver(std::span<uint8_t> memory);
std::unique_ptr<Stream> MakeCpuStream(const CpuStreamOptions& options);
std::unique_ptr<Event> MakeCpuEvent();

// The address of a span of an arena AllocateCpuDeviceArena made: for the CPU backend's ops only.
uint8_t* CpuAddress(const DeviceSpan& span);
// CpuAddress of an fp32 span of exactly `n` elements (checked).
float* CpuFloats(const DeviceSpan& span, int64_t n);
// Gives `work` to `stream` (one MakeCpuStream made), in order after the work given so far: for the
// CPU backend's ops only.
void RunOnCpuStream(Stream& stream, std::function<void()> work);

}  // namespace strata
