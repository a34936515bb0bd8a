// Test helpers for the 4-bit KV cache: filling a cache from fp32 rows, reading it back in fp64,
// and fp64 reference decode attention (the masking rules of kernels/cpu/attention.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/kv_q4.h"

namespace strata::kernels::cpu::testing {

// One layer's K or V planes plus its shape.
struct Q4Planes {
  Q4CacheShape shape;
  std::vector<uint8_t> codes;
  std::vector<uint16_t> params;

  explicit Q4Planes(const Q4CacheShape& s)
      : shape(s),
        codes(static_cast<size_t>(s.batch) * s.num_kv_heads * s.max_len * Q4CodeBytes(s.head_dim)),
        params(static_cast<size_t>(s.batch) * s.num_kv_heads * s.max_len *
               Q4ParamHalves(s.head_dim)) {}

  // Quantizes cache[batch, kv_heads, max_len, head_dim] (fp32, head-major) into the planes.
  void Fill(const std::vector<float>& cache, bool rotate) {
    const Q4CacheShape& s = shape;
    const size_t d = static_cast<size_t>(s.head_dim);
    std::vector<float> rows(static_cast<size_t>(s.batch) * s.num_kv_heads * d);
    for (int t = 0; t < s.max_len; ++t) {  // one token at a time, as decode steps append
      for (int b = 0; b < s.batch; ++b) {
        for (int h = 0; h < s.num_kv_heads; ++h) {
          const size_t src = ((static_cast<size_t>(b) * s.num_kv_heads + h) * s.max_len + t) * d;
          std::copy(cache.begin() + src, cache.begin() + src + d,
                    rows.begin() + (static_cast<size_t>(b) * s.num_kv_heads + h) * d);
        }
      }
      WriteQ4Cache(s, rows.data(), 1, t, rotate, codes.data(), params.data());
    }
  }

  // The dequantized cache, head-major, in fp64: code * scale + minimum computed exactly.
  std::vector<double> Dequantized() const {
    const int d = shape.head_dim;
    const size_t rows = codes.size() / Q4CodeBytes(d);
    std::vector<double> out(rows * d);
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* c = codes.data() + r * Q4CodeBytes(d);
      const uint16_t* p = params.data() + r * Q4ParamHalves(d);
      for (int i = 0; i < d; ++i) {
        // Group `group` of g elements (64, or the shorter last one) starts at element 64 * group
        // and byte 32 * group; byte j holds its element j low and j + g / 2 high.
        const int group = i / 64, j = i % 64;
        const int g = std::min(64, d - 64 * group);
        const uint8_t byte = c[group * 32 + j % (g / 2)];
        const int code = j < g / 2 ? (byte & 0xF) : (byte >> 4);
        const double scale = HalfBitsToFloat(p[2 * group]);
        const double minimum = HalfBitsToFloat(p[2 * group + 1]);
        out[r * d + i] = code * scale + minimum;
      }
    }
    return out;
  }
};

// Normalised Walsh–Hadamard transform of x[n] in fp64 (Sylvester order).
inline void HadamardF64(double* x, int n) {
  for (int len = 1; len < n; len <<= 1) {
    for (int i = 0; i < n; i += 2 * len) {
      for (int j = i; j < i + len; ++j) {
        const double a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
    }
  }
  for (int i = 0; i < n; ++i) x[i] /= std::sqrt(static_cast<double>(n));
}

struct RefShape {
  int batch, num_heads, num_kv_heads, head_dim, max_len, cache_len;
  double scale;
};

// out[batch, num_heads, head_dim] in fp64 for the query at slot cache_len - 1 over head-major
// caches k, v[batch, kv_heads, max_len, head_dim]. `rotate_q` rotates each query first.
inline std::vector<double> ReferenceDecode(const RefShape& s, const std::vector<float>& q,
                                           const std::vector<double>& k,
                                           const std::vector<double>& v, const int* start,
                                           bool rotate_q) {
  const int d = s.head_dim, group = s.num_heads / s.num_kv_heads;
  std::vector<double> out(static_cast<size_t>(s.batch) * s.num_heads * d, 0.0);
  std::vector<double> qd(static_cast<size_t>(d)), p(static_cast<size_t>(s.cache_len));
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.num_heads; ++h) {
      if (s.cache_len - 1 < start[b]) continue;
      const size_t row = static_cast<size_t>(b) * s.num_heads + h;
      for (int i = 0; i < d; ++i) qd[i] = q[row * d + i];
      if (rotate_q) HadamardF64(qd.data(), d);
      const size_t base = (static_cast<size_t>(b) * s.num_kv_heads + h / group) * s.max_len;
      double max_score = -INFINITY;
      for (int t = start[b]; t < s.cache_len; ++t) {
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += qd[i] * k[(base + t) * d + i];
        p[t] = dot * s.scale;
        max_score = std::max(max_score, p[t]);
      }
      double sum = 0;
      for (int t = start[b]; t < s.cache_len; ++t) sum += (p[t] = std::exp(p[t] - max_score));
      for (int t = start[b]; t < s.cache_len; ++t) {
        for (int i = 0; i < d; ++i) out[row * d + i] += p[t] / sum * v[(base + t) * d + i];
      }
    }
  }
  return out;
}

// Largest over (sequence, head) of |out - ref| / |ref| (2-norms over head_dim); a row whose
// reference is zero (a padded query) must be exactly zero and counts as 0 or infinity.
inline double MaxRelativeError(const std::vector<float>& out, const std::vector<double>& ref,
                               int head_dim) {
  double worst = 0;
  for (size_t r = 0; r < ref.size() / head_dim; ++r) {
    double err = 0, norm = 0;
    for (int i = 0; i < head_dim; ++i) {
      const double e = out[r * head_dim + i] - ref[r * head_dim + i];
      err += e * e;
      norm += ref[r * head_dim + i] * ref[r * head_dim + i];
    }
    worst = std::max(worst, norm == 0 ? (err == 0 ? 0.0 : INFINITY) : std::sqrt(err / norm));
  }
  return worst;
}

}  // namespace strata::kernels::cpu::testing
