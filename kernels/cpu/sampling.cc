#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <cmath>

namespace strata::kernels::cpu {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int32_t Argmax(const float* logits, int vocab) {
  int32_t best = 0;
  for (int i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

}  // namespace

double UniformDraw(uint64_t seed, uint64_t step) {
  const uint64_t bits = SplitMix64(SplitMix64(seed) ^ (step * 0xD1B54A32D192ED03ull));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

int32_t SampleToken(const float* logits, int vocab, const SamplingParams& params, uint64_t step,
                    std::vector<std::pair<float, int32_t>>& scratch) {
  if (params.temperature <= 0.0f || params.top_k == 1) return Argmax(logits, vocab);
  scratch.resize(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) scratch[i] = {logits[i] / params.temperature, i};
  // Most likely first; ties broken by id so the order is fully determined.
  auto more_likely = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = scratch.size();
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < keep) {
    keep = static_cast<size_t>(params.top_k);
    std::partial_sort(scratch.begin(), scratch.begin() + keep, scratch.end(), more_likely);
  } else {
    std::sort(scratch.begin(), scratch.end(), more_likely);
  }
  const double max_logit = scratch[0].first;
  std::vector<double> probs(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp(static_cast<double>(scratch[i].first) - max_logit);
    total += probs[i];
  }
  if (params.top_p < 1.0f) {
    // Keep the smallest prefix whose mass reaches top_p (the crossing token included).
    double mass = 0.0;
    size_t cut = keep;
    for (size_t i = 0; i < keep; ++i) {
      mass += probs[i] / total;
      if (mass >= params.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += probs[i];
  }
  const double target = UniformDraw(params.seed, step) * total;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs[i];
    if (target < acc) return scratch[i].second;
  }
  return scratch[keep - 1].second;
}

double LogProbability(const float* logits, int vocab, int32_t token) {
  const float max = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  return logits[token] - (max + std::log(sum));
}

}  // namespace strata::kernels::cpu
