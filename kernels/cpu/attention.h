// Causal attention over an fp32 KV cache, for prefill (many new tokens) and decode (one).
#pragma once

namespace strata::kernels::cpu {

// Shapes of one attention call over a block of `batch` sequences.
//   q:     [batch, new_tokens, num_heads, head_dim]
//   k, v:  [batch, num_kv_heads, max_len, head_dim] — the cache, already holding the new tokens
//   out:   [batch, new_tokens, num_heads, head_dim]
// The new tokens occupy cache slots [cache_len - new_tokens, cache_len). Sequence b's keys start
// at slot start[b] (left padding before it is never attended). Query head h reads KV head
// h / (num_heads / num_kv_heads). A query whose slot lies before start[b] (a padding token)
// gets a zero output.
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

void CausalAttention(const AttentionShape& s, const float* q, const float* k, const float* v,
                     const int* start, float* out);

}  // namespace strata::kernels::cpu
