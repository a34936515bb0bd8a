#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace strata::kernels::cpu {

void CausalAttention(const AttentionShape& s, const float* q, const float* k, const float* v,
                     const int* start, float* out) {
  const int group = s.num_heads / s.num_kv_heads;
  const int d = s.head_dim;
  const long work = static_cast<long>(s.batch) * s.num_heads * s.new_tokens;
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<size_t>(s.cache_len));
#pragma omp for schedule(dynamic, 4)
    for (long w = 0; w < work; ++w) {
      const int t = static_cast<int>(w % s.new_tokens);
      const int h = static_cast<int>((w / s.new_tokens) % s.num_heads);
      const int b = static_cast<int>(w / (static_cast<long>(s.new_tokens) * s.num_heads));
      const int kvh = h / group;
      const int slot = s.cache_len - s.new_tokens + t;
      const long row = (static_cast<long>(b) * s.new_tokens + t) * s.num_heads + h;
      const float* qv = q + row * d;
      float* o = out + row * d;
      std::memset(o, 0, sizeof(float) * d);
      const int first = start[b];
      if (slot < first) continue;
      const long base = (static_cast<long>(b) * s.num_kv_heads + kvh) * s.max_len;
      float max_score = -INFINITY;
      for (int j = first; j <= slot; ++j) {
        const float* kv = k + (base + j) * d;
        float dot = 0.0f;
        for (int i = 0; i < d; ++i) dot += qv[i] * kv[i];
        scores[j] = dot * s.scale;
        max_score = std::max(max_score, scores[j]);
      }
      float sum = 0.0f;
      for (int j = first; j <= slot; ++j) {
        scores[j] = std::exp(scores[j] - max_score);
        sum += scores[j];
      }
      const float inv = 1.0f / sum;
      for (int j = first; j <= slot; ++j) {
        const float p = scores[j] * inv;
        const float* vv = v + (base + j) * d;
        for (int i = 0; i < d; ++i) o[i] += p * vv[i];
      }
    }
  }
}

}  // namespace strata::kernels::cpu
