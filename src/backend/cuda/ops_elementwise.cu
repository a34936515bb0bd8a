// The small kernels: embedding, norms, activations, RoPE, adds, conversions, 4-bit expansion and
// the 4-bit cache writer.
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/add.cuh"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/kv_q4.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/weight_q4.cuh"
#include "src/backend/cuda/ops.h"

namespace strata::cuda_ops {

namespace k = kernels::cuda;

cudaError_t Embed(const void* table, ElemType type, int64_t hidden, const int32_t* ids, int n,
                  bool accumulate, ElemType out_type, void* out, cudaStream_t stream) {
  return k::Embed(table, type, hidden, ids, n, accumulate, out_type, out, stream);
}

cudaError_t LayerNorm(ElemType type, const void* x, const float* weight, const float* bias,
                      float eps, int rows, int dim, void* y, cudaStream_t stream) {
  return k::LayerNorm(type, x, weight, bias, eps, rows, dim, y, stream);
}

cudaError_t RmsNorm(ElemType type, const void* x, const float* weight, float eps, int rows, int dim,
                    void* y, cudaStream_t stream) {
  return k::RmsNorm(type, x, weight, eps, rows, dim, y, stream);
}

cudaError_t Relu(ElemType type, void* x, int64_t n, cudaStream_t stream) {
  return k::Relu(type, x, n, stream);
}

cudaError_t Gelu(ElemType type, void* x, int64_t n, cudaStream_t stream) {
  return k::Gelu(type, x, n, stream);
}

cudaError_t SiluMul(ElemType type, void* gate, const void* up, int64_t n, cudaStream_t stream) {
  return k::SiluMul(type, gate, up, n, stream);
}

cudaError_t ApplyRope(ElemType type, void* x, const int32_t* positions, int tokens, int heads,
                      int head_dim, const float* inv_freq, cudaStream_t stream) {
  return k::ApplyRope(type, x, positions, tokens, heads, head_dim, inv_freq, stream);
}

cudaError_t Add(ElemType type, void* x, const void* y, int64_t n, cudaStream_t stream) {
  return k::Add(type, x, y, n, stream);
}

cudaError_t AddBias(ElemType type, void* y, const float* bias, int64_t rows, int cols,
                    cudaStream_t stream) {
  return k::AddBias(type, y, bias, rows, cols, stream);
}

cudaError_t Convert(const void* x, ElemType from, int64_t n, ElemType to, void* y,
                    cudaStream_t stream) {
  return k::Convert(x, from, n, to, y, stream);
}

cudaError_t ExpandWeightQ4(const uint8_t* codes, const __half* params, int64_t rows, int cols,
                           int group, ElemType type, void* out, cudaStream_t stream) {
  return k::ExpandWeightQ4(codes, params, rows, cols, group, type, out, stream);
}

bool Q4HeadDimSupported(int head_dim) { return k::Q4HeadDimSupported(head_dim); }

cudaError_t WriteQ4Cache(const Q4CacheShape& s, const float* rows, int tokens, int first_slot,
                         bool rotate, uint8_t* codes, __half* params, cudaStream_t stream) {
  return k::WriteQ4Cache(s, rows, tokens, first_slot, rotate, codes, params, stream);
}

cudaError_t DequantizeQ4Cache(const Q4CacheShape& s, const uint8_t* codes, const __half* params,
                              float* out, cudaStream_t stream) {
  return k::DequantizeQ4Cache(s, codes, params, out, stream);
}

}  // namespace strata::cuda_ops
