#include "src/runtime/kv_cache.h"

#include <cstring>
#include <string>

#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/kv_q4.h"
#include "kernels/kv_q4_format.h"
#include "src/core/check.h"

namespace strata {

namespace k = kernels::cpu;

KvCache::KvCache(int num_layers, int batch, int num_kv_heads, int max_len, int head_dim,
                 KvCacheOptions options)
    : batch_(batch),
      num_kv_heads_(num_kv_heads),
      max_len_(max_len),
      head_dim_(head_dim),
      options_(options) {
  STRATA_CHECK(Supports(options, head_dim).ok());
  const size_t rows = static_cast<size_t>(batch) * num_kv_heads * max_len;
  if (!options.compress) {
    k_.assign(static_cast<size_t>(num_layers), std::vector<float>(rows * head_dim));
    v_.assign(static_cast<size_t>(num_layers), std::vector<float>(rows * head_dim));
    return;
  }
  const Q4Planes planes{std::vector<uint8_t>(rows * kernels::Q4CodeBytes(head_dim)),
                        std::vector<uint16_t>(rows * kernels::Q4ParamHalves(head_dim))};
  qk_.assign(static_cast<size_t>(num_layers), planes);
  qv_.assign(static_cast<size_t>(num_layers), planes);
}

Status KvCache::Supports(const KvCacheOptions& options, int head_dim) {
  if (options.rotate_keys && !options.compress) {
    return Status::InvalidArgument("rotated keys need the compressed (4-bit) cache");
  }
  if (options.compress && (head_dim % 2 != 0 || (head_dim > 64 && head_dim % 64 != 0))) {
    return Status::Unsupported(
        "the 4-bit KV cache needs an even head_dim, and a multiple of 64 "
        "above 64; this model has " +
        std::to_string(head_dim));
  }
  if (options.rotate_keys && !k::HadamardSupports(head_dim)) {
    return Status::Unsupported("rotated keys need a power-of-two head_dim; this model has " +
                               std::to_string(head_dim));
  }
  return Status::Ok();
}

uint64_t KvCache::bytes() const {
  if (!options_.compress) return k_.empty() ? 0 : 2ull * k_.size() * k_[0].size() * sizeof(float);
  if (qk_.empty()) return 0;
  return 2ull * qk_.size() * (qk_[0].codes.size() + qk_[0].params.size() * sizeof(uint16_t));
}

float* KvCache::keys(int layer) {
  STRATA_CHECK(!options_.compress);
  return k_[static_cast<size_t>(layer)].data();
}

float* KvCache::values(int layer) {
  STRATA_CHECK(!options_.compress);
  return v_[static_cast<size_t>(layer)].data();
}

k::Q4CacheView KvCache::q4_keys(int layer) const {
  STRATA_CHECK(options_.compress);
  const Q4Planes& p = qk_[static_cast<size_t>(layer)];
  return {p.codes.data(), p.params.data()};
}

k::Q4CacheView KvCache::q4_values(int layer) const {
  STRATA_CHECK(options_.compress);
  const Q4Planes& p = qv_[static_cast<size_t>(layer)];
  return {p.codes.data(), p.params.data()};
}

void KvCache::Write(int layer, const float* k_rows, const float* v_rows, int tokens,
                    int first_slot) {
  STRATA_CHECK(first_slot >= 0 && first_slot + tokens <= max_len_);
  if (options_.compress) {
    const k::Q4CacheShape s{batch_, num_kv_heads_, max_len_, head_dim_};
    Q4Planes& kp = qk_[static_cast<size_t>(layer)];
    Q4Planes& vp = qv_[static_cast<size_t>(layer)];
    k::WriteQ4Cache(s, k_rows, tokens, first_slot, options_.rotate_keys, kp.codes.data(),
                    kp.params.data());
    k::WriteQ4Cache(s, v_rows, tokens, first_slot, false, vp.codes.data(), vp.params.data());
    return;
  }
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

void KvCache::ExpandSlots(int layer, int slots, int dst_len, float* k_out, float* v_out) const {
  STRATA_CHECK(options_.compress && slots <= dst_len && slots <= max_len_);
  const Q4Planes& kp = qk_[static_cast<size_t>(layer)];
  const Q4Planes& vp = qv_[static_cast<size_t>(layer)];
  const int d = head_dim_;
  for (long head = 0; head < static_cast<long>(batch_) * num_kv_heads_; ++head) {
    for (int t = 0; t < slots; ++t) {
      const long src = head * max_len_ + t;
      const long dst = (head * dst_len + t) * d;
      k::DequantizeQ4Row(kp.codes.data() + src * kernels::Q4CodeBytes(d),
                         kp.params.data() + src * kernels::Q4ParamHalves(d), d, k_out + dst);
      k::DequantizeQ4Row(vp.codes.data() + src * kernels::Q4CodeBytes(d),
                         vp.params.data() + src * kernels::Q4ParamHalves(d), d, v_out + dst);
      if (options_.rotate_keys) k::HadamardRotate(k_out + dst, 1, d);  // H is its own inverse
    }
  }
}

}  // namespace strata
