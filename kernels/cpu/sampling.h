// Token sampling: greedy, temperature, top-k, top-p, and the log-probability of a given token (the
// CPU backend's SampleTokens and ScoreTokens; kernels/cuda/sampling.cuh is the CUDA twin). A draw
// depends only on the request's seed and the index of the token being drawn, never on the other
// sequences of its block, so a seeded request gives the same text whatever it is batched with.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace strata::kernels::cpu {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // nucleus mass kept, (0, 1]
  int top_k = 0;             // keep the k most likely; 0 or -1 disables
  uint64_t seed = 0;
};

// A uniform double in [0, 1) from (seed, step): SplitMix64 over the pair.
double UniformDraw(uint64_t seed, uint64_t step);

// Picks the next token from logits[vocab]. `step` is the index of the token being generated.
// `scratch` is reused between calls to avoid allocation.
int32_t SampleToken(const float* logits, int vocab, const SamplingParams& params, uint64_t step,
                    std::vector<std::pair<float, int32_t>>& scratch);

// log p(token) under logits[vocab]: log-softmax at `token`, summed in fp64 from the largest
// logit. REQUIRES: 0 <= token < vocab.
double LogProbability(const float* logits, int vocab, int32_t token);

}  // namespace strata::kernels::cpu
