// KvCache: the fp32 key/value cache of one block of sequences, for every layer.
// Layout per layer: [batch, num_kv_heads, max_len, head_dim] for keys and again for values, so a
// sequence's head is one contiguous run of rows (what the attention kernel streams through).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata {

class KvCache {
 public:
  KvCache(int num_layers, int batch, int num_kv_heads, int max_len, int head_dim);

  float* keys(int layer) { return k_[static_cast<size_t>(layer)].data(); }
  float* values(int layer) { return v_[static_cast<size_t>(layer)].data(); }
  int batch() const { return batch_; }
  int max_len() const { return max_len_; }
  // Bytes held by the whole cache.
  uint64_t bytes() const;

  // Copies rows src[batch * tokens, num_kv_heads * head_dim] (token-major, as a Linear writes
  // them) into slots [first_slot, first_slot + tokens) of `layer`'s cache.
  void Write(int layer, const float* k_rows, const float* v_rows, int tokens, int first_slot);

 private:
  int batch_, num_kv_heads_, max_len_, head_dim_;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace strata
