// The log-probability of one given token per row of logits: the row's log-softmax at the token,
// its exponentials summed in fp64 from the row's largest logit. CUDA twin of LogProbability in
// kernels/cpu/sampling.h, one thread block per row; only the order of the fp64 sum differs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

namespace log_probability {

inline constexpr int kThreads = 256;

// ---- kernels ----

__global__ void __launch_bounds__(kThreads)
    LogProbabilityKernel(const float* logits, int vocab, const int32_t* tokens, double* out) {
  __shared__ float s_max[kThreads / 32];
  __shared__ double s_sum[kThreads / 32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;

  float part_max = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += kThreads) part_max = fmaxf(part_max, row[i]);
  part_max = WarpMax(part_max);
  if (lane == 0) s_max[warp] = part_max;
  __syncthreads();
  float max = s_max[0];
  for (int w = 1; w < kThreads / 32; ++w) max = fmaxf(max, s_max[w]);

  // The difference in fp32 before widening, as the CPU twin computes it.
  double sum = 0.0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) sum += exp(static_cast<double>(row[i] - max));
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullMask, sum, offset);
  if (lane == 0) s_sum[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) total += s_sum[w];
    out[blockIdx.x] =
        static_cast<double>(row[tokens[blockIdx.x]]) - (static_cast<double>(max) + log(total));
  }
}

}  // namespace log_probability

// ---- launchers ----

// out[r] = log p(tokens[r]) under logits[r, :] for each of `rows` rows of `vocab` logits (tokens
// one per row). REQUIRES: 0 <= tokens[r] < vocab (unchecked on the device).
inline cudaError_t LogProbability(const float* logits, int rows, int vocab, const int32_t* tokens,
                                  double* out, cudaStream_t stream) {
  if (rows < 0 || vocab <= 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  log_probability::LogProbabilityKernel<<<rows, log_probability::kThreads, 0, stream>>>(
      logits, vocab, tokens, out);
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
