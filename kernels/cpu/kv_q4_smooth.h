// Exact key smoothing for the 4-bit KV cache: per (sequence, KV head), keys are stored as
// (k - m) / s instead of k, channel by channel, and queries are scaled by s. Then
// (q∘s)·((k - m) / s) = q·k - q·m, and q·m is the same for every key a query sees, so softmax
// gives the same weights: the transform is exact, the cache format and the attention kernel are
// unchanged. It centres each channel (a channel with a large mean no longer stretches every
// token's group range) and partly equalizes the channels' spreads before the per-token
// quantization, a cheap stand-in for per-channel key quantization (KIVI, KVQuant).
// m and s come from a sample of the sequence's own keys (its prompt). Rotating the smoothed keys
// (hadamard.h) composes: the kernel rotates the scaled query.
#pragma once

namespace strata::kernels::cpu {

// From `count` key vectors keys[i * stride, +head_dim): mean[c] = the channel's mean and
// scale[c] = sqrt(the channel's standard deviation about it), normalized to a geometric mean of 1
// (half-way equalization, which measured better than full: docs/PERFORMANCE.md). Fewer than 2
// keys give the identity (mean 0, scale 1). REQUIRES: count >= 0.
void FitKeySmoothing(const float* keys, long count, long stride, int head_dim, float* mean,
                     float* scale);

// out[c] = (k[c] - mean[c]) / scale[c] for one key vector; out may be k.
void SmoothKey(const float* k, const float* mean, const float* scale, int head_dim, float* out);
// k[c] = k[c] * scale[c] + mean[c]: the inverse, for reading a smoothed key back.
void UnsmoothKey(const float* mean, const float* scale, int head_dim, float* k);
// out[c] = q[c] * scale[c]: the query that goes with smoothed keys; out may be q.
void ScaleQuery(const float* q, const float* scale, int head_dim, float* out);

}  // namespace strata::kernels::cpu
