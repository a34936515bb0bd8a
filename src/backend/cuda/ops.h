// The kernels of kernels/cuda as ordinary functions, compiled once (in the ops_*.cu files of this
// folder) and callable from host-only C++: the CUDA backend, tests/backend and bench/. Each is a
// one-line forward to the launcher of the same name in kernels/cuda/*.cuh, which documents the
// layouts and REQUIRES; all pointers are device memory unless a comment says otherwise, and every
// call is asynchronous on `stream`. Activations (x, y, gate, up, out of the element-wise ops) are
// `void*` of an ElemType: fp32, fp16 or bf16, one type an op unless it says otherwise.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/decode_q4c_params.h"
#include "kernels/cuda/params.h"

namespace strata::cuda_ops {

using kernels::cuda::CausalAttentionShape;
using kernels::cuda::DecodeAttentionPlan;
using kernels::cuda::DecodeAttentionShape;
using kernels::cuda::DecodeCacheKind;
using kernels::cuda::PrefillAttentionPlan;
using kernels::cuda::ElemType;
using kernels::cuda::Q4CacheShape;
using kernels::cuda::SamplingParams;

// embedding.cuh
cudaError_t Embed(const void* table, ElemType type, int64_t hidden, const int32_t* ids, int n,
                  bool accumulate, ElemType out_type, void* out, cudaStream_t stream);
// norm.cuh
cudaError_t LayerNorm(ElemType type, const void* x, const float* weight, const float* bias,
                      float eps, int rows, int dim, void* y, cudaStream_t stream);
cudaError_t RmsNorm(ElemType type, const void* x, const float* weight, float eps, int rows, int dim,
                    void* y, cudaStream_t stream);
// activation.cuh
cudaError_t Relu(ElemType type, void* x, int64_t n, cudaStream_t stream);
cudaError_t Gelu(ElemType type, void* x, int64_t n, cudaStream_t stream);
cudaError_t SiluMul(ElemType type, void* gate, const void* up, int64_t n, cudaStream_t stream);
// rope.cuh
cudaError_t ApplyRope(ElemType type, void* x, const int32_t* positions, int tokens, int heads,
                      int head_dim, const float* inv_freq, cudaStream_t stream);
// add.cuh
cudaError_t Add(ElemType type, void* x, const void* y, int64_t n, cudaStream_t stream);
cudaError_t AddBias(ElemType type, void* y, const float* bias, int64_t rows, int cols,
                    cudaStream_t stream);
// convert.cuh
cudaError_t Convert(const void* x, ElemType from, int64_t n, ElemType to, void* y,
                    cudaStream_t stream);
// weight_q4.cuh
cudaError_t ExpandWeightQ4(const uint8_t* codes, const __half* params, int64_t rows, int cols,
                           int group, ElemType type, void* out, cudaStream_t stream);
// kv_q4.cuh
bool Q4HeadDimSupported(int head_dim);
cudaError_t WriteQ4Cache(const Q4CacheShape& s, const float* rows, int tokens, int first_slot,
                         bool rotate, uint8_t* codes, __half* params, cudaStream_t stream);
cudaError_t DequantizeQ4Cache(const Q4CacheShape& s, const uint8_t* codes, const __half* params,
                              float* out, cudaStream_t stream);
// attention_decode.cuh
cudaError_t PlanDecodeAttention(const DecodeAttentionShape& s, DecodeCacheKind kind,
                                DecodeAttentionPlan* plan);
cudaError_t DecodeAttentionQ4(const DecodeAttentionShape& s, const float* q,
                              const uint8_t* k_codes, const __half* k_params,
                              const uint8_t* v_codes, const __half* v_params, const int* start,
                              const DecodeAttentionPlan& plan, void* workspace, float* out,
                              cudaStream_t stream);
cudaError_t DecodeAttentionF16(const DecodeAttentionShape& s, const float* q, const __half* k,
                               const __half* v, const int* start, const DecodeAttentionPlan& plan,
                               void* workspace, float* out, cudaStream_t stream);
// attention_prefill.cuh
cudaError_t CausalAttention(const CausalAttentionShape& s, const float* q, const float* k,
                            const float* v, const int* start, float* out, cudaStream_t stream);
cudaError_t CausalAttention(const CausalAttentionShape& s, const float* q, const __half* k,
                            const __half* v, const int* start, float* out, cudaStream_t stream);
cudaError_t CausalAttention(const CausalAttentionShape& s, const __half* q, const __half* k,
                            const __half* v, const int* start, __half* out, cudaStream_t stream);
cudaError_t CausalAttention(const CausalAttentionShape& s, const __nv_bfloat16* q,
                            const __nv_bfloat16* k, const __nv_bfloat16* v, const int* start,
                            __nv_bfloat16* out, cudaStream_t stream);
// attention_prefill_f16.cuh
cudaError_t PlanPrefillAttention(const CausalAttentionShape& s, PrefillAttentionPlan* plan);
cudaError_t PrefillAttentionF16(const CausalAttentionShape& s, const PrefillAttentionPlan& plan,
                                const __half* q, const __half* k, const __half* v,
                                const int* start, __half* out, cudaStream_t stream);
// sampling.cuh
cudaError_t SampleTokensWorkspaceBytes(int batch, int vocab, size_t* bytes);
cudaError_t SampleTokens(const float* logits, int batch, int vocab, const SamplingParams* params,
                         bool any_sampling, void* workspace, size_t workspace_bytes, int32_t* out,
                         cudaStream_t stream);
// log_probability.cuh
cudaError_t LogProbability(const float* logits, int rows, int vocab, const int32_t* tokens,
                           double* out, cudaStream_t stream);

// The default 4-bit cache (keys by channel, exact sink and window rows), through a table of rows:
// attention_decode_q4c.cuh and kv_q4_channel.cuh.
using kernels::cuda::Q4ChannelDecodePlan;
using kernels::cuda::Q4ChannelDecodeShape;
using kernels::cuda::Q4ChannelRow;
bool Q4ChannelHeadDimSupported(int head_dim);
cudaError_t PlanDecodeAttentionQ4Channel(const Q4ChannelDecodeShape& s,
                                         Q4ChannelDecodePlan* plan);
cudaError_t DecodeAttentionQ4Channel(const Q4ChannelDecodeShape& s, const float* q,
                                     const Q4ChannelRow* rows, const int* start,
                                     const Q4ChannelDecodePlan& plan, void* workspace, float* out,
                                     cudaStream_t stream);
cudaError_t WriteKeyGroupsQ4Channel(int batch, int num_kv_heads, int head_dim, int sink,
                                    int window, const int* start, int first_slot, int tokens,
                                    const float* k_rows, Q4ChannelRow* rows, cudaStream_t stream);
cudaError_t WriteExactRowsQ4Channel(int batch, int num_kv_heads, int head_dim, int sink,
                                    int window, const float* k_rows, const float* v_rows,
                                    int tokens, int first_slot, const int* start,
                                    bool rotate_keys, Q4ChannelRow* rows, cudaStream_t stream);
cudaError_t WriteValueRowsQ4Channel(int batch, int num_kv_heads, int head_dim,
                                    const float* v_rows, int tokens, int first_slot,
                                    Q4ChannelRow* rows, cudaStream_t stream);

// Key smoothing of the 4-bit cache: kv_q4_smooth.cuh.
cudaError_t FitKeySmoothing(int batch, int num_kv_heads, int head_dim, int tokens, int first_slot,
                            const int* start, const float* k_rows, float* mean, float* scale,
                            cudaStream_t stream);
cudaError_t SmoothKeys(int batch, int tokens, int num_kv_heads, int head_dim, const float* mean,
                       const float* scale, float* k_rows, cudaStream_t stream);
cudaError_t ScaleQueries(int batch, int num_heads, int num_kv_heads, int head_dim,
                         const float* scale, float* q, cudaStream_t stream);

}  // namespace strata::cuda_ops
