// Rotary position embedding in the rotate-half layout (Hugging Face LlamaRotaryEmbedding): element
// i of a head pairs with element i + head_dim/2.
#pragma once

#include <cstdint>

namespace strata::kernels::cpu {

enum class RopeScalingKind { kNone, kLinear, kLlama3, kFactors, kYarn };

struct RopeParams {
  int head_dim = 0;
  float theta = 10000.0f;
  RopeScalingKind scaling = RopeScalingKind::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_positions = 8192;
  const float* freq_factors = nullptr;  // kFactors: inv_freq[i] is divided by freq_factors[i]
  float beta_fast = 32.0f;              // kYarn (with factor and original_max_positions)
  float beta_slow = 1.0f;
  bool truncate = true;
};

// Fills inv_freq[head_dim / 2] with the (scaled) inverse frequencies, computed in fp32 the way
// transformers computes them.
void RopeInverseFrequencies(const RopeParams& p, float* inv_freq);

// Rotates x[tokens, heads, head_dim] in place; token t sits at position positions[t].
void ApplyRope(float* x, const int32_t* positions, int tokens, int heads, int head_dim,
               const float* inv_freq);

}  // namespace strata::kernels::cpu
