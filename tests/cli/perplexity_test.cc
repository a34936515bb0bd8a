// `strata perplexity` on the default model over a short prefix of tests/data/text: the 4-bit
// cache with smoothed and rotated keys and no token exact, and the same with each window's first
// token and 16 most recent tokens kept exact (--cache-sink 1 --cache-window 16), against the fp32
// cache, with bounds measured on this prefix (docs/PERFORMANCE.md; rotation alone costs +4.8%
// here, too much for the first bound); and 4-bit weights, the file's own Q4_1 blocks. Skips when
// the model is not in the cache (scripts/setup.sh fetches it). Every token after each window's
// prompt is scored, whatever the last window's length, and a short last window changes no other
// window's score. Bad flags get a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <utility>

#include "tests/cli/cli_runner.h"

namespace strata {
namespace {

// What `strata perplexity args` prints: `perplexity P over N tokens`.
struct Score {
  double perplexity = -1;  // -1 when the command fails
  long tokens = 0;         // scored tokens
  double Nll() const { return static_cast<double>(tokens) * std::log(perplexity); }
};

Score Perplexity(const std::string& args) {
  const std::string cmd =
      std::string("OMP_NUM_THREADS=1 ") + STRATA_BINARY + " perplexity " + args + " 2>/dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {};
  Score s;
  if (std::fscanf(pipe, "perplexity %lf over %ld tokens", &s.perplexity, &s.tokens) != 2) {
    s.perplexity = -1;
  }
  if (::pclose(pipe) != 0) s.perplexity = -1;
  return s;
}

// Words [first, first + count) of a fixed sequence, each one token of SmolLM2's vocabulary (a
// space, then the word), in an order that does not repeat soon: text of exactly `count` tokens.
std::string Words(int first, int count) {
  static const char* const kWords[] = {
      "the",  "of",   "and",  "to",   "in",   "he",   "his",    "was",      "that",  "it", "for",
      "said", "with", "as",   "they", "him",  "them", "her",    "you",      "is",    "be", "had",
      "not",  "all",  "were", "on",   "from", "land", "father", "brothers", "Joseph"};
  constexpr int kCount = sizeof(kWords) / sizeof(kWords[0]);  // 31, a prime: stride 7 cycles
  std::string text;
  for (int i = first; i < first + count; ++i) {
    text += std::string(" ") + kWords[(i * 7 + i / kCount) % kCount];
  }
  return text;
}

class PerplexityTest : public CliTest {
 protected:
  // The first 4,400 bytes of the text: 1,087 tokens, 2 windows of 512 (the last 63 tokens, no
  // more than --prompt, are skipped).
  std::string Prefix() {
    std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/tests/data/text/web_genesis_37-45.txt",
                     std::ios::binary);
    std::string text(std::istreambuf_iterator<char>(in), {});
    Write("prefix.txt", text.substr(0, 4400));
    return "--input " + Path("prefix.txt") + " --window 512 --threads 1";
  }

