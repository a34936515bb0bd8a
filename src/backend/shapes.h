// Plain descriptions of the work an op does, as the backend interface takes them. Each backend
// turns them into its kernels' own argument structs, so the code above src/backend never names
// a kernel type.
#pragma once

namespace strata {

// Causal attention of `new_tokens` query tokens per sequence over a contiguous cache:
//   q, out: [batch, new_tokens, num_heads, head_dim]
//   k, v:   [batch, num_kv_heads, max_len, head_dim]
// The new tokens sit at cache slots [cache_len - new_tokens, cache_len) (their keys and values
// already written). Sequence b attends slots [start[b], its own slot]; a query with no slot to
// attend gets a zero output. Query head h reads KV head h / (num_heads / num_kv_heads).
struct AttentionShape {
  int batch = 0;
  int new_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_len = 0;
  int cache_len = 0;
  float scale = 1.0f;  // applied to q·k, usually 1/sqrt(head_dim)
};

// Rotary position embedding: the base frequency and the scaling a model's config asks for
// (transformers' rope_scaling types). Fields a kind does not use are ignored.
struct RopeSpec {
  enum class Scaling { kNone, kLinear, kLlama3, kFactors, kYarn };
  int head_dim = 0;
  float theta = 10000.0f;
  Scaling scaling = Scaling::kNone;
  float factor = 1.0f;                  // kLinear, kLlama3, kYarn
  float low_freq_factor = 1.0f;         // kLlama3
  float high_freq_factor = 4.0f;        // kLlama3
  int original_max_positions = 8192;    // kLlama3, kYarn
  const float* freq_factors = nullptr;  // kFactors: head_dim / 2 divisors of the frequencies
  float beta_fast = 32.0f;              // kYarn
  float beta_slow = 1.0f;               // kYarn
  bool truncate = true;                 // kYarn
};

// Fills inv_freq[spec.head_dim / 2] with the (scaled) inverse frequencies, in fp32 the way
// transformers computes them; every backend's Rope takes this table.
void RopeInverseFrequencies(const RopeSpec& spec, float* inv_freq);

}  // namespace strata
