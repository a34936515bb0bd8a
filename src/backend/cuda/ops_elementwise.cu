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
                  bool accumulate, float* out, cudaStream_t stream) {
  return k::Embed(table, type, hidden, ids, n, accumulate, out, stream);
}

cudaError_t LayerNorm(const float* x, const float* weight, const float* bias, float eps, int rows,
                      int dim, float* y, cudaStream_t stream) {
  return k::LayerNorm(x, weight, bias, eps, rows, dim, y, stream);
}

cudaError_t RmsNorm(const float* x, const float* weight, float eps, int rows, int dim, float* y,
                    cudaStream_t stream) {
  return k::RmsNorm(x, weight, eps, rows, dim, y, stream);
}

cudaError_t Relu(float* x, int64_t n, cudaStream_t stream) { return k::Relu(x, n, stream); }

cudaError_t Gelu(float* x, int64_t n, cudaStream_t stream) { return k::Gelu(x, n, stream); }

cudaError_t SiluMul(float* gate, const float* up, int64_t n, cudaStream_t stream) {
  return k::SiluMul(gate, up, n, stream);
}

cudaError_t ApplyRope(float* x, const int32_t* positions, int tokens, int heads, int head_dim,
                      const float* inv_freq, cudaStream_t stream) {
  return k::ApplyRope(x, positions, tokens, heads, head_dim, inv_freq, stream);
}

cudaError_t Add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  return k::Add(x, y, n, stream);
}

cudaError_t AddBias(float* y, const float* bias, int64_t rows, int cols, cudaStream_t stream) {
  return k::AddBias(y, bias, rows, cols, stream);
}

cudaError_t FloatToHalf(const float* x, int64_t n, ElemType to, uint16_t* y, cudaStream_t stream) {
  return k::FloatToHalf(x, n, to, y, stream);
}

cudaError_t ToFloat(const void* x, ElemType from, int64_t n, float* y, cudaStream_t stream) {
  return k::ToFloat(x, from, n, y, stream);
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
