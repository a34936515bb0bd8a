// Frozen reference for tests: a copy of the engine's former generation loop (Generator, once
// src/runtime/generator.h), kept as what the engine (OffloadGenerator) is held to. Its greedy
// tokens equal Hugging Face transformers' on the fixtures of tests/data/fixtures, and the engine
// must give them exactly under every placement (tests/runtime/policy_matrix_test.cc checks both).
// It runs on the reference Transformer and KvCache of this folder, which call kernels/cpu
// directly on purpose, never a Backend op; it does not change with the engine.
//
// Generator: runs one block of sequences through prefill and decode on a Transformer. Prompts
// of different lengths are left-padded to the longest; padding never changes a sequence's result
// (masked keys, positions counted from each sequence's first real token).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "src/runtime/executor_sequences.h"
#include "src/runtime/generation.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/reference/kv_cache.h"
#include "tests/reference/transformer.h"

namespace strata::reference {

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
  // the engine's compress_cache plans use). REQUIRES: KvCache::Supports(options, head_dim) for
  // the model.
  void set_cache_options(const KvCacheOptions& options) { cache_options_ = options; }

  // Logits [tokens, vocab] of every position of one prompt, from a single prefill.
  std::vector<float> PromptLogits(const std::vector<int32_t>& prompt);

 private:
  // Runs every layer over `in`, leaving hidden states in hidden_.
  void Forward(const StepInput& in, KvCache& cache);
  // Token number `step` of each of the `batch` sequences from logits_ [batch, vocab]: drawn (or,
  // forced, scored) with kernels/cpu/sampling.h, and taken.
  void Draw(BlockSequences& sequences, int batch, int vocab, int step);

  Transformer& transformer_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> eog_ids_;
  std::vector<float> hidden_, last_, logits_;
  const std::atomic<bool>* cancel_ = nullptr;
  KvCacheOptions cache_options_;
};

}  // namespace strata::reference