  // The prefix's perplexity with `flags` over its fp32 perplexity (printed), or -1 on failure.
  double OverFp32(const std::string& flags, const char* what) {
    const std::string args = Prefix();
    static const double fp32 = Perplexity(args).perplexity;  // the same for every test
    const double p = Perplexity(args + " " + flags).perplexity;
    EXPECT_GT(fp32, 1.0);
    EXPECT_GT(p, 1.0) << flags;
    if (fp32 <= 1.0 || p <= 1.0) return -1;
    std::printf("fp32 %.4f  %s %.4f (%+.2f%%)\n", fp32, what, p, 100 * (p / fp32 - 1));
    return p / fp32;
  }
};

// The default 4-bit cache (keys by channel over groups of 32 tokens, the first token and the 32
// most recent ones exact) costs at most 0.5% perplexity, what issue 23 asks of it: measured
// +0.08% here, +0.18% to +0.24% on three longer texts (docs/PERFORMANCE.md).
TEST_F(PerplexityTest, DefaultFourBitCacheCostsAtMostHalfAPercent) {
  if (DefaultModelPath().empty()) GTEST_SKIP() << "default model not fetched";
  const double channel = OverFp32("--compress-cache", "default 4-bit cache");
  EXPECT_GT(channel, 0);
  EXPECT_LE(channel, 1.005);
}

TEST_F(PerplexityTest, SmoothedRotatedFourBitCacheStaysCloseToFp32) {
  if (DefaultModelPath().empty()) GTEST_SKIP() << "default model not fetched";
  const double smoothed =
      OverFp32("--compress-cache --cache-keys smoothed --cache-sink 0 --cache-window 0",
               "smoothed+rotated 4-bit cache");
  // Measured 1.017 with the first AVX-512 kernel, 1.035 with the VNNI one and 1.006 with its
  // integer values (rotated alone: 1.048 and 1.041). The kernels agree to 1e-4 per output, but
  // every later layer rounds its keys and values to 4 bits, so such differences flip codes and
  // move 894 tokens' perplexity by about 2% either way (the full text: +2.6% to +2.9%,
  // docs/PERFORMANCE.md). The bound is set above that spread; the sharp check is the exact-token
  // one below.
  EXPECT_GT(smoothed, 0);
  EXPECT_LE(smoothed, 1.05);
  // Each window's first token and 16 most recent tokens also kept exact: within 1%.
  const double exact =
      OverFp32("--compress-cache --cache-keys smoothed --cache-sink 1 --cache-window 16",
               "with the first token and 16 recent tokens exact");
  EXPECT_GT(exact, 0);
  EXPECT_LE(exact, 1.01);  // measured 1.0054 (the full text: 1.0041 to 1.0044)
}

TEST_F(PerplexityTest, FourBitWeightsKeepTheFilesBlocks) {
  if (DefaultModelPath().empty()) GTEST_SKIP() << "default model not fetched";
  const double weights = OverFp32("--compress-weight", "4-bit weights");
  // The projections' Q4_1 blocks are kept bit for bit (src/model/gguf_q4.h); what is lost is the
  // Q8_0 embedding, also the output projection, rounded to 4 bits: measured 1.094 here (1.077 on
  // the whole text, where re-quantizing every matrix in groups of 64, as strata did before, cost
  // 1.42).
  EXPECT_GT(weights, 0);
  EXPECT_LE(weights, 1.15);
}

// Every token after each window's first --prompt tokens is scored, whatever the last window's
// length: short (20 of 48 tokens), long (40) or full. SmolLM2 adds no BOS, so the windows'
// tokens are the text's. Running every window in one block left-padded to the longest, as strata
// did, scored 9, 69 and 93 of these tokens.
TEST_F(PerplexityTest, ScoresEveryTokenAfterEachWindowsPrompt) {
  if (DefaultModelPath().empty()) GTEST_SKIP() << "default model not fetched";
  const int window = 48, prompt = 16;
  for (int tokens : {2 * window + 20, 2 * window + 40, 3 * window}) {
    Write("words.txt", Words(0, tokens));
    const Score s =
        Perplexity("--input " + Path("words.txt") + " --window " + std::to_string(window) +
                   " --prompt " + std::to_string(prompt) + " --threads 1");
    EXPECT_GT(s.perplexity, 1.0) << tokens << " tokens";
    EXPECT_EQ(s.tokens, tokens - 3 * prompt) << tokens << " tokens";
  }
}

// A short last window leaves the full windows' scores as they are: the text's negative
// log-likelihood is the sum of its three windows', each run by itself from a file of its own.
TEST_F(PerplexityTest, AShortLastWindowChangesNoOtherWindowsScore) {
  if (DefaultModelPath().empty()) GTEST_SKIP() << "default model not fetched";
  const std::string flags = " --window 48 --prompt 16 --threads 1";
  Write("text.txt", Words(0, 2 * 48 + 20));
  const Score whole = Perplexity("--input " + Path("text.txt") + flags);
  ASSERT_GT(whole.perplexity, 1.0);
  double parts = 0;
  long scored = 0;
  for (const auto& [first, count] : {std::pair{0, 48}, std::pair{48, 48}, std::pair{96, 20}}) {
    Write("window.txt", Words(first, count));
    const Score part = Perplexity("--input " + Path("window.txt") + flags);
    ASSERT_GT(part.perplexity, 1.0) << "the window from token " << first;
    EXPECT_EQ(part.tokens, count - 16);
    parts += part.Nll();
    scored += part.tokens;
  }
  EXPECT_EQ(scored, whole.tokens);
  EXPECT_NEAR(parts, whole.Nll(), 1e-4 * whole.Nll());
}

TEST_F(PerplexityTest, BadFlagsSayWhatIsWrong) {
  Write("t.txt", "Hello there.");
  CliResult r = RunStrata("perplexity --input " + Path("t.txt") + " --cache-keys smoothed");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("--cache-keys needs the 4-bit cache: add --compress-cache"),
            std::string::npos)
      << r.stderr_text;
  r = RunStrata("perplexity --input " + Path("t.txt") + " --compress-cache --cache-keys odd");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("--cache-keys: cache keys must be channel"), std::string::npos)
      << r.stderr_text;
  r = RunStrata("perplexity --input " + Path("t.txt") + " --cache-window 16");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("add --compress-cache"), std::string::npos) << r.stderr_text;
  r = RunStrata("perplexity --input " + Path("t.txt") + " --cache-sink 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("add --compress-cache"), std::string::npos) << r.stderr_text;
  r = RunStrata("perplexity --input " + Path("t.txt") + " --compress-cache --cache-sink -2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("must be at least 0"), std::string::npos) << r.stderr_text;
  r = RunStrata("perplexity --input " + Path("t.txt") + " --compress-cache --cache-window 16");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("--cache-window 32 or more"), std::string::npos) << r.stderr_text;
  r = RunStrata("perplexity --input " + Path("t.txt") +
                " --compress-cache --window 32 --prompt 16");
  EXPECT_NE(r.exit_code, 0);  // the default 1 + 32 exact tokens
  EXPECT_NE(r.stderr_text.find("--cache-sink 1 + --cache-window 32 exceed --window 32"),
            std::string::npos)
      << r.stderr_text;
  r = RunStrata("perplexity --input " + Path("t.txt") + " --window 15 --prompt 15");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("leaves nothing to score"), std::string::npos) << r.stderr_text;
}

}  // namespace
}  // namespace strata
