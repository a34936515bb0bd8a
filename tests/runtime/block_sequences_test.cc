#include "src/runtime/executor_sequences.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/runtime/sample_on_cpu.h"

namespace strata {
namespace {

// Ids 0..9 decode to the letters a..j; nothing else exists.
class LetterTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> Encode(std::string_view text, bool) const override {
    std::vector<int32_t> ids;
    for (char c : text) ids.push_back(c - 'a');
    return ids;
  }
  std::string TokenBytes(int32_t id) const override { return std::string(1, char('a' + id)); }
  std::string Decode(const std::vector<int32_t>& ids, bool) const override {
    std::string s;
    for (int32_t id : ids) s += TokenBytes(id);
    return s;
  }
  int vocab_size() const override { return 10; }
  int bos_id() const override { return -1; }
  int eos_id() const override { return -1; }
  bool add_bos_by_default() const override { return false; }
  bool IsSpecial(int32_t) const override { return false; }
  int32_t SpecialTokenId(std::string_view) const override { return -1; }
};

// The model's output rows past the tokenizer (an embedding padded to a multiple of 64 or 128)
// can win the argmax or a draw; what is drawn must be a token the text can hold.
TEST(BlockSequencesTest, NeverDrawsAnIdTheTokenizerLacks) {
  const LetterTokenizer tokenizer;
  const int vocab = 16;  // ids 10..15 are padding
  std::vector<GenerationRequest> block(2);
  block[0].sampling.temperature = 0.0f;
  block[1].sampling.temperature = 5.0f;  // nearly uniform over the 16 logits
  block[1].sampling.seed = 7;
  for (GenerationRequest& r : block) r.max_new_tokens = 200;
  const std::vector<int32_t> eog;
  BlockSequences sequences(block, tokenizer, eog);
  std::vector<float> logits(2 * vocab, 0.0f);
  logits[3] = 1.0f;   // the best letter, d
  logits[12] = 9.0f;  // padding, far ahead
  for (int i = vocab; i < 2 * vocab; ++i) logits[static_cast<size_t>(i)] = (i % vocab) / 16.0f;
  for (int step = 0; step < 200; ++step) {
    SampleOnCpu(sequences, 0, 2, logits.data(), vocab, step);
  }
  const std::vector<GenerationResult> results = sequences.TakeResults();
  EXPECT_EQ(results[0].tokens, std::vector<int32_t>(200, 3));
  EXPECT_EQ(results[0].text, std::string(200, 'd'));
  ASSERT_EQ(results[1].tokens.size(), 200u);
  for (int32_t id : results[1].tokens) EXPECT_LT(id, 10);
  EXPECT_EQ(results[1].text.size(), 200u);
}

// Teacher forcing: a request with forced tokens takes them whatever the logits say (past
// end-of-generation ids and stop strings), exactly as many as it has, each with its
// log-probability under the step's logits, summed in long double here; a sampled request beside
// it stops at the end-of-generation id as usual and reports none.
TEST(BlockSequencesTest, ForcedTokensAreTakenAndScored) {
  const LetterTokenizer tokenizer;
  const int vocab = 10;
  std::vector<GenerationRequest> block(2);
  block[0].forced = {4, 9, 2};  // e, then the end-of-generation id j, then c
  block[0].stop = {"j"};
  block[0].max_new_tokens = 1;  // forced tokens decide the length
  block[1].sampling.temperature = 0.0f;
  block[1].max_new_tokens = 8;
  const std::vector<int32_t> eog = {9};
  BlockSequences sequences(block, tokenizer, eog);
  std::vector<std::vector<float>> steps;
  for (int step = 0; step < 3; ++step) {
    std::vector<float>& logits = steps.emplace_back(2 * vocab);
    for (int i = 0; i < 2 * vocab; ++i) {
      logits[static_cast<size_t>(i)] = static_cast<float>((i * 7 + step * 3) % 11) - 4.5f;
    }
    logits[static_cast<size_t>(vocab + 9)] = step == 1 ? 50.0f : -50.0f;  // ends sequence 1
    SampleOnCpu(sequences, 0, 2, logits.data(), vocab, step);
  }
  EXPECT_TRUE(sequences.all_done());
  const std::vector<GenerationResult> results = sequences.TakeResults();
  EXPECT_EQ(results[0].tokens, block[0].forced);
  EXPECT_EQ(results[0].text, "ejc");
  EXPECT_EQ(results[0].reason, StopReason::kLength);
  ASSERT_EQ(results[0].logprobs.size(), 3u);
  for (int step = 0; step < 3; ++step) {
    long double sum = 0;
    for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<long double>(steps[step][i]));
    const long double want = steps[step][block[0].forced[step]] - std::log(sum);
    EXPECT_NEAR(results[0].logprobs[static_cast<size_t>(step)], static_cast<double>(want), 1e-12)
        << "step " << step;
  }
  EXPECT_EQ(results[1].tokens.size(), 2u);
  EXPECT_EQ(results[1].reason, StopReason::kEndOfGeneration);
  EXPECT_TRUE(results[1].logprobs.empty());
}

