#include "src/runtime/executor_sequences.h"

#include <algorithm>
#include <string>

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

void BlockSequences::Sample(int first, int count, const float* logits, int vocab, int step) {
  for (int i = 0; i < count; ++i) {
    const int seq = first + i;
    if (state_[static_cast<size_t>(seq)]->done) continue;
    const GenerationRequest& req = block_[static_cast<size_t>(seq)];
    const float* row = logits + static_cast<size_t>(i) * vocab;
    if (!req.forced.empty()) {
      const int32_t token = req.forced[static_cast<size_t>(step)];
      results_[static_cast<size_t>(seq)].logprobs.push_back(LogProbability(row, vocab, token));
      Push(seq, token);
      continue;
    }
    Push(seq, SampleToken(row, std::min(vocab, decodable_), req.sampling,
                          static_cast<uint64_t>(step), scratch_));
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
