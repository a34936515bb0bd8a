// BlockSequences: the sequences of one block while it runs — each one's sampled tokens, text and
// stop state — and the stopping rules they share: an end-of-generation id (unless ignore_eos), a
// stop string (the text is cut before it), or max_new_tokens. A request with forced tokens
// (GenerationRequest::forced) takes those instead of sampling, each with its log-probability, and
// stops only after the last of them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "src/backend/shapes.h"
#include "src/runtime/generation.h"

namespace strata {

// Thread-compatible: one caller (the executor's compute lane, or a reference engine in tests)
// while a block runs;
// the executor's load lane also reads last_token() to gather the input embedding's rows, once the
// schedule has ordered it after the output layer's sampling and before the next one.
class BlockSequences {
 public:
  // REQUIRES: `block` and `tokenizer` outlive this object.
  BlockSequences(const std::vector<GenerationRequest>& block, const Tokenizer& tokenizer,
                 const std::vector<int32_t>& eog_ids);
  ~BlockSequences();

  // What token number `step` (0 is the one the prefill predicts) of sequences
  // [first, first + count) needs, row i for sequence first + i: how to draw it (specs[i], from
  // the request's SamplingConfig), or for a request with forced tokens the token to score
  // (forced[i]; -1 for a request without). Only ids the tokenizer has may be drawn: the first
  // decodable(vocab) of the model's `vocab` logits (the rows a model's embedding is padded with
  // beyond them, Qwen2.5's 152064 against its tokenizer's 151665, would decode to nothing).
  void Draws(int first, int count, int step, std::vector<SamplingSpec>& specs,
             std::vector<int32_t>& forced) const;
  int decodable(int vocab) const { return std::min(vocab, decodable_); }
  // Takes token number `step` of sequences [first, first + count): sampled[i] as drawn, or for
  // a forced request its forced token with log-probability logprobs[i] (logprobs may be null
  // when no request of the range is forced), and applies the stop rules. Sequences that are done
  // are left as they are.
  void Take(int first, int count, int step, const int32_t* sampled, const double* logprobs);
  // Appends logits[rows, vocab] to sequence `seq`'s prompt logits
  // (GenerationRequest::prompt_logits), the prompt's positions in order.
  void AddPromptLogits(int seq, const float* logits, int rows, int vocab);

  int size() const { return static_cast<int>(results_.size()); }
  bool all_done() const { return running_ == 0; }
  // The token a sequence feeds next: its newest one (a finished sequence keeps feeding it).
  int32_t last_token(int seq) const { return results_[static_cast<size_t>(seq)].tokens.back(); }
  std::vector<GenerationResult> TakeResults() { return std::move(results_); }

 private:
  struct State;
  void Push(int seq, int32_t token);

  const std::vector<GenerationRequest>& block_;
  const std::vector<int32_t>& eog_ids_;
  std::vector<GenerationResult> results_;
  std::vector<std::unique_ptr<State>> state_;
  int decodable_;  // the tokenizer's vocab_size()
  int running_ = 0;
};

}  // namespace strata