// Prompt logits come back in the order their rows were added, a sequence's own only.
TEST(BlockSequencesTest, PromptLogitsAppendInOrder) {
  const LetterTokenizer tokenizer;
  std::vector<GenerationRequest> block(2);
  block[0].prompt_logits = true;
  const std::vector<int32_t> eog;
  BlockSequences sequences(block, tokenizer, eog);
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6};
  sequences.AddPromptLogits(0, rows.data(), 2, 2);
  sequences.AddPromptLogits(0, rows.data() + 4, 1, 2);
  const std::vector<GenerationResult> results = sequences.TakeResults();
  EXPECT_EQ(results[0].prompt_logits, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(results[1].prompt_logits.empty());
}

// Ids 0..4 are "a", the three bytes of 日 (E6 97 A5) and "b"; nothing else exists.
class BytePieceTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> Encode(std::string_view, bool) const override { return {}; }
  std::string TokenBytes(int32_t id) const override { return kPieces[id]; }
  std::string Decode(const std::vector<int32_t>& ids, bool) const override {
    std::string s;
    for (int32_t id : ids) s += TokenBytes(id);
    return s;
  }
  int vocab_size() const override { return 5; }
  int bos_id() const override { return -1; }
  int eos_id() const override { return -1; }
  bool add_bos_by_default() const override { return false; }
  bool IsSpecial(int32_t) const override { return false; }
  int32_t SpecialTokenId(std::string_view) const override { return -1; }

 private:
  static constexpr const char* kPieces[] = {"a", "\xE6", "\x97", "\xA5", "b"};
};

// Runs one greedy sequence that draws `ids` in turn. REQUIRES: it stops within `ids`.
GenerationResult Draw(const GenerationRequest& request, const std::vector<int32_t>& ids,
                      const std::vector<int32_t>& eog) {
  const BytePieceTokenizer tokenizer;
  const std::vector<GenerationRequest> block{request};
  BlockSequences sequences(block, tokenizer, eog);
  for (int step = 0; !sequences.all_done(); ++step) {
    std::vector<float> logits(5, 0.0f);
    logits[static_cast<size_t>(ids.at(static_cast<size_t>(step)))] = 1.0f;
    SampleOnCpu(sequences, 0, 1, logits.data(), 5, step);
  }
  return sequences.TakeResults()[0];
}

// A reply that ends inside a character (max_tokens, end-of-text) ends at the last whole one,
// never in U+FFFD, and still counts every token it generated.
TEST(BlockSequencesTest, DropsACharacterCutOffByTheEnd) {
  GenerationRequest request;
  request.sampling.temperature = 0.0f;
  const std::vector<int32_t> no_eog;
  for (int max_new_tokens : {2, 3}) {  // cut after E6, after E6 97
    request.max_new_tokens = max_new_tokens;
    const GenerationResult r = Draw(request, {0, 1, 2, 3}, no_eog);
    EXPECT_EQ(r.reason, StopReason::kLength);
    EXPECT_EQ(r.tokens.size(), static_cast<size_t>(max_new_tokens));
    EXPECT_EQ(r.text, "a") << max_new_tokens;
  }
  request.max_new_tokens = 4;
  EXPECT_EQ(Draw(request, {0, 1, 2, 3}, no_eog).text, "a\xE6\x97\xA5");
  // An end-of-text id (here "b") after E6 97: the two bytes are dropped, the id counted.
  request.max_new_tokens = 10;
  const GenerationResult eot = Draw(request, {0, 1, 2, 4}, {4});
  EXPECT_EQ(eot.reason, StopReason::kEndOfGeneration);
  EXPECT_EQ(eot.tokens, (std::vector<int32_t>{0, 1, 2, 4}));
  EXPECT_EQ(eot.text, "a");
}

}  // namespace
}  // namespace strata
