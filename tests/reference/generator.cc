// Frozen reference for tests (see generator.h).
#include "tests/reference/generator.h"

#include <algorithm>
#include <memory>

#include "kernels/cpu/sampling.h"
#include "src/core/check.h"

namespace strata::reference {

Generator::Generator(Transformer& transformer, const Tokenizer& tokenizer,
                     std::vector<int32_t> eog_ids)
    : transformer_(transformer), tokenizer_(tokenizer), eog_ids_(std::move(eog_ids)) {}

void Generator::Forward(const StepInput& in, KvCache& cache) {
  const ModelConfig& c = transformer_.config();
  const int rows = in.batch * in.new_tokens;
  hidden_.resize(static_cast<size_t>(rows) * c.hidden_size);
  transformer_.Embed(in, hidden_.data());
  for (int layer = 0; layer < c.num_layers; ++layer) {
    transformer_.AttentionLayer(layer, in, cache, hidden_.data());
    transformer_.MlpLayer(layer, rows, hidden_.data());
  }
}

void Generator::Draw(BlockSequences& sequences, int batch, int vocab, int step) {
  std::vector<SamplingSpec> specs;
  std::vector<int32_t> forced, sampled(static_cast<size_t>(batch));
  std::vector<double> logprobs(static_cast<size_t>(batch));
  std::vector<std::pair<float, int32_t>> scratch;
  sequences.Draws(0, batch, step, specs, forced);
  for (int b = 0; b < batch; ++b) {
    const float* row = logits_.data() + static_cast<size_t>(b) * vocab;
    const SamplingSpec& r = specs[static_cast<size_t>(b)];
    sampled[b] = kernels::cpu::SampleToken(row, sequences.decodable(vocab),
                                           {r.temperature, r.top_p, r.top_k, r.seed}, r.step,
                                           scratch);
    if (forced[b] >= 0) logprobs[b] = kernels::cpu::LogProbability(row, vocab, forced[b]);
  }
  sequences.Take(0, batch, step, sampled.data(), logprobs.data());
}

std::vector<float> Generator::PromptLogits(const std::vector<int32_t>& prompt) {
  const ModelConfig& c = transformer_.config();
  const int n = static_cast<int>(prompt.size());
  StepInput in;
  in.batch = 1;
  in.new_tokens = n;
  in.tokens = prompt;
  for (int i = 0; i < n; ++i) in.positions.push_back(i);
  in.start = {0};
  in.cache_len = n;
  KvCache cache(c.num_layers, 1, c.num_kv_heads, n, c.head_dim, cache_options_);
  Forward(in, cache);
  std::vector<float> logits(static_cast<size_t>(n) * c.vocab_size);
  transformer_.Logits(hidden_.data(), n, logits.data());
  return logits;
}

std::vector<GenerationResult> Generator::Generate(const std::vector<GenerationRequest>& block) {
  const ModelConfig& c = transformer_.config();
  const int batch = static_cast<int>(block.size());
  if (batch == 0) return {};

  int prompt_len = 0;
  int max_new = 0;
  for (const GenerationRequest& r : block) {
    STRATA_CHECK(!r.prompt.empty() && r.max_new_tokens >= 1);
    prompt_len = std::max(prompt_len, static_cast<int>(r.prompt.size()));
    max_new = std::max(max_new, r.max_new_tokens);
  }
  BlockSequences sequences(block, tokenizer_, eog_ids_);
  // Every result marked cancelled, when the cancel flag is up; empty otherwise.
  const auto cancelled = [&]() -> std::vector<GenerationResult> {
    if (cancel_ == nullptr || !cancel_->load(std::memory_order_relaxed)) return {};
    std::vector<GenerationResult> results = sequences.TakeResults();
    for (GenerationResult& r : results) r.reason = StopReason::kCancelled;
    return results;
  };
  if (auto stopped = cancelled(); !stopped.empty()) return stopped;
  KvCache cache(c.num_layers, batch, c.num_kv_heads, prompt_len + max_new, c.head_dim,
                cache_options_);

  // Prefill: left-pad every prompt to prompt_len. Padding rows repeat the first real token; they
  // are never attended and their outputs are discarded.
  StepInput in;
  in.batch = batch;
  in.new_tokens = prompt_len;
  in.cache_len = prompt_len;
  for (int b = 0; b < batch; ++b) {
    const std::vector<int32_t>& p = block[b].prompt;
    const int pad = prompt_len - static_cast<int>(p.size());
    in.start.push_back(pad);
    for (int j = 0; j < prompt_len; ++j) {
      in.tokens.push_back(j < pad ? p[0] : p[j - pad]);
      in.positions.push_back(std::max(0, j - pad));
    }
  }
  Forward(in, cache);

  const size_t hidden = static_cast<size_t>(c.hidden_size);
  last_.resize(batch * hidden);
  logits_.resize(batch * static_cast<size_t>(c.vocab_size));

  for (int step = 0;; ++step) {
    if (auto stopped = cancelled(); !stopped.empty()) return stopped;
    // Hidden state of each sequence's newest token: the last row of its slice.
    for (int b = 0; b < batch; ++b) {
      const size_t row = static_cast<size_t>(b) * in.new_tokens + in.new_tokens - 1;
      std::copy_n(hidden_.data() + row * hidden, hidden, last_.data() + b * hidden);
    }
    transformer_.Logits(last_.data(), batch, logits_.data());
    Draw(sequences, batch, c.vocab_size, step);
    if (sequences.all_done()) break;

    // Decode: one new token per sequence (finished ones keep feeding their last token).
    in.new_tokens = 1;
    in.cache_len = prompt_len + step + 1;
    in.tokens.assign(batch, 0);
    in.positions.assign(batch, 0);
    for (int b = 0; b < batch; ++b) {
      in.tokens[b] = sequences.last_token(b);
      in.positions[b] = in.cache_len - 1 - in.start[b];
    }
    Forward(in, cache);
  }
  return sequences.TakeResults();
}

}  // namespace strata::reference
