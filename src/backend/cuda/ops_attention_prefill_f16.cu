// Causal prefill attention on the tensor cores, fp16 activations and cache.
#include "kernels/cuda/attention_prefill_f16.cuh"
#include "src/backend/cuda/ops.h"

namespace strata::cuda_ops {

cudaError_t PlanPrefillAttention(const CausalAttentionShape& s, PrefillAttentionPlan* plan) {
  return kernels::cuda::PlanPrefillAttention(s, plan);
}

cudaError_t PrefillAttentionF16(const CausalAttentionShape& s, const PrefillAttentionPlan& plan,
                                const __half* q, const __half* k, const __half* v, const int* start,
                                __half* out, cudaStream_t stream) {
  return kernels::cuda::PrefillAttentionF16(s, plan, q, k, v, start, out, stream);
}

}  // namespace strata::cuda_ops
