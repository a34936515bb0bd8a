#include "src/runtime/kv_cache.h"

#include <cstring>

#include "src/core/check.h"

namespace strata {

KvCache::KvCache(int num_layers, int batch, int num_kv_heads, int max_len, int head_dim)
    : batch_(batch), num_kv_heads_(num_kv_heads), max_len_(max_len), head_dim_(head_dim) {
  const size_t n = static_cast<size_t>(batch) * num_kv_heads * max_len * head_dim;
  k_.assign(static_cast<size_t>(num_layers), std::vector<float>(n));
  v_.assign(static_cast<size_t>(num_layers), std::vector<float>(n));
}

uint64_t KvCache::bytes() const {
  return k_.empty() ? 0 : 2ull * k_.size() * k_[0].size() * sizeof(float);
}

void KvCache::Write(int layer, const float* k_rows, const float* v_rows, int tokens,
                    int first_slot) {
  STRATA_CHECK(first_slot >= 0 && first_slot + tokens <= max_len_);
  float* kc = keys(layer);
  float* vc = values(layer);
  const size_t d = static_cast<size_t>(head_dim_);
  for (int b = 0; b < batch_; ++b) {
    for (int t = 0; t < tokens; ++t) {
      const size_t src = (static_cast<size_t>(b) * tokens + t) * num_kv_heads_ * d;
      for (int h = 0; h < num_kv_heads_; ++h) {
        const size_t dst =
            ((static_cast<size_t>(b) * num_kv_heads_ + h) * max_len_ + first_slot + t) * d;
        std::memcpy(kc + dst, k_rows + src + h * d, d * sizeof(float));
        std::memcpy(vc + dst, v_rows + src + h * d, d * sizeof(float));
      }
    }
  }
}

}  // namespace strata
