// The device sampler against kernels/cpu/sampling.cc's SampleToken on the same logits, seeds and
// steps: greedy, temperature, top-k, top-p and their mixes in one batch, with tied logits.
#include <cstdint>
#include <vector>

#include "kernels/cpu/sampling.h"
#include "src/backend/cuda/ops.h"
#include "tests/backend/gpu_test_util.h"

namespace strata::testing {
namespace {

class SamplingTest : public GpuTest {};

TEST_F(SamplingTest, MatchesTheCpuSamplerRowByRow) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const std::vector<kernels::cpu::SamplingParams> configs = {
      {0.0f, 1.0f, 0, 1},   {1.0f, 1.0f, 1, 2},   {0.7f, 1.0f, 0, 3},  {1.0f, 1.0f, 50, 4},
      {1.0f, 0.9f, 0, 5},   {0.8f, 0.95f, 40, 6}, {1.3f, 0.5f, 0, 7},  {1.0f, 0.0001f, 0, 8},
      {2.0f, 1.0f, -1, 9},  {0.5f, 0.3f, 3, 10},
  };
  for (int vocab : {1, 7, 1000, 50272}) {
    SCOPED_TRACE(vocab);
    for (bool ties : {false, true}) {
      const int batch = static_cast<int>(configs.size()) * 3;
      std::vector<float> logits = RandomNormals(rng, static_cast<size_t>(batch) * vocab, 3.0f);
      if (ties) {
        for (float& x : logits) x = std::round(x);  // a few levels: many exact ties
      }
      std::vector<cuda_ops::SamplingParams> params(static_cast<size_t>(batch));
      std::vector<uint64_t> steps(static_cast<size_t>(batch));
      for (int r = 0; r < batch; ++r) {
        const kernels::cpu::SamplingParams& c = configs[static_cast<size_t>(r) % configs.size()];
        params[r].temperature = c.temperature;
        params[r].top_p = c.top_p;
        params[r].top_k = c.top_k;
        params[r].seed = rng();
        params[r].step = rng() % 4096;
      }
      DeviceArray<float> dlogits(logits);
      DeviceArray<cuda_ops::SamplingParams> dparams(params);
      DeviceArray<int32_t> out(static_cast<size_t>(batch));
      size_t bytes = 0;
      ASSERT_EQ(cuda_ops::SampleTokensWorkspaceBytes(batch, vocab, &bytes), cudaSuccess);
      DeviceBuffer workspace(bytes);
      out.Poison();
      ASSERT_EQ(cuda_ops::SampleTokens(dlogits.get(), batch, vocab, dparams.get(), true,
                                       workspace.get(), bytes, out.get(), nullptr),
                cudaSuccess);
      const std::vector<int32_t> got = out.Download();
      std::vector<std::pair<float, int32_t>> scratch;
      for (int r = 0; r < batch; ++r) {
        kernels::cpu::SamplingParams c;
        c.temperature = params[r].temperature;
        c.top_p = params[r].top_p;
        c.top_k = params[r].top_k;
        c.seed = params[r].seed;
        const int32_t want = kernels::cpu::SampleToken(
            logits.data() + static_cast<size_t>(r) * vocab, vocab, c, params[r].step, scratch);
        EXPECT_EQ(got[r], want) << "row " << r << " temperature " << c.temperature << " top_p "
                                << c.top_p << " top_k " << c.top_k << " ties " << ties;
      }
    }
  }
}

TEST_F(SamplingTest, GreedyOnlyBatchesNeedNoWorkspace) {
  std::mt19937_64 rng(TestSeed());
  const int batch = 5, vocab = 32000;
  std::vector<float> logits = RandomNormals(rng, static_cast<size_t>(batch) * vocab);
  logits[3] = 100.0f;
  logits[7] = 100.0f;  // a tie in row 0: the lower id wins
  std::vector<cuda_ops::SamplingParams> params(batch);
  for (auto& p : params) p.temperature = 0.0f;
  DeviceArray<float> dlogits(logits);
  DeviceArray<cuda_ops::SamplingParams> dparams(params);
  DeviceArray<int32_t> out(batch);
  out.Poison();
  ASSERT_EQ(cuda_ops::SampleTokens(dlogits.get(), batch, vocab, dparams.get(), false, nullptr, 0,
                                   out.get(), nullptr),
            cudaSuccess);
  const std::vector<int32_t> got = out.Download();
  std::vector<std::pair<float, int32_t>> scratch;
  for (int r = 0; r < batch; ++r) {
    kernels::cpu::SamplingParams c;
    c.temperature = 0.0f;
    EXPECT_EQ(got[r], kernels::cpu::SampleToken(logits.data() + static_cast<size_t>(r) * vocab,
                                                vocab, c, 0, scratch));
  }
  EXPECT_EQ(got[0], 3);
}

}  // namespace
}  // namespace strata::testing
