// Causal (prefill) attention over fp32, fp16 and bf16 caches.
#include "kernels/cuda/attention_prefill.cuh"
#include "src/backend/cuda/ops.h"

namespace strata::cuda_ops {

cudaError_t CausalAttention(const CausalAttentionShape& s, const float* q, const float* k,
                            const float* v, const int* start, float* out, cudaStream_t stream) {
  return kernels::cuda::CausalAttention(s, q, k, v, start, out, stream);
}

cudaError_t CausalAttention(const CausalAttentionShape& s, const float* q, const __half* k,
                            const __half* v, const int* start, float* out, cudaStream_t stream) {
  return kernels::cuda::CausalAttention(s, q, k, v, start, out, stream);
}

cudaError_t CausalAttention(const CausalAttentionShape& s, const __half* q, const __half* k,
                            const __half* v, const int* start, __half* out, cudaStream_t stream) {
  return kernels::cuda::CausalAttention(s, q, k, v, start, out, stream);
}

cudaError_t CausalAttention(const CausalAttentionShape& s, const __nv_bfloat16* q,
                            const __nv_bfloat16* k, const __nv_bfloat16* v, const int* start,
                            __nv_bfloat16* out, cudaStream_t stream) {
  return kernels::cuda::CausalAttention(s, q, k, v, start, out, stream);
}

}  // namespace strata::cuda_ops
