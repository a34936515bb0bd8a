#include "kernels/cpu/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace strata::kernels::cpu {
namespace {

// The divisors llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel) writes to
// rope_freqs.weight for a Llama 3.1 rope_scaling, computed here in double as it does.
std::vector<float> LlamaCppRopeFactors(int head_dim, double theta, double factor, double low,
                                       double high, double old_context) {
  std::vector<float> factors;
  const double low_wavelen = old_context / low, high_wavelen = old_context / high;
  for (int i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / head_dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_context / wavelen - low) / (high - low);
      factors.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth)));
    }
  }
  return factors;
}

TEST(RopeTest, FrequencyFactorsAsGgufCarriesThemReproduceLlama3Scaling) {
  const int head_dim = 128;
  RopeParams llama3;
  llama3.head_dim = head_dim;
  llama3.theta = 500000.0f;
  llama3.scaling = RopeScalingKind::kLlama3;
  llama3.factor = 8.0f;
  llama3.low_freq_factor = 1.0f;
  llama3.high_freq_factor = 4.0f;
  llama3.original_max_positions = 8192;
  std::vector<float> expected(head_dim / 2), got(head_dim / 2);
  RopeInverseFrequencies(llama3, expected.data());

  const std::vector<float> factors = LlamaCppRopeFactors(head_dim, 500000.0, 8.0, 1.0, 4.0, 8192);
  RopeParams given;
  given.head_dim = head_dim;
  given.theta = 500000.0f;
  given.scaling = RopeScalingKind::kFactors;
  given.freq_factors = factors.data();
  RopeInverseFrequencies(given, got.data());

  int kept = 0, slowed = 0, ramped = 0;
  for (int i = 0; i < head_dim / 2; ++i) {
    EXPECT_NEAR(got[i], expected[i], 1e-6 * expected[i]) << "dimension pair " << i;
    kept += factors[i] == 1.0f;
    slowed += factors[i] == 8.0f;
    ramped += factors[i] > 1.0f && factors[i] < 8.0f;
  }
  EXPECT_GT(kept, 0);  // every branch of the scaling is exercised
  EXPECT_GT(slowed, 0);
  EXPECT_GT(ramped, 0);
}

}  // namespace
}  // namespace strata::kernels::cpu
