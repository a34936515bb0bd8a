// Plan: the policy one run follows, as plain data. Given by hand (FlexGen-style flags or a YAML
// file) or found by search (policy/search.h); placement, schedule and executor derive everything
// from it, so a plan behaves the same whichever way it was made.
//
// A *block* is gpu_batch_size * num_gpu_batches sequences: the weights of a layer are fetched once
// per token step and reused by every micro-batch (gpu batch) of the block. Each family (weights,
// KV cache, activations) is split over GPU, CPU and disk by whole percents; disk gets the rest.
#pragma once

#include <string>
#include <vector>

#include "src/core/status.h"

namespace strata {

// How the 4-bit cache stores keys (src/runtime/executor_compute.h). kPlain: FlexGen's
// group-wise codes (group 64 over head_dim). kRotated: Walsh–Hadamard rotated over head_dim first
// (kernels/cpu/hadamard.h; needs a power-of-two head_dim). kSmoothed: exactly smoothed per
// (layer, sequence, KV head) with the prompt's channel means and scales, then rotated
// (kernels/cpu/kv_q4_smooth.h). kChannel (the default): quantized per channel over groups of
// kChannelKeyGroup consecutive token slots, as KIVI does, so that the few channels with large
// keys share a scale with no other channel; a sequence's unfinished last group is read from its
// exact recent tokens, so it needs cache_window >= kChannelKeyGroup.
enum class CacheKeys { kPlain, kRotated, kSmoothed, kChannel };
const char* CacheKeysName(CacheKeys keys);  // "plain", "rotated", "smoothed", "channel"
// The inverse of CacheKeysName; InvalidArgument naming the four choices otherwise.
Result<CacheKeys> ParseCacheKeys(const std::string& name);

// Tokens per group of channel keys (counted from a sequence's first). The kernels'
// kQ4ChannelGroup (kernels/kv_q4_format.h) is the same number; policy does not include kernels,
// so the runtime asserts they agree.
inline constexpr int kChannelKeyGroup = 32;
// The tokens of a 4-bit cache kept exact unless a plan says otherwise: each sequence's first
// (the attention sink) and its most recent group of channel keys, which kChannel reads from there.
inline constexpr int kDefaultCacheSink = 1;
inline constexpr int kDefaultCacheWindow = kChannelKeyGroup;

struct Plan {
  int gpu_batch_size = 1;        // sequences per micro-batch (>= 1)
  int num_gpu_batches = 1;       // micro-batches per block (>= 1)
  int weight_gpu_percent = 100;  // share of every layer's weight bytes on the GPU
  int weight_cpu_percent = 0;    // ... in pinned CPU memory; disk holds the rest
  int cache_gpu_percent = 100;   // share of the KV cache ((sequence, KV head) rows) on the GPU
  int cache_cpu_percent = 0;
  int activation_gpu_percent = 100;  // share of the hidden states between layers on the GPU
  int activation_cpu_percent = 0;
  bool cpu_attention = false;    // decode attention over the non-GPU cache runs on the CPU
  bool compress_weight = false;  // weights stored 4-bit group-wise (group 64), expanded per layer
  bool compress_cache = false;   // KV cache stored 4-bit (kernels/kv_q4_format.h)
  CacheKeys cache_keys = CacheKeys::kChannel;  // how that cache stores keys; unused without it
  // With compress_cache: each sequence's first cache_sink real tokens and its cache_window most
  // recent ones also kept exact, in fp32 (kernels/cpu/kv_q4_exact.h); unused
  // without it. Channel keys need cache_window >= kChannelKeyGroup.
  int cache_sink = kDefaultCacheSink;
  int cache_window = kDefaultCacheWindow;
  bool overlap = true;           // loads, compute and stores run on overlapped lanes

  int weight_disk_percent() const { return 100 - weight_gpu_percent - weight_cpu_percent; }
  int cache_disk_percent() const { return 100 - cache_gpu_percent - cache_cpu_percent; }
  int activation_disk_percent() const {
    return 100 - activation_gpu_percent - activation_cpu_percent;
  }
  bool rotate_keys() const {
    return compress_cache &&
           (cache_keys == CacheKeys::kRotated || cache_keys == CacheKeys::kSmoothed);
  }
  bool smooth_keys() const { return compress_cache && cache_keys == CacheKeys::kSmoothed; }
  bool channel_keys() const { return compress_cache && cache_keys == CacheKeys::kChannel; }
  bool exact_tokens() const { return compress_cache && cache_sink + cache_window > 0; }
  // Sequences per block.
  int64_t block_size() const { return static_cast<int64_t>(gpu_batch_size) * num_gpu_batches; }

  // Ok, or InvalidArgument naming the first bad field and its allowed range.
  Status Validate() const;

  bool operator==(const Plan&) const = default;
};

// A few lines for people, e.g.
//   block 144 = 48 x 3 micro-batches
//   weights     GPU 20%  CPU 80%  disk 0%
//   ...
std::string PlanToString(const Plan& plan);

// FlexGen's command-line form: "--percent WG WC CG CC AG AC --gpu-batch-size N
// --num-gpu-batches K" followed by the flags that are on ("--cpu-attention", "--compress-weight",
// "--compress-cache" with "--cache-keys NAME", "--cache-sink S" and "--cache-window R" when not
// the defaults, "--no-overlap").
std::string PlanToFlexGenFlags(const Plan& plan);

// Builds a plan from FlexGen's six percents (weights, cache, activations on GPU then CPU) and
// batch shape; the boolean fields keep their defaults. Returns InvalidArgument when `percent`
// does not hold exactly six values or the plan does not validate.
Result<Plan> PlanFromFlexGenPercent(const std::vector<int>& percent, int gpu_batch_size,
                                    int num_gpu_batches);

// YAML with one key per field, named as the fields are. Every key is required when loading, so
// a plan file says everything it means, except cache_sink and cache_window: always written, but 0
// when absent, as older plan files wrote them only when not 0 (such a file keeps its meaning; one
// with channel keys and no cache_window then fails Validate); unknown keys are errors.
std::string PlanToYaml(const Plan& plan);
Result<Plan> ParsePlanYaml(const std::string& text, const std::string& origin);
Result<Plan> LoadPlanYaml(const std::string& path);

}  // namespace strata
