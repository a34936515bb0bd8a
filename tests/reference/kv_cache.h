// Frozen reference for tests: the key/value cache of the reference Generator (generator.h), a
// copy of the engine's former KvCache (once src/runtime/kv_cache.h), kept so that the engine's
// fp32 and 4-bit caches are held to an implementation outside src/. It calls kernels/cpu
// directly on purpose and does not change with the engine.
//
// KvCache: the key/value cache of one block of sequences, for every layer, in fp32 or in the
// 4-bit format of kernels/kv_q4_format.h. Layout per layer: [batch, num_kv_heads, max_len,
// head_dim] for keys and again for values (for 4 bits: the codes and params planes of that
// format), so a sequence's head is one contiguous run of rows (what attention streams through).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/attention_q4.h"
#include "src/core/status.h"

namespace strata::reference {

// How the cache stores keys and values.
struct KvCacheOptions {
  // 4-bit asymmetric group-wise codes with an fp16 scale and minimum per group of 64 along
  // head_dim (FlexGen's scheme) instead of fp32. Default: fp32.
  bool compress = false;
  // With `compress`: keys are Walsh–Hadamard rotated over head_dim before quantization
  // (kernels/cpu/hadamard.h), which tames outlier channels; queries are rotated to match by the
  // attention kernel. Values are never rotated. Default: off.
  bool rotate_keys = false;
  // With `compress`: exact key smoothing (kernels/cpu/kv_q4_smooth.h). Per (layer, sequence,
  // KV head), keys are stored as (k - m) / s (then rotated when rotate_keys), with m and s fitted
  // to that sequence's real tokens in the first write to the layer (the prompt's prefill); a
  // first write of one token leaves the layer unsmoothed. DecodeAttention scales queries by s,
  // ExpandSlots undoes it. Default: off.
  bool smooth_keys = false;
  // With `compress`: keys quantized by channel over groups of kQ4ChannelGroup slots
  // (kernels/cpu/kv_q4_channel.h), a group once its last slot is written; the tokens of the
  // unfinished group are read from the exact window, which must hold at least that many.
  // Excludes rotate_keys and smooth_keys. Default: off.
  bool channel_keys = false;
  // With `compress`: each sequence's first `exact_sink` real tokens and its `exact_window` most
  // recent ones are also kept in fp32 per (layer, sequence, KV head) (kernels/cpu/kv_q4_exact.h),
  // keys transformed as the 4-bit ones are, and DecodeAttention reads them from there. Every
  // token is still quantized. Default: 0 and 0 (none).
  int exact_sink = 0;
  int exact_window = 0;
};

class KvCache {
 public:
  // REQUIRES: Supports(options, head_dim).ok().
  KvCache(int num_layers, int batch, int num_kv_heads, int max_len, int head_dim,
          KvCacheOptions options = {});

  // Whether a cache with `options` can hold heads of `head_dim`; the error says why not.
  static Status Supports(const KvCacheOptions& options, int head_dim);

  const KvCacheOptions& options() const { return options_; }
  int batch() const { return batch_; }
  int max_len() const { return max_len_; }
  // Bytes held by the whole cache.
  uint64_t bytes() const;

  // The fp32 planes of `layer`. REQUIRES: !options().compress.
  float* keys(int layer);
  float* values(int layer);
  // The 4-bit planes of `layer`. REQUIRES: options().compress.
  kernels::cpu::Q4CacheView q4_keys(int layer) const;
  kernels::cpu::Q4CacheView q4_values(int layer) const;

  // Stores rows src[batch * tokens, num_kv_heads * head_dim] (token-major, as a Linear writes
  // them) in slots [first_slot, first_slot + tokens) of `layer`'s cache, quantizing (and rotating
  // and smoothing keys) when compressed. start[batch], when given, is each sequence's first real
  // slot: padding rows before it are stored but not used to fit the smoothing.
  void Write(int layer, const float* k_rows, const float* v_rows, int tokens, int first_slot,
             const int* start = nullptr);

  // Decode attention of one new query token per sequence on the compressed cache of `layer`:
  // kernels/cpu/attention_q4.h's DecodeAttentionQ4 with s.keys_rotated set from the options and
  // the queries scaled when keys are smoothed, and the exact tokens (exact_sink, exact_window)
  // read from their fp32 rows. q, out: [batch, num_heads, head_dim].
  // REQUIRES: options().compress; s.num_kv_heads and s.head_dim those of the cache.
  void DecodeAttention(int layer, kernels::cpu::DecodeAttentionQ4Shape s, const float* q,
                       const int* start, float* out);

  // Expands slots [0, slots) of a compressed `layer` to fp32 keys (un-rotated, un-smoothed) and
  // values, laid out [batch, num_kv_heads, dst_len, head_dim]. With channel_keys, the keys of
  // exact tokens (start[b] as in Write, none when null) are their exact rows, as decode reads
  // them (the unfinished group has no codes yet), and padding slots' keys are 0.
  // REQUIRES: options().compress; slots <= dst_len.
  void ExpandSlots(int layer, int slots, int dst_len, float* k_out, float* v_out,
                   const int* start = nullptr) const;

 private:
  struct Q4Planes {
    std::vector<uint8_t> codes;
    std::vector<uint16_t> params;
  };

  struct Smoothing {
    bool set = false;
    std::vector<float> key_mean, key_scale;  // [batch, num_kv_heads, head_dim]
  };
  // Key of `slot` of row `head` (sequence head / num_kv_heads) of a channel_keys `layer` whose
  // slots [0, slots) are written: ExpandSlots' rule.
  void ChannelKey(int layer, long head, int slot, int slots, const int* start, float* k) const;
  // Fits `layer`'s smoothing to the real tokens (slots >= start[b]) of its first write.
  void SetSmoothing(int layer, const float* k_rows, int tokens, int first_slot, const int* start);

  int batch_, num_kv_heads_, max_len_, head_dim_;
  KvCacheOptions options_;
  std::vector<std::vector<float>> k_, v_;  // fp32 mode
  std::vector<Q4Planes> qk_, qv_;          // compressed mode
  std::vector<Smoothing> smoothing_;       // compressed mode with smooth_keys: per layer
  // Compressed mode with exact tokens, per layer: Q4ExactRows' keys and values.
  std::vector<std::vector<float>> exact_k_, exact_v_;
  std::vector<float> smoothed_k_, scaled_q_;  // scratch
};

}  // namespace strata::reference
