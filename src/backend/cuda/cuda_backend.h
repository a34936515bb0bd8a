// The CUDA backend: the Backend interface (src/backend/backend.h) on one GPU, kernels/cuda for the
// element-wise ops and attention, cuBLAS for the GEMMs. Names no CUDA type, so any part of strata
// may include it; only builds with STRATA_HAVE_CUDA link strata_backend_cuda.
//
// Memory contract of the Backend it returns:
//   - fp32 activation pointers (x, y, q, k, v, out, gate, up, the KV cache) are device memory;
//   - index arrays (ids, positions, start) and Rope's inv_freq may be host or device memory: host
//     ones are copied to the device on every call (a pageable copy, which waits for the stream;
//     pass device arrays in a loop that must not stall);
//   - weights (TensorViews) may be device memory, used in place (a converted copy is cached when
//     an op needs another element type), or host memory, copied to the device on first use and
//     cached by data pointer. REQUIRES: host weight memory neither changes nor is reused for other
//     data while the backend lives (true of the model's own weights; not of a streaming buffer:
//     stream weights into device memory and pass device views instead). 4-bit (kQ4) weights are
//     expanded to fp32 on the host and cached so.
// Every op is queued on the backend's stream and returns without waiting. That stream
// synchronises with the legacy default stream, so a plain cudaMemcpy by the caller (e.g. logits to
// the host) sees the results of every op called before it. The calling thread's current device
// must be `options.device` (MakeCudaBackend makes it so). Thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "src/backend/backend.h"

namespace strata {

struct CudaBackendOptions {
  int device = 0;  // CUDA device ordinal
  // Linear over F16/BF16 weights: false (default) rounds the activations to the weight's type and
  // runs a tensor-core GEMM with fp32 accumulation, as GPU inference does; true expands each weight
  // to fp32 once (cached) and runs an fp32 GEMM, matching the CPU backend up to fp32 rounding.
  bool fp32_gemm = false;
  // Device bytes that cached weight copies may take; 0 means no cap. Over the cap the least
  // recently used copies are freed (never one the current op uses).
  uint64_t weight_cache_bytes = 0;
};

// A CUDA backend on options.device, or nullptr when there is no usable device (the reason goes to
// *why_not when given).
std::unique_ptr<Backend> MakeCudaBackend(const CudaBackendOptions& options = {},
                                         std::string* why_not = nullptr);

}  // namespace strata
