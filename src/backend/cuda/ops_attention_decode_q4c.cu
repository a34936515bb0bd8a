// The default 4-bit cache on the device: its writers and decode attention (keys by channel, exact
// sink and window rows), all through a table of rows.
#include "kernels/cuda/attention_decode_q4c.cuh"
#include "kernels/cuda/kv_q4_channel.cuh"
#include "src/backend/cuda/ops.h"

namespace strata::cuda_ops {

bool Q4ChannelHeadDimSupported(int head_dim) {
  return kernels::cuda::Q4ChannelHeadDimSupported(head_dim);
}

cudaError_t PlanDecodeAttentionQ4Channel(const Q4ChannelDecodeShape& s, Q4ChannelDecodePlan* plan) {
  return kernels::cuda::PlanDecodeAttentionQ4Channel(s, plan);
}

cudaError_t DecodeAttentionQ4Channel(const Q4ChannelDecodeShape& s, const float* q,
                                     const Q4ChannelRow* rows, const int* start,
                                     const Q4ChannelDecodePlan& plan, void* workspace, float* out,
                                     cudaStream_t stream) {
  return kernels::cuda::DecodeAttentionQ4Channel(s, q, rows, start, plan, workspace, out, stream);
}

cudaError_t WriteKeyGroupsQ4Channel(int batch, int num_kv_heads, int head_dim, int sink, int window,
                                    const int* start, int first_slot, int tokens,
                                    const float* k_rows, Q4ChannelRow* rows, cudaStream_t stream) {
  return kernels::cuda::WriteKeyGroupsQ4Channel(batch, num_kv_heads, head_dim, sink, window, start,
                                                first_slot, tokens, k_rows, rows, stream);
}

cudaError_t WriteExactRowsQ4Channel(int batch, int num_kv_heads, int head_dim, int sink, int window,
                                    const float* k_rows, const float* v_rows, int tokens,
                                    int first_slot, const int* start, bool rotate_keys,
                                    Q4ChannelRow* rows, cudaStream_t stream) {
  return kernels::cuda::WriteExactRowsQ4Channel(batch, num_kv_heads, head_dim, sink, window, k_rows,
                                                v_rows, tokens, first_slot, start, rotate_keys,
                                                rows, stream);
}

cudaError_t WriteValueRowsQ4Channel(int batch, int num_kv_heads, int head_dim, const float* v_rows,
                                    int tokens, int first_slot, Q4ChannelRow* rows,
                                    cudaStream_t stream) {
  return kernels::cuda::WriteValueRowsQ4Channel(batch, num_kv_heads, head_dim, v_rows, tokens,
                                                first_slot, rows, stream);
}

}  // namespace strata::cuda_ops
