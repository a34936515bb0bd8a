// ModelConfig: everything the forward pass needs to know about an architecture, read from a
// Hugging Face config.json or from GGUF metadata. The forward pass branches on these fields, never
// on a model's name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/core/status.h"

namespace strata {

enum class Architecture { kOpt, kLlama };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class Activation { kRelu, kGelu, kSilu };

// RoPE frequency scaling (Hugging Face `rope_scaling`). kNone leaves the inverse frequencies as
// theta^(-2i/d); kLinear divides them by `factor`; kLlama3 applies Llama 3.1's smooth wavelength
// ramp with factor, low_freq_factor, high_freq_factor and original_max_position_embeddings.
// kFactors: per-dimension divisors of the inverse frequencies, as GGUF files of Llama 3.1 and
// later carry their llama3 scaling (the tensor rope_freqs.weight: llama.cpp's freq_factors).
// kYarn: YaRN (Qwen2.5 and Qwen3 beyond their native context): frequencies that turn fewer than
// beta_slow times over original_max_position_embeddings are divided by `factor`, those that turn
// more than beta_fast times are kept, a linear ramp over the dimensions between; the rotated q and
// k are also scaled by attention_factor (ModelConfig::AttentionScale).
enum class RopeScalingKind { kNone, kLinear, kLlama3, kFactors, kYarn };
struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position_embeddings = 8192;
  std::vector<float> freq_factors;  // kFactors: head_dim / 2 positive divisors
  float attention_factor = 1.0f;    // kYarn
  float beta_fast = 32.0f;          // kYarn
  float beta_slow = 1.0f;           // kYarn
  bool truncate = true;             // kYarn: the ramp's ends rounded to whole dimensions
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // == num_heads for multi-head attention (OPT)
  int head_dim = 0;      // hidden_size / num_heads unless the config says otherwise
  int max_position_embeddings = 0;  // the context length; prompt + generation must fit in it
  NormKind norm = NormKind::kRmsNorm;
  float norm_eps = 1e-5f;
  Activation activation = Activation::kSilu;
  bool gated_mlp = true;          // SwiGLU (gate, up, down) vs fc1/fc2
  bool attention_bias = false;    // q/k/v projections carry biases (OPT, Qwen2, some Llamas)
  bool attention_output_bias = false;  // so does the o projection (OPT, those Llamas; not Qwen2)
  bool mlp_bias = false;          // fc1/fc2 (OPT) or gate/up/down (Llama) carry biases
  bool qk_norm = false;           // each head of q and k is RMS-normalized before RoPE (Qwen3)
  bool tie_word_embeddings = false;
  bool use_rope = true;           // Llama: RoPE; OPT: learned absolute positions
  int position_offset = 0;        // OPT's learned positions start at index 2
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  int bos_token_id = -1;  // -1: none
  int eos_token_id = -1;
  int pad_token_id = -1;

  // Checks that the sizes are positive and consistent (heads divide, head_dim * heads fits).
  Status Validate() const;
  // The factor of q·k in the attention logits: 1/sqrt(head_dim), times attention_factor² under
  // YaRN (which scales the rotated q and k alike).
  float AttentionScale() const;
  // A one-line summary, e.g. "llama: 30 layers, hidden 576, heads 9/3, vocab 49152".
  std::string Summary() const;
};

// The context a model runs with: max_position_embeddings, or under YaRN factor ×
// original_max_position_embeddings when that is longer (Qwen's configs keep their native 32768
// beside a YaRN factor of 4 that reaches 131072; serving engines allow the product too).
int ScaledContext(const ModelConfig& c);

// Caps c's context at a sliding-attention window shorter than it, with a warning naming `source`.
// strata attends to the whole context, which is what a sliding window does for a sequence no
// longer than the window (a query at i sees the keys at j > i - window).
void CapContextAtWindow(int64_t window, const std::string& source, ModelConfig* c);

}  // namespace strata
