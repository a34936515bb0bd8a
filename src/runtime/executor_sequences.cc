#include "src/runtime/executor_sequences.h"

#include <algorithm>
#include <string>

#include "src/core/check.h"

namespace strata {

struct BlockSequences::State {
  StreamingDetokenizer detok;
  size_t max_stop = 0;
  bool done = false;
};

namespace {

// Where the earliest stop string starts in `text`, searching only where a match could involve
// the bytes appended after `old_size`; npos when none.
size_t FindStop(const std::string& text, size_t old_size, const std::vector<std::string>& stops,
                size_t max_stop) {
  const size_t from = old_size > max_stop ? old_size - max_stop : 0;
  size_t best = std::string::npos;
  for (const std::string& s : stops) best = std::min(best, text.find(s, from));
  return best;
}

}  // namespace

BlockSequences::BlockSequences(const std::vector<GenerationRequest>& block,
                               const Tokenizer& tokenizer, const std::vector<int32_t>& eog_ids)
    : block_(block), eog_ids_(eog_ids), results_(block.size()), decodable_(tokenizer.vocab_size()) {
  for (const GenerationRequest& r : block) {
    state_.push_back(std::make_unique<State>(State{StreamingDetokenizer(tokenizer, true), 0, false}));
    for (const std::string& s : r.stop) state_.back()->max_stop = std::max(state_.back()->max_stop, s.size());
  }
  running_ = static_cast<int>(block.size());
}

BlockSequences::~BlockSequences() = default;

void BlockSequences::Draws(int first, int count, int step, std::vector<SamplingSpec>& specs,
                           std::vector<int32_t>& forced) const {
  specs.resize(static_cast<size_t>(count));
  forced.resize(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const GenerationRequest& req = block_[static_cast<size_t>(first + i)];
    const SamplingConfig& c = req.sampling;
    specs[i] = {c.temperature, c.top_p, c.top_k, c.seed, static_cast<uint64_t>(step)};
    forced[i] = req.forced.empty() ? -1 : req.forced[static_cast<size_t>(step)];
  }
}

void BlockSequences::Take(int first, int count, int step, const int32_t* sampled,
                          const double* logprobs) {
  for (int i = 0; i < count; ++i) {
    const int seq = first + i;
    if (state_[static_cast<size_t>(seq)]->done) continue;
    const GenerationRequest& req = block_[static_cast<size_t>(seq)];
    if (!req.forced.empty()) {
      STRATA_CHECK(logprobs != nullptr);
      results_[static_cast<size_t>(seq)].logprobs.push_back(logprobs[i]);
      Push(seq, req.forced[static_cast<size_t>(step)]);
      continue;
    }
    Push(seq, sampled[i]);
  }
}

void BlockSequences::AddPromptLogits(int seq, const float* logits, int rows, int vocab) {
  std::vector<float>& out = results_[static_cast<size_t>(seq)].prompt_logits;
  out.insert(out.end(), logits, logits + static_cast<size_t>(rows) * vocab);
}

void BlockSequences::Push(int seq, int32_t token) {
  State& st = *state_[static_cast<size_t>(seq)];
  const GenerationRequest& req = block_[static_cast<size_t>(seq)];
  GenerationResult& res = results_[static_cast<size_t>(seq)];
  res.tokens.push_back(token);
  const bool forced = !req.forced.empty();
  const bool eog = std::find(eog_ids_.begin(), eog_ids_.end(), token) != eog_ids_.end();
  if (eog && !req.ignore_eos && !forced) {
    res.reason = StopReason::kEndOfGeneration;
    st.done = true;
  } else {
    const size_t old_size = res.text.size();
    res.text += st.detok.Push(token);
    const size_t cut =
        forced ? std::string::npos : FindStop(res.text, old_size, req.stop, st.max_stop);
    if (cut != std::string::npos) {
      res.text.resize(cut);
      res.reason = StopReason::kStopString;
      st.done = true;
    } else if (static_cast<int>(res.tokens.size()) >= TokensToGenerate(req)) {
      res.reason = StopReason::kLength;
      st.done = true;
    }
  }
  if (st.done) {
    st.detok.Finish();  // the text ends at its last whole character, never in U+FFFD
    --running_;
  }
}

}  // namespace strata
