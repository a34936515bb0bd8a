// The CUDA backend: the Backend interface (src/backend/backend.h) on one GPU, kernels/cuda for the
// element-wise ops and attention, cuBLAS for the GEMMs. Names no CUDA type, so any part of strata
// may include it; only builds with STRATA_HAVE_CUDA link strata_backend_cuda.
//
// Memory contract of the Backend it returns:
//   - every op is queued on the CUDA stream of the Stream it is given (one this backend made)
//     and returns without waiting; its activations and weights are spans of arenas this backend
//     allocated, used in place (F16/BF16 weights are converted as the op reads them). Activations
//     are fp16 by default (ActivationType); the kernels that read only fp32 (the 4-bit cache ops,
//     fp16 decode attention's queries) get fp32 copies in scratch, rounded back once written;
//   - host index arrays (ids, positions, Attention's start) are range-checked on the host and,
//     with Rope's inv_freq, copied to the device on the op's stream. REQUIRES: they are pageable
//     memory (a pageable copy returns once its source is staged, so they may go when the op
//     returns; memory pinned through PinHostMemory would be read later);
//   - SampleTokens and ScoreTokens copy their results to the caller's `out` on the op's stream:
//     into pinned memory the copy is queued, into pageable memory the op returns only once the
//     stream has reached it and it is done;
//   - the ops share the backend's scratch buffers and cuBLAS workspace. REQUIRES: ops given to
//     different streams never run at the same time (the caller orders them with events);
//   - scratch (cuda_scratch.h): ReserveScratch(limits) makes one cudaMalloc of
//     ScratchBytes(limits) — every op buffer and cuBLAS's workspace — before the token loop, after
//     which no op allocates device memory and an op that needs more than `limits` allow aborts
//     naming the buffer. Until it is called (unit tests that call ops directly) each buffer grows
//     on demand by cudaMalloc, outside any plan; a later call replaces the reservation, freeing
//     the old one first (which waits for the ops still reading it). cuBLAS's handle keeps some
//     device memory of its own from creation (cublasCreate), outside ScratchBytes.
// The calling thread's current device must be `options.device` (MakeCudaBackend makes it so).
// Thread-compatible.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "src/backend/backend.h"

namespace strata {

struct CudaBackendOptions {
  int device = 0;  // CUDA device ordinal
  // ActivationType: empty (default) keeps activations in fp16 (bf16 for BF16 weights), as GPU
  // inference does; kF32 keeps them in fp32, as the CPU backend does (for precise comparisons);
  // kF16 or kBF16 keeps them in that type whatever the weights.
  std::optional<SpanType> activations;
  // Linear of fp32 activations over F16/BF16 weights: false (default) rounds the activations to
  // the weight's type and runs a tensor-core GEMM with fp32 accumulation; true widens the weight
  // to fp32 on every call and runs an fp32 GEMM, matching the CPU backend up to fp32 rounding.
  // With fp16/bf16 activations the GEMM's inputs are of their type either way.
  bool fp32_gemm = false;
};

// A CUDA backend on options.device, or nullptr when there is no usable device: the reason goes to
// *why_not when given, as CudaFailureStatus (cuda_status.h) words it for no device or no driver,
// a driver older than the runtime, or any other CUDA error; or that the ordinal does not exist.
std::unique_ptr<Backend> MakeCudaBackend(const CudaBackendOptions& options = {},
                                         std::string* why_not = nullptr);

}  // namespace strata
