// Transformer: one decoder-only model as FlexGen's scheduling layers — input embedding, then per
// block an attention layer and an MLP layer, then the output layer — each callable on its own
// for one micro-batch, so an executor can interleave layers and micro-batches as it likes.
// Not thread-safe: it owns reusable workspaces.
#pragma once

#include <cstdint>
#include <vector>

#include "src/backend/backend.h"
#include "src/model/model.h"
#include "src/runtime/kv_cache.h"

namespace strata {

// The tokens one step feeds through the model for a micro-batch of `batch` sequences, each with
// `new_tokens` new tokens (left-padded to the same count). Hidden states are
// [batch * new_tokens, hidden], sequence-major.
struct StepInput {
  int batch = 0;
  int new_tokens = 0;
  std::vector<int32_t> tokens;     // [batch * new_tokens]
  std::vector<int32_t> positions;  // [batch * new_tokens]; position ids (0 at a sequence's first real token)
  std::vector<int> start;          // [batch]; cache slot of each sequence's first real token
  int cache_len = 0;               // cache slots filled once this step's tokens are written
};

class Transformer {
 public:
  // REQUIRES: `model` and `backend` outlive the Transformer.
  Transformer(const Model& model, Backend& backend);

  const ModelConfig& config() const { return config_; }

  // hidden[rows, hidden_size] = token (+ position) embeddings of `in`.
  void Embed(const StepInput& in, float* hidden);
  // Attention sub-block of `layer` with its residual: writes the new keys/values into `cache`.
  void AttentionLayer(int layer, const StepInput& in, KvCache& cache, float* hidden);
  // MLP sub-block of `layer` with its residual.
  void MlpLayer(int layer, int rows, float* hidden);
  // logits[rows, vocab] for the given hidden rows (final norm, then the LM head).
  void Logits(const float* hidden, int rows, float* logits);

 private:
  float* Workspace(std::vector<float>& buf, size_t n);

  const Model& model_;
  const ModelConfig& config_;
  Backend& backend_;
  std::vector<float> inv_freq_;
  std::vector<float> normed_, q_, k_, v_, attn_, proj_, up_, gate_;
};

}  // namespace strata
