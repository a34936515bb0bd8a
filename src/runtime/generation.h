// What the engine is asked for and what it gives back, one request (sequence) at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/model/model_config.h"
#include "src/tokenizer/tokenizer.h"

namespace strata {

// How a request's tokens are drawn (src/backend/shapes.h's SamplingSpec says how).
struct SamplingConfig {
  float temperature = 1.0f;  // 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // nucleus mass kept, (0, 1]
  int top_k = 0;             // keep the k most likely; 0 or -1 disables
  uint64_t seed = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;     // token ids, BOS included when the model wants one
  int max_new_tokens = 16;         // >= 1
  SamplingConfig sampling;
  std::vector<std::string> stop;   // the text ends before the first occurrence of any of these
  bool ignore_eos = false;         // do not stop at end-of-generation tokens
  // Teacher forcing (perplexity, scoring): when not empty, step i "generates" forced[i] whatever
  // the logits say and reports its log-probability (GenerationResult::logprobs). Exactly
  // forced.size() tokens are generated: max_new_tokens, stop strings and end-of-generation ids
  // do not apply.
  std::vector<int32_t> forced;
  // Also return the logits of every prompt position (GenerationResult::prompt_logits), from the
  // prefill, as the parity tests compare them with Hugging Face's.
  bool prompt_logits = false;
};

// kCancelled: generation stopped early (a cancel flag); the result is incomplete.
enum class StopReason { kEndOfGeneration, kStopString, kLength, kCancelled };

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids, the stopping token included
  std::string text;             // detokenized, special tokens skipped, cut before a stop string;
                                // an incomplete character at its end is dropped, not U+FFFD
  StopReason reason = StopReason::kLength;
  // With `forced`: log p(forced[i]) under step i's logits (log-softmax over the model's whole
  // vocabulary, in fp64).
  std::vector<double> logprobs;
  // With `prompt_logits`: [prompt.size(), vocab], row j the logits after prompt token j.
  std::vector<float> prompt_logits;
};

// How many tokens `request` generates at most: forced.size() when forced, else max_new_tokens.
inline int TokensToGenerate(const GenerationRequest& request) {
  return request.forced.empty() ? request.max_new_tokens
                                : static_cast<int>(request.forced.size());
}

// The ids that end a generation: the tokenizer's and config's EOS, plus the chat turn/ document
// end markers that exist as special tokens (<|im_end|>, <|endoftext|>, <|eot_id|>,
// <|end_of_text|>), as llama.cpp does: GGUF files often name only one of them as EOS.
std::vector<int32_t> EndOfGenerationIds(const Tokenizer& tokenizer, const ModelConfig& config);

}  // namespace strata
