// Key smoothing of the 4-bit cache: the fit, the smoothed keys and the scaled queries.
#include "kernels/cuda/kv_q4_smooth.cuh"
#include "src/backend/cuda/ops.h"

namespace strata::cuda_ops {

cudaError_t FitKeySmoothing(int batch, int num_kv_heads, int head_dim, int tokens, int first_slot,
                            const int* start, const float* k_rows, float* mean, float* scale,
                            cudaStream_t stream) {
  return kernels::cuda::FitKeySmoothing(batch, num_kv_heads, head_dim, tokens, first_slot, start,
                                        k_rows, mean, scale, stream);
}

cudaError_t SmoothKeys(int batch, int tokens, int num_kv_heads, int head_dim, const float* mean,
                       const float* scale, float* k_rows, cudaStream_t stream) {
  return kernels::cuda::SmoothKeys(batch, tokens, num_kv_heads, head_dim, mean, scale, k_rows,
                                   stream);
}

cudaError_t ScaleQueries(int batch, int num_heads, int num_kv_heads, int head_dim,
                         const float* scale, float* q, cudaStream_t stream) {
  return kernels::cuda::ScaleQueries(batch, num_heads, num_kv_heads, head_dim, scale, q, stream);
}

}  // namespace strata::cuda_ops
