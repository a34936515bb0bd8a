// Token sampling (its own translation unit: CUB's radix sort is the slowest thing to compile).
#include "kernels/cuda/sampling.cuh"
#include "src/backend/cuda/ops.h"

namespace strata::cuda_ops {

cudaError_t SampleTokensWorkspaceBytes(int batch, int vocab, size_t* bytes) {
  return kernels::cuda::SampleTokensWorkspaceBytes(batch, vocab, bytes);
}

cudaError_t SampleTokens(const float* logits, int batch, int vocab, const SamplingParams* params,
                         bool any_sampling, void* workspace, size_t workspace_bytes, int32_t* out,
                         cudaStream_t stream) {
  return kernels::cuda::SampleTokens(logits, batch, vocab, params, any_sampling, workspace,
                                     workspace_bytes, out, stream);
}

}  // namespace strata::cuda_ops
