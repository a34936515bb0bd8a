#include "src/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "src/core/log.h"

namespace strata {
namespace {

const char* ArchitectureName(Architecture a) { return a == Architecture::kOpt ? "opt" : "llama"; }

// Bounds that no real model reaches; beyond them sizes would overflow the forward's int math.
constexpr int kMaxDim = 1 << 20;
constexpr int kMaxVocab = 1 << 24;
constexpr int kMaxLayers = 4096;

}  // namespace

Status ModelConfig::Validate() const {
  auto bad = [](const std::string& m) { return Status::InvalidArgument("model config: " + m); };
  auto in_range = [](int v, int hi) { return v > 0 && v <= hi; };
  if (!in_range(vocab_size, kMaxVocab)) return bad("vocab_size " + std::to_string(vocab_size));
  if (!in_range(hidden_size, kMaxDim)) return bad("hidden_size " + std::to_string(hidden_size));
  if (!in_range(intermediate_size, kMaxDim)) {
    return bad("intermediate_size " + std::to_string(intermediate_size));
  }
  if (!in_range(num_layers, kMaxLayers)) return bad("num_layers " + std::to_string(num_layers));
  if (!in_range(num_heads, kMaxDim) || !in_range(num_kv_heads, kMaxDim)) {
    return bad("heads " + std::to_string(num_heads) + "/" + std::to_string(num_kv_heads) +
               " must be positive");
  }
  if (num_heads % num_kv_heads != 0) {
    return bad("num_heads " + std::to_string(num_heads) + " is not a multiple of num_kv_heads " +
               std::to_string(num_kv_heads));
  }
  if (!in_range(head_dim, kMaxDim) || static_cast<int64_t>(head_dim) * num_heads > kMaxDim) {
    return bad("head_dim " + std::to_string(head_dim) + " with " + std::to_string(num_heads) +
               " heads");
  }
  if (arch == Architecture::kOpt && head_dim * num_heads != hidden_size) {
    return bad("OPT hidden_size " + std::to_string(hidden_size) + " is not divisible by " +
               std::to_string(num_heads) + " heads");
  }
  if (use_rope && head_dim % 2 != 0) {
    return bad("RoPE needs an even head_dim, got " + std::to_string(head_dim));
  }
  if (max_position_embeddings <= 0) {
    return bad("max_position_embeddings " + std::to_string(max_position_embeddings));
  }
  if (position_offset < 0) return bad("position_offset " + std::to_string(position_offset));
  if (!(norm_eps > 0.0f)) return bad("norm_eps must be positive");
  if (use_rope && !(rope_theta > 0.0f)) return bad("rope_theta must be positive");
  if (rope_scaling.kind != RopeScalingKind::kNone && !(rope_scaling.factor > 0.0f)) {
    return bad("rope_scaling factor must be positive");
  }
  if (rope_scaling.kind == RopeScalingKind::kLlama3 &&
      (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor) ||
       !(rope_scaling.low_freq_factor > 0.0f) ||
       rope_scaling.original_max_position_embeddings <= 0)) {
    return bad("llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor");
  }
  if (rope_scaling.kind == RopeScalingKind::kYarn &&
      (!(rope_scaling.attention_factor > 0.0f) || !(rope_scaling.beta_fast > 0.0f) ||
       !(rope_scaling.beta_slow > 0.0f) || rope_scaling.original_max_position_embeddings <= 0)) {
    return bad(
        "yarn rope_scaling needs positive attention_factor, beta_fast, beta_slow and "
        "original_max_position_embeddings");
  }
  if (rope_scaling.kind == RopeScalingKind::kFactors) {
    if (rope_scaling.freq_factors.size() != static_cast<size_t>(head_dim / 2)) {
      return bad("rope frequency factors: " + std::to_string(rope_scaling.freq_factors.size()) +
                 " values for head_dim " + std::to_string(head_dim) + " (head_dim / 2 expected)");
    }
    for (float f : rope_scaling.freq_factors) {
      if (!(f > 0.0f) || !std::isfinite(f)) return bad("rope frequency factors must be positive");
    }
  }
  for (int id : {bos_token_id, eos_token_id, pad_token_id}) {
    if (id < -1 || id >= vocab_size) {
      return bad("token id " + std::to_string(id) + " outside the vocabulary of " +
                 std::to_string(vocab_size));
    }
  }
  return Status::Ok();
}

int ScaledContext(const ModelConfig& c) {
  if (c.rope_scaling.kind != RopeScalingKind::kYarn) return c.max_position_embeddings;
  const double scaled = std::floor(static_cast<double>(c.rope_scaling.factor) *
                                   c.rope_scaling.original_max_position_embeddings);
  return static_cast<int>(
      std::clamp<double>(scaled, c.max_position_embeddings, std::numeric_limits<int>::max()));
}

void CapContextAtWindow(int64_t window, const std::string& source, ModelConfig* c) {
  if (window <= 0 || window >= c->max_position_embeddings) return;
  LogWarn(source + ": sliding-window attention (window " + std::to_string(window) +
          "): requests are limited to " + std::to_string(window) +
          " tokens, prompt and generation, where it equals the full attention strata computes");
  c->max_position_embeddings = static_cast<int>(window);
}

float ModelConfig::AttentionScale() const {
  const float a =
      rope_scaling.kind == RopeScalingKind::kYarn ? rope_scaling.attention_factor : 1.0f;
  return a * a / std::sqrt(static_cast<float>(head_dim));
}

std::string ModelConfig::Summary() const {
  std::string s = std::string(ArchitectureName(arch)) + ": " + std::to_string(num_layers) +
                  " layers, hidden " + std::to_string(hidden_size) + ", heads " +
                  std::to_string(num_heads) + "/" + std::to_string(num_kv_heads) + ", head_dim " +
                  std::to_string(head_dim) + ", ffn " + std::to_string(intermediate_size) +
                  ", vocab " + std::to_string(vocab_size) + ", context " +
                  std::to_string(max_position_embeddings);
  if (tie_word_embeddings) s += ", tied embeddings";
  return s;
}

}  // namespace strata
