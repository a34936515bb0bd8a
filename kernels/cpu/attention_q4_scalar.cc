// The portable path of DecodeAttentionQ4 (see attention_q4.h): any head size the format allows,
// a two-pass softmax, one token at a time, and the same algebra as the SIMD paths.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention_q4_paths.h"
#include "kernels/cpu/half.h"
#include "kernels/kv_q4_format.h"

namespace strata::kernels::cpu::q4 {

void AttendScalar(const Work& w) {
  const int d = w.head_dim;
  // Group gi's bytes, from byte 32 gi, hold its first half of elements (from element 64 gi) in
  // their low nibbles and the second half in their high ones (kv_q4_format.h; the last group is
  // shorter at head_dim 80 and 96).
  const int groups = Q4Groups(d);
  std::vector<float> scores(static_cast<size_t>(w.heads) * w.len);
  // Keys by channel: per key group, the query times the group's channel scales (qg) and
  // q·minimums per head (bias), so that a score is qg·n + bias.
  const bool by_channel = w.key_phase >= 0;
  std::vector<float> qg, bias;
  if (by_channel) {
    qg.resize(static_cast<size_t>(w.heads) * d);
    bias.resize(static_cast<size_t>(w.heads));
  }
  int group = -1;
  for (int t = 0; t < w.len; ++t) {
    const uint8_t* c = w.k_codes + static_cast<long>(t) * Q4CodeBytes(d);
    const uint16_t* p = w.k_params + static_cast<long>(t) * Q4ParamHalves(d);
    if (by_channel && (t + w.key_phase) / kQ4ChannelGroup != group) {
      group = (t + w.key_phase) / kQ4ChannelGroup;
      const uint16_t* gp = w.k_params + (static_cast<long>(group) * kQ4ChannelGroup - w.key_phase) *
                                            Q4ChannelParamHalves(d);
      for (int h = 0; h < w.heads; ++h) {
        float dot = 0.0f;
        for (int x = 0; x < d; ++x) {
          qg[static_cast<size_t>(h) * d + x] = w.q[h * d + x] * HalfBitsToFloat(gp[2 * x]);
          dot += w.q[h * d + x] * HalfBitsToFloat(gp[2 * x + 1]);
        }
        bias[static_cast<size_t>(h)] = dot;
      }
    }
    for (int h = 0; h < w.heads; ++h) {
      const float* q = by_channel ? qg.data() + static_cast<size_t>(h) * d : w.q + h * d;
      float score = by_channel ? bias[static_cast<size_t>(h)] : 0.0f;
      for (int gi = 0; gi < groups; ++gi) {
        const int half = Q4GroupSize(d, gi) / 2;
        const uint8_t* cg = c + gi * kQ4MaxGroup / 2;
        const float* q_lo = q + gi * kQ4MaxGroup;
        const float* q_hi = q_lo + half;
        float dot = 0.0f;
        for (int j = 0; j < half; ++j) {
          dot += q_lo[j] * static_cast<float>(cg[j] & 0xF) +
                 q_hi[j] * static_cast<float>(cg[j] >> 4);
        }
        score += by_channel ? dot
                            : HalfBitsToFloat(p[2 * gi]) * dot +
                                  HalfBitsToFloat(p[2 * gi + 1]) * w.qsum[h * groups + gi];
      }
      scores[static_cast<size_t>(h) * w.len + t] = score;
    }
  }
  for (int h = 0; h < w.heads; ++h) {
    float* s = scores.data() + static_cast<size_t>(h) * w.len;
    const float max_score = *std::max_element(s, s + w.len);
    float sum = 0.0f;
    for (int t = 0; t < w.len; ++t) {
      s[t] = std::exp(s[t] - max_score);
      sum += s[t];
    }
    const float inv = 1.0f / sum;
    for (int t = 0; t < w.len; ++t) s[t] *= inv;
    if (w.lse != nullptr) w.lse[h] = max_score + std::log(sum);
  }
  std::memset(w.out, 0, sizeof(float) * w.heads * d);
  for (int t = 0; t < w.len; ++t) {
    const uint8_t* c = w.v_codes + static_cast<long>(t) * Q4CodeBytes(d);
    const uint16_t* p = w.v_params + static_cast<long>(t) * Q4ParamHalves(d);
    for (int h = 0; h < w.heads; ++h) {
      const float prob = scores[static_cast<size_t>(h) * w.len + t];
      float* o = w.out + h * d;
      for (int gi = 0; gi < groups; ++gi) {
        const float ws = prob * HalfBitsToFloat(p[2 * gi]);
        const float wm = prob * HalfBitsToFloat(p[2 * gi + 1]);
        const int half = Q4GroupSize(d, gi) / 2;
        const uint8_t* cg = c + gi * kQ4MaxGroup / 2;
        float* o_lo = o + gi * kQ4MaxGroup;
        float* o_hi = o_lo + half;
        for (int j = 0; j < half; ++j) {
          o_lo[j] += ws * static_cast<float>(cg[j] & 0xF) + wm;
          o_hi[j] += ws * static_cast<float>(cg[j] >> 4) + wm;
        }
      }
    }
  }
}

}  // namespace strata::kernels::cpu::q4
