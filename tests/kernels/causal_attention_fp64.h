// fp64 causal attention, the reference the tensor-core prefill attention's tests hold their
// kernels to (kernels/attention_prefill_tiles.h on the CPU, kernels/cuda/attention_prefill_f16.cuh
// on the GPU).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace strata::kernels::testing {

// q and the output: [batch, new_tokens, heads, head_dim]; k and v: [batch, kv_heads, stride,
// head_dim]. The new tokens sit at slots [cache_len - new_tokens, cache_len); sequence b attends
// slots [start[b], the token's own]; a token before start[b] gets zeros. Query head h reads KV
// head h / (heads / kv_heads).
struct CausalAttentionCase {
  int batch, new_tokens, heads, kv_heads, head_dim, cache_len, stride;
  const int* start;
};

inline std::vector<double> CausalAttentionFp64(const CausalAttentionCase& c,
                                               const std::vector<float>& q,
                                               const std::vector<float>& k,
                                               const std::vector<float>& v, double scale) {
  const int d = c.head_dim, group = c.heads / c.kv_heads;
  std::vector<double> out(q.size(), 0.0), w(c.cache_len);
  for (int b = 0; b < c.batch; ++b) {
    for (int t = 0; t < c.new_tokens; ++t) {
      const int slot = c.cache_len - c.new_tokens + t;
      if (slot < c.start[b]) continue;
      for (int h = 0; h < c.heads; ++h) {
        const size_t row = (static_cast<size_t>(b) * c.new_tokens + t) * c.heads + h;
        const size_t base = (static_cast<size_t>(b) * c.kv_heads + h / group) * c.stride;
        double mx = -INFINITY, sum = 0.0;
        for (int j = c.start[b]; j <= slot; ++j) {
          double dot = 0.0;
          for (int i = 0; i < d; ++i) dot += double(q[row * d + i]) * k[(base + j) * d + i];
          mx = std::max(mx, w[j] = dot * scale);
        }
        for (int j = c.start[b]; j <= slot; ++j) sum += (w[j] = std::exp(w[j] - mx));
        for (int j = c.start[b]; j <= slot; ++j) {
          for (int i = 0; i < d; ++i) out[row * d + i] += w[j] / sum * v[(base + j) * d + i];
        }
      }
    }
  }
  return out;
}

}  // namespace strata::kernels::testing
