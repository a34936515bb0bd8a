// Frozen reference for tests (see kv_cache.h): kernels/cpu called directly, on purpose.
#include "tests/reference/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/kv_q4.h"
#include "kernels/cpu/kv_q4_channel.h"
#include "kernels/cpu/kv_q4_exact.h"
#include "kernels/cpu/kv_q4_smooth.h"
#include "kernels/kv_q4_format.h"
#include "src/core/check.h"

namespace strata::reference {

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
  Q4Planes key_planes = planes;
  if (options.channel_keys) {
    key_planes.params.resize(rows * kernels::Q4ChannelParamHalves(head_dim));
  }
  qk_.assign(static_cast<size_t>(num_layers), key_planes);
  qv_.assign(static_cast<size_t>(num_layers), planes);
  if (options.smooth_keys) smoothing_.resize(static_cast<size_t>(num_layers));
  if (options.exact_sink + options.exact_window > 0) {
    const std::vector<float> rows_of_layer(static_cast<size_t>(k::ExactRowsFloats(
        batch, num_kv_heads, head_dim, options.exact_sink, options.exact_window)));
    exact_k_.assign(static_cast<size_t>(num_layers), rows_of_layer);
    exact_v_.assign(static_cast<size_t>(num_layers), rows_of_layer);
  }
}

