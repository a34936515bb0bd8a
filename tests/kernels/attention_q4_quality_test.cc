// Scheme quality on synthetic data: how far 4-bit attention lands from unquantized fp64 attention
// with and without rotated keys, and with smoothed and rotated keys, when keys have a few large
// outlier channels (then RoPE) and values have a few heavy tokens. The numbers are printed; the
// rotated option must cut the error by at least a quarter, and smoothing must cut the rotated
// option's error further.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cpu/attention_q4.h"
#include "kernels/cpu/kv_q4_smooth.h"
#include "kernels/cpu/rope.h"
#include "tests/kernels/q4_reference.h"

namespace strata::kernels::cpu {
namespace {

using testing::Q4Planes;
using testing::ReferenceDecode;

constexpr int kDim = 64, kKvHeads = 2, kGroup = 4, kContext = 2048, kTrials = 4;
// Smoothing is fitted to the first kPrompt keys of each head, as a run fits it to the prompt.
constexpr int kPrompt = 256;

enum class Keys { kBaseline, kRotated, kSmoothedRotated };

struct SyntheticLayer {
  std::vector<float> keys, values, queries;  // keys/values head-major, queries [heads, kDim]
};

// Keys: N(0, 1) per channel except 4 outlier channels per KV head with a large mean of either
// sign and spread, then RoPE at positions 0.. . Values: N(0, 1) with 1% heavy tokens (x10).
SyntheticLayer MakeLayer(std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  SyntheticLayer l;
  const size_t n = static_cast<size_t>(kKvHeads) * kContext * kDim;
  l.keys.resize(n);
  l.values.resize(n);
  for (int h = 0; h < kKvHeads; ++h) {
    std::vector<float> mean(kDim, 0.0f), spread(kDim, 1.0f);
    for (int o = 0; o < 4; ++o) {
      const int c = static_cast<int>(uniform(rng) * kDim) % kDim;
      mean[c] = (uniform(rng) < 0.5f ? -1.0f : 1.0f) * (10.0f + 10.0f * uniform(rng));
      spread[c] = 3.0f;
    }
    float* k = l.keys.data() + static_cast<size_t>(h) * kContext * kDim;
    float* v = l.values.data() + static_cast<size_t>(h) * kContext * kDim;
    for (int t = 0; t < kContext; ++t) {
      const float heavy = uniform(rng) < 0.01f ? 10.0f : 1.0f;
      for (int i = 0; i < kDim; ++i) {
        k[t * kDim + i] = mean[i] + spread[i] * normal(rng);
        v[t * kDim + i] = heavy * normal(rng);
      }
    }
    RopeParams rope;
    rope.head_dim = kDim;
    std::vector<float> inv_freq(kDim / 2);
    RopeInverseFrequencies(rope, inv_freq.data());
    std::vector<int32_t> positions(kContext);
    for (int t = 0; t < kContext; ++t) positions[t] = t;
    ApplyRope(k, positions.data(), kContext, 1, kDim, inv_freq.data());
  }
  l.queries.resize(static_cast<size_t>(kKvHeads) * kGroup * kDim);
  for (float& x : l.queries) x = normal(rng);
  return l;
}

// Relative Frobenius error of the 4-bit output against fp64 on the unquantized cache.
double OutputError(const SyntheticLayer& l, Keys keys, bool quantize_values) {
  const bool rotate = keys != Keys::kBaseline;
  const Q4CacheShape shape{1, kKvHeads, kContext, kDim};
  Q4Planes k(shape), v(shape);
  std::vector<float> stored_keys = l.keys, queries = l.queries;
  if (keys == Keys::kSmoothedRotated) {
    std::vector<float> mean(kDim), scale(kDim);
    for (int h = 0; h < kKvHeads; ++h) {
      float* head = stored_keys.data() + static_cast<size_t>(h) * kContext * kDim;
      FitKeySmoothing(head, kPrompt, kDim, kDim, mean.data(), scale.data());
      for (int t = 0; t < kContext; ++t) {
        SmoothKey(head + t * kDim, mean.data(), scale.data(), kDim, head + t * kDim);
      }
      for (int g = 0; g < kGroup; ++g) {
        float* q = queries.data() + static_cast<size_t>(h * kGroup + g) * kDim;
        ScaleQuery(q, scale.data(), kDim, q);
      }
    }
  }
  k.Fill(stored_keys, rotate);
  v.Fill(l.values, false);
  const std::vector<double> exact_k(l.keys.begin(), l.keys.end());
  const std::vector<double> exact_v(l.values.begin(), l.values.end());
  const int start = 0;
  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  const testing::RefShape rs{1, kKvHeads * kGroup, kKvHeads, kDim, kContext, kContext, scale};
  const std::vector<double> ref = ReferenceDecode(rs, l.queries, exact_k, exact_v, &start, false);
  std::vector<double> out;
  if (quantize_values) {
    DecodeAttentionQ4Shape s{1,        kKvHeads * kGroup, kKvHeads, kDim,
                             kContext, kContext,          scale,    rotate};
    std::vector<float> got(l.queries.size());
    DecodeAttentionQ4(s, queries.data(), {k.codes.data(), k.params.data()},
                      {v.codes.data(), v.params.data()}, &start, got.data());
    out.assign(got.begin(), got.end());
  } else {  // keys alone: 4-bit keys, exact values
    out = ReferenceDecode(rs, queries, k.Dequantized(), exact_v, &start, rotate);
  }
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / norm);
}

TEST(AttentionQ4Quality, RotatedAndSmoothedKeysCutTheErrorFromOutlierChannels) {
  std::mt19937 rng(2024);
  double base = 0, rotated = 0, smoothed = 0, base_keys = 0, rotated_keys = 0, smoothed_keys = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const SyntheticLayer l = MakeLayer(rng);
    base += OutputError(l, Keys::kBaseline, true) / kTrials;
    rotated += OutputError(l, Keys::kRotated, true) / kTrials;
    smoothed += OutputError(l, Keys::kSmoothedRotated, true) / kTrials;
    base_keys += OutputError(l, Keys::kBaseline, false) / kTrials;
    rotated_keys += OutputError(l, Keys::kRotated, false) / kTrials;
    smoothed_keys += OutputError(l, Keys::kSmoothedRotated, false) / kTrials;
  }
  std::printf(
      "relative error of attention output vs fp64, %d trials, context %d:\n"
      "  4-bit K and V: baseline %.4f  rotated %.4f  smoothed+rotated %.4f\n"
      "  4-bit K only:  baseline %.4f  rotated %.4f  smoothed+rotated %.4f\n",
      kTrials, kContext, base, rotated, smoothed, base_keys, rotated_keys, smoothed_keys);
  RecordProperty("baseline_error", std::to_string(base));
  RecordProperty("rotated_error", std::to_string(rotated));
  RecordProperty("smoothed_rotated_error", std::to_string(smoothed));
  EXPECT_LE(rotated, 0.75 * base);
  EXPECT_LE(smoothed, 0.85 * rotated);  // measured 0.73
  EXPECT_LE(smoothed_keys, 0.85 * rotated_keys);  // measured 0.71
}

}  // namespace
}  // namespace strata::kernels::cpu
