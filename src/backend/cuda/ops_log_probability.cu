// The log-probability of given tokens under rows of logits.
#include "kernels/cuda/log_probability.cuh"
#include "src/backend/cuda/ops.h"

namespace strata::cuda_ops {

cudaError_t LogProbability(const float* logits, int rows, int vocab, const int32_t* tokens,
                           double* out, cudaStream_t stream) {
  return kernels::cuda::LogProbability(logits, rows, vocab, tokens, out, stream);
}

}  // namespace strata::cuda_ops