Status KvCache::Supports(const KvCacheOptions& options, int head_dim) {
  if (options.rotate_keys && !options.compress) {
    return Status::InvalidArgument("rotated keys need the compressed (4-bit) cache");
  }
  if (options.smooth_keys && !options.compress) {
    return Status::InvalidArgument("smoothed keys need the compressed (4-bit) cache");
  }
  if (options.exact_sink < 0 || options.exact_window < 0) {
    return Status::InvalidArgument("the exact sink and window of the 4-bit cache are token "
                                   "counts and cannot be negative");
  }
  if (options.exact_sink + options.exact_window > 0 && !options.compress) {
    return Status::InvalidArgument("exact sink and window tokens need the compressed (4-bit) "
                                   "cache");
  }
  if (options.channel_keys && (!options.compress || options.rotate_keys || options.smooth_keys)) {
    return Status::InvalidArgument("keys by channel need the compressed (4-bit) cache, and are "
                                   "neither rotated nor smoothed");
  }
  if (options.channel_keys && options.exact_window < kernels::kQ4ChannelGroup) {
    return Status::InvalidArgument(
        "keys by channel read their unfinished group of " +
        std::to_string(kernels::kQ4ChannelGroup) + " tokens from the exact window, which has " +
        std::to_string(options.exact_window) + "; keep at least " +
        std::to_string(kernels::kQ4ChannelGroup));
  }
  const bool q4_head = head_dim % 2 == 0 && (head_dim <= 64 || head_dim % 64 == 0 ||
                                             head_dim == 80 || head_dim == 96);
  if (options.compress && !q4_head) {
    return Status::Unsupported(
        "the 4-bit KV cache takes an even head_dim up to 64, 80, 96 or a multiple of 64; this "
        "model has " +
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
  const uint64_t smoothing = options_.smooth_keys
                                 ? 2ull * qk_.size() * batch_ * num_kv_heads_ * head_dim_ * 4
                                 : 0;  // fp32 mean and scale per (layer, sequence, KV head)
  const uint64_t exact = exact_k_.empty() ? 0 : 2ull * exact_k_.size() * exact_k_[0].size() * 4;
  const uint64_t planes = qk_[0].codes.size() + qk_[0].params.size() * sizeof(uint16_t) +
                          qv_[0].codes.size() + qv_[0].params.size() * sizeof(uint16_t);
  return qk_.size() * planes + smoothing + exact;
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
                    int first_slot, const int* start) {
  STRATA_CHECK(first_slot >= 0 && first_slot + tokens <= max_len_);
  if (options_.compress) {
    const k::Q4CacheShape s{batch_, num_kv_heads_, max_len_, head_dim_};
    Q4Planes& kp = qk_[static_cast<size_t>(layer)];
    Q4Planes& vp = qv_[static_cast<size_t>(layer)];
    if (options_.smooth_keys) {
      if (!smoothing_[static_cast<size_t>(layer)].set) {
        SetSmoothing(layer, k_rows, tokens, first_slot, start);
      }
      const Smoothing& sm = smoothing_[static_cast<size_t>(layer)];
      const int d = head_dim_;
      smoothed_k_.resize(static_cast<size_t>(batch_) * tokens * num_kv_heads_ * d);
      for (long row = 0; row < static_cast<long>(batch_) * tokens; ++row) {
        const size_t at = static_cast<size_t>(row / tokens) * num_kv_heads_ * d;
        for (int h = 0; h < num_kv_heads_; ++h) {
          const long off = (row * num_kv_heads_ + h) * d;
          k::SmoothKey(k_rows + off, sm.key_mean.data() + at + h * d,
                       sm.key_scale.data() + at + h * d, d, smoothed_k_.data() + off);
        }
      }
      k_rows = smoothed_k_.data();
    }
    std::vector<int> no_padding;
    if (start == nullptr) {
      no_padding.assign(static_cast<size_t>(batch_), 0);
      start = no_padding.data();
    }
    if (options_.channel_keys) {  // before the exact rows take this write's tokens
      const int d = head_dim_;
      const int exact_rows = options_.exact_sink + options_.exact_window;
      for (int b = 0; b < batch_; ++b) {
        for (int h = 0; h < num_kv_heads_; ++h) {
          const long row = static_cast<long>(b) * num_kv_heads_ + h;
          k::WriteKeyGroupsByChannel(
              d, options_.exact_sink, options_.exact_window, start[b], first_slot, tokens,
              k_rows + (static_cast<long>(b) * tokens * num_kv_heads_ + h) * d,
              static_cast<long>(num_kv_heads_) * d,
              exact_k_[static_cast<size_t>(layer)].data() + row * exact_rows * d,
              kp.codes.data() + row * max_len_ * kernels::Q4CodeBytes(d),
              kp.params.data() + row * max_len_ * kernels::Q4ChannelParamHalves(d));
        }
      }
    }
    if (!exact_k_.empty()) {
      k::WriteExactRows(batch_, num_kv_heads_, head_dim_, options_.exact_sink,
                        options_.exact_window, k_rows, v_rows, tokens, first_slot,
                        start, options_.rotate_keys, exact_k_[static_cast<size_t>(layer)].data(),
                        exact_v_[static_cast<size_t>(layer)].data());
    }
    if (!options_.channel_keys) {
      k::WriteQ4Cache(s, k_rows, tokens, first_slot, options_.rotate_keys, kp.codes.data(),
                      kp.params.data());
    }
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

void KvCache::SetSmoothing(int layer, const float* k_rows, int tokens, int first_slot,
                           const int* start) {
  const int d = head_dim_;
  const long stride = static_cast<long>(num_kv_heads_) * d;
  Smoothing& sm = smoothing_[static_cast<size_t>(layer)];
  sm.key_mean.resize(static_cast<size_t>(batch_) * stride);
  sm.key_scale.resize(sm.key_mean.size());
  for (int b = 0; b < batch_; ++b) {
    const int first_real = start != nullptr ? std::clamp(start[b] - first_slot, 0, tokens) : 0;
    for (int h = 0; h < num_kv_heads_; ++h) {
      const size_t at = (static_cast<size_t>(b) * num_kv_heads_ + h) * d;
      k::FitKeySmoothing(k_rows + (static_cast<long>(b) * tokens + first_real) * stride + h * d,
                         tokens - first_real, stride, d, sm.key_mean.data() + at,
                         sm.key_scale.data() + at);
    }
  }
  sm.set = true;
}

void KvCache::DecodeAttention(int layer, k::DecodeAttentionQ4Shape s, const float* q,
                              const int* start, float* out) {
  STRATA_CHECK(options_.compress && s.num_kv_heads == num_kv_heads_ && s.head_dim == head_dim_);
  s.keys_rotated = options_.rotate_keys;
  s.keys_by_channel = options_.channel_keys;
  if (options_.smooth_keys && smoothing_[static_cast<size_t>(layer)].set) {
    const Smoothing& sm = smoothing_[static_cast<size_t>(layer)];
    const int d = head_dim_;
    const int group = s.num_heads / num_kv_heads_;
    scaled_q_.resize(static_cast<size_t>(s.batch) * s.num_heads * d);
    for (int b = 0; b < s.batch; ++b) {
      for (int h = 0; h < s.num_heads; ++h) {
        const size_t row = (static_cast<size_t>(b) * s.num_heads + h) * d;
        const size_t at = (static_cast<size_t>(b) * num_kv_heads_ + h / group) * d;
        k::ScaleQuery(q + row, sm.key_scale.data() + at, d, scaled_q_.data() + row);
      }
    }
    q = scaled_q_.data();
  }
  if (exact_k_.empty()) {
    k::DecodeAttentionQ4(s, q, q4_keys(layer), q4_values(layer), start, out);
    return;
  }
  const k::Q4ExactRows exact{options_.exact_sink, options_.exact_window,
                             exact_k_[static_cast<size_t>(layer)].data(),
                             exact_v_[static_cast<size_t>(layer)].data()};
  k::DecodeAttentionQ4(s, q, q4_keys(layer), q4_values(layer), start, out, k::Q4Isa::kAuto,
                       &exact);
}

void KvCache::ExpandSlots(int layer, int slots, int dst_len, float* k_out, float* v_out,
                          const int* start) const {
  STRATA_CHECK(options_.compress && slots <= dst_len && slots <= max_len_);
  const Q4Planes& kp = qk_[static_cast<size_t>(layer)];
  const Q4Planes& vp = qv_[static_cast<size_t>(layer)];
  const int d = head_dim_;
  const Smoothing* sm = options_.smooth_keys ? &smoothing_[static_cast<size_t>(layer)] : nullptr;
  for (long head = 0; head < static_cast<long>(batch_) * num_kv_heads_; ++head) {
    for (int t = 0; t < slots; ++t) {
      const long src = head * max_len_ + t;
      const long dst = (head * dst_len + t) * d;
      if (options_.channel_keys) {
        ChannelKey(layer, head, t, slots, start, k_out + dst);
      } else {
        k::DequantizeQ4Row(kp.codes.data() + src * kernels::Q4CodeBytes(d),
                           kp.params.data() + src * kernels::Q4ParamHalves(d), d, k_out + dst);
      }
      k::DequantizeQ4Row(vp.codes.data() + src * kernels::Q4CodeBytes(d),
                         vp.params.data() + src * kernels::Q4ParamHalves(d), d, v_out + dst);
      if (options_.rotate_keys) k::HadamardRotate(k_out + dst, 1, d);  // H is its own inverse
      if (sm != nullptr && sm->set) {
        k::UnsmoothKey(sm->key_mean.data() + head * d, sm->key_scale.data() + head * d, d,
                       k_out + dst);
      }
    }
  }
}

void KvCache::ChannelKey(int layer, long head, int slot, int slots, const int* start,
                         float* k) const {
  const int d = head_dim_;
  const int sink = options_.exact_sink;
  const int window = options_.exact_window;
  const int token = slot - (start != nullptr ? start[head / num_kv_heads_] : 0);
  const float* exact = exact_k_[static_cast<size_t>(layer)].data() + head * (sink + window) * d;
  const int tokens = slots - (slot - token);  // the sequence's tokens among [0, slots)
  if (token < 0) {
    std::fill(k, k + d, 0.0f);
  } else if (token < sink) {
    std::copy_n(exact + static_cast<long>(token) * d, d, k);
  } else if (token >= tokens - window) {
    std::copy_n(exact + static_cast<long>(sink + token % window) * d, d, k);
  } else {
    const Q4Planes& kp = qk_[static_cast<size_t>(layer)];
    const long row = head * max_len_;
    const long group = slot - token + token / kernels::kQ4ChannelGroup * kernels::kQ4ChannelGroup;
    k::DequantizeKeyByChannel(kp.codes.data() + (row + slot) * kernels::Q4CodeBytes(d),
                              kp.params.data() + (row + group) * kernels::Q4ChannelParamHalves(d),
                              d, k);
  }
}

}  // namespace strata::reference
