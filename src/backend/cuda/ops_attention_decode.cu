// Decode attention over the 4-bit and fp16 caches (flash-decoding on tensor cores).
#include "kernels/cuda/attention_decode.cuh"
#include "src/backend/cuda/ops.h"

namespace strata::cuda_ops {

cudaError_t PlanDecodeAttention(const DecodeAttentionShape& s, DecodeCacheKind kind,
                                DecodeAttentionPlan* plan) {
  return kernels::cuda::PlanDecodeAttention(s, kind, plan);
}

cudaError_t DecodeAttentionQ4(const DecodeAttentionShape& s, const float* q,
                              const uint8_t* k_codes, const __half* k_params,
                              const uint8_t* v_codes, const __half* v_params, const int* start,
                              const DecodeAttentionPlan& plan, void* workspace, float* out,
                              cudaStream_t stream) {
  return kernels::cuda::DecodeAttentionQ4(s, q, k_codes, k_params, v_codes, v_params, start, plan,
                                          workspace, out, stream);
}

cudaError_t DecodeAttentionF16(const DecodeAttentionShape& s, const float* q, const __half* k,
                               const __half* v, const int* start, const DecodeAttentionPlan& plan,
                               void* workspace, float* out, cudaStream_t stream) {
  return kernels::cuda::DecodeAttentionF16(s, q, k, v, start, plan, workspace, out, stream);
}

}  // namespace strata::cuda_ops
