// Generator: runs one block of sequences through prefill and decode on a Transformer. Prompts
// of different lengths are left-padded to the longest; padding never changes a sequence's result
// (masked keys, positions counted from each sequence's first real token).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "src/runtime/sampler.h"
#include "src/runtime/transformer.h"
#include "src/tokenizer/tokenizer.h"

namespace strata {

struct GenerationRequest {
  std::vector<int32_t> prompt;     // token ids, BOS included when the model wants one
  int max_new_tokens = 16;         // >= 1
  SamplingConfig sampling;
  std::vector<std::string> stop;   // the text ends before the first occurrence of any of these
  bool ignore_eos = false;         // do not stop at end-of-generation tokens
};

// kCancelled: Generate stopped early (set_cancel); the result is incomplete.
enum class StopReason { kEndOfGeneration, kStopString, kLength, kCancelled };

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids, the stopping token included
  std::string text;             // detokenized, special tokens skipped, cut before a stop string;
                                // an incomplete character at its end is dropped, not U+FFFD
  StopReason reason = StopReason::kLength;
};

// The ids that end a generation: the tokenizer's and config's EOS, plus the chat turn/ document
// end markers that exist as special tokens (<|im_end|>, <|endoftext|>, <|eot_id|>,
// <|end_of_text|>), as llama.cpp does: GGUF files often name only one of them as EOS.
std::vector<int32_t> EndOfGenerationIds(const Tokenizer& tokenizer, const ModelConfig& config);

class Generator {
 public:
  // REQUIRES: all three outlive the Generator.
  Generator(Transformer& transformer, const Tokenizer& tokenizer, std::vector<int32_t> eog_ids);

  // Generates for every request of the block at once.
  // REQUIRES: each prompt non-empty; prompt + max_new_tokens fits the model's context.
  std::vector<GenerationResult> Generate(const std::vector<GenerationRequest>& block);

  // Once *cancel is true, Generate stops before its next token step and returns every result
  // with reason kCancelled. nullptr (the default): never. REQUIRES: *cancel outlives this.
  void set_cancel(const std::atomic<bool>* cancel) { cancel_ = cancel; }

  // How Generate and PromptLogits keep the KV cache (default fp32; e.g. the 4-bit cache that
  // the offloading engine's compress_cache plans use). REQUIRES: KvCache::Supports(options,
  // head_dim) for the model.
  void set_cache_options(const KvCacheOptions& options) { cache_options_ = options; }

  // Logits [tokens, vocab] of every position of one prompt, from a single prefill.
  std::vector<float> PromptLogits(const std::vector<int32_t>& prompt);

 private:
  // Runs every layer over `in`, leaving hidden states in hidden_.
  void Forward(const StepInput& in, KvCache& cache);

  Transformer& transformer_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> eog_ids_;
  std::vector<float> hidden_, last_, logits_;
  const std::atomic<bool>* cancel_ = nullptr;
  KvCacheOptions cache_options_;
};

}  // namespace strata
