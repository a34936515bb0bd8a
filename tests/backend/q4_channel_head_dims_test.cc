// The default 4-bit cache's CUDA writers and decode attention at every head size they take (64, 80,
// 96, 128 and 256) against a host reference written from kernels/kv_q4_format.h alone: the key
// groups, values and exact rows byte for byte, decode attention by normalised error (< 5e-3, fp16
// MMA operands) against fp64 over the dequantized cache. At 64, 128 and 256 it meets
// attention_decode_q4c_test.cc, which holds the same kernels to the CPU kernels, and at every size
// cuda_kv_q4_backend_test.cc holds the CUDA backend to the CPU backend. Lengths straddle every key group boundary;
// planes start poisoned (NaN), so a read of an unwritten slot shows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/kv_q4_format.h"
#include "src/backend/cuda/ops.h"
#include "tests/backend/gpu_test_util.h"

namespace strata::testing {
namespace {

using cuda_ops::Q4ChannelRow;
constexpr int kC = kernels::kQ4ChannelGroup;

// Where channel c of a token sits in its codes (kernels/kv_q4_format.h): group i = c / 64 of g
// channels holds 64i + j in the low nibble of byte 32i + j and 64i + g/2 + j in its high nibble.
struct Nibble {
  int byte;
  int shift;
};
Nibble NibbleOf(int c, int d) {
  const int i = c / 64;
  const int half = std::min(64, d - 64 * i) / 2;
  const int j = c - 64 * i;
  return j < half ? Nibble{32 * i + j, 0} : Nibble{32 * i + j - half, 4};
}

// The format's rule for one group of values: {scale, minimum} fp16 bits and the codes.
void FitGroup(const std::vector<float>& x, uint16_t* scale_bits, uint16_t* min_bits,
              std::vector<int>* codes) {
  float lo = INFINITY, hi = -INFINITY;
  for (float v : x) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (x.empty()) lo = hi = 0.0f;
  *scale_bits = kernels::cpu::FloatToHalfBits((hi - lo) / 15.0f);
  *min_bits = kernels::cpu::FloatToHalfBits(lo);
  const float scale = kernels::cpu::HalfBitsToFloat(*scale_bits);
  const float minimum = kernels::cpu::HalfBitsToFloat(*min_bits);
  codes->assign(x.size(), 0);
  if (scale == 0.0f) return;
  for (size_t i = 0; i < x.size(); ++i) {
    (*codes)[i] =
        static_cast<int>(std::clamp(std::nearbyint((x[i] - minimum) / scale), 0.0f, 15.0f));
  }
}

struct Case {
  int head_dim;
  int sink;
  int window;
  int context;
  int batch = 3;
  int kv_heads = 2;
};

class Q4ChannelHeadDimsTest : public GpuTest {
 protected:
  // One write of `context` tokens (sequence b left-padded to start[b]), then one decode step at
  // cache_len = context with `group` query heads per KV head.
  void Run(const Case& c, const std::vector<int>& groups) {
    const uint64_t seed = TestSeed() + c.context * 131 + c.head_dim * 7 + c.sink + c.window * 3;
    SCOPED_TRACE("d=" + std::to_string(c.head_dim) + " sink=" + std::to_string(c.sink) +
                 " window=" + std::to_string(c.window) + " context=" + std::to_string(c.context) +
                 " seed=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const int d = c.head_dim, n = c.context, rows = c.batch * c.kv_heads;
    const int stride = (n + 1) / 2 * 2;  // even, so that every row's key params stay 8-byte aligned
    const int code_bytes = kernels::Q4CodeBytes(d);
    const int kp = kernels::Q4ChannelParamHalves(d), vp = kernels::Q4ParamHalves(d);
    const int exact_rows = c.sink + c.window;
    std::vector<int> start(c.batch);
    for (int b = 0; b < c.batch; ++b) start[b] = std::min(n, 7 * b);

    // Keys whose channels differ in mean and spread, values plain.
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> mean(d), spread(d);
    for (int x = 0; x < d; ++x) {
      mean[x] = x % 9 == 0 ? 10.0f * normal(rng) : 0.5f * normal(rng);
      spread[x] = x % 7 == 0 ? 4.0f : 0.3f;
    }
    const size_t row_floats = size_t{1} * c.batch * n * c.kv_heads * d;
    std::vector<float> k(row_floats), v = RandomNormals(rng, row_floats);
    for (size_t i = 0; i < row_floats; ++i) k[i] = mean[i % d] + spread[i % d] * normal(rng);
    auto at = [&](const std::vector<float>& x, int b, int slot, int h) {
      return x.data() + ((size_t{1} * b * n + slot) * c.kv_heads + h) * d;
    };

    DeviceArray<uint8_t> k_codes(size_t{1} * rows * stride * code_bytes), v_codes(k_codes.size());
    DeviceArray<uint16_t> k_params(size_t{1} * rows * stride * kp),
        v_params(size_t{1} * rows * stride * vp);
    DeviceArray<float> k_exact(size_t{1} * rows * exact_rows * d), v_exact(k_exact.size());
    for (auto* a : {&k_codes, &v_codes}) a->Poison();
    for (auto* a : {&k_params, &v_params}) a->Poison();
    for (auto* a : {&k_exact, &v_exact}) a->Poison();
    std::vector<Q4ChannelRow> table(rows);
    for (int r = 0; r < rows; ++r) {
      table[r].k_codes = k_codes.get() + size_t{1} * r * stride * code_bytes;
      table[r].v_codes = v_codes.get() + size_t{1} * r * stride * code_bytes;
      table[r].k_params = k_params.get() + size_t{1} * r * stride * kp;
      table[r].v_params = v_params.get() + size_t{1} * r * stride * vp;
      table[r].k_exact = k_exact.get() + size_t{1} * r * exact_rows * d;
      table[r].v_exact = v_exact.get() + size_t{1} * r * exact_rows * d;
      table[r].stride = stride;
    }
    DeviceArray<Q4ChannelRow> table_dev(table);
    DeviceArray<int> start_dev(start);
    DeviceArray<float> k_dev(k), v_dev(v);
    ASSERT_EQ(
        cuda_ops::WriteKeyGroupsQ4Channel(c.batch, c.kv_heads, d, c.sink, c.window, start_dev.get(),
                                          0, n, k_dev.get(), table_dev.get(), nullptr),
        cudaSuccess);
    ASSERT_EQ(cuda_ops::WriteExactRowsQ4Channel(c.batch, c.kv_heads, d, c.sink, c.window,
                                                k_dev.get(), v_dev.get(), n, 0, start_dev.get(),
                                                false, table_dev.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(cuda_ops::WriteValueRowsQ4Channel(c.batch, c.kv_heads, d, v_dev.get(), n, 0,
                                                table_dev.get(), nullptr),
              cudaSuccess);
    const std::vector<uint8_t> got_kc = k_codes.Download(), got_vc = v_codes.Download();
    const std::vector<uint16_t> got_kp = k_params.Download(), got_vp = v_params.Download();
    const std::vector<float> got_ke = k_exact.Download(), got_ve = v_exact.Download();

    // The reference: every byte the writers owe, and the dequantized keys and values attended.
    std::vector<float> keys(size_t{1} * rows * n * d), values(keys.size());
    std::vector<float> x;
    std::vector<int> q;
    for (int b = 0; b < c.batch; ++b) {
      const int first = start[b];
      const int quant_lo = std::min(first + c.sink, n);
      const int quant_hi = std::max(quant_lo, n - c.window);
      for (int h = 0; h < c.kv_heads; ++h) {
        const int r = b * c.kv_heads + h;
        float* kr = keys.data() + size_t{1} * r * n * d;
        float* vr = values.data() + size_t{1} * r * n * d;
        for (int slot = first; slot < n; ++slot) {  // exact: the real keys and values
          std::copy_n(at(k, b, slot, h), d, kr + size_t{1} * slot * d);
          std::copy_n(at(v, b, slot, h), d, vr + size_t{1} * slot * d);
        }
        for (int g = 0; (g + 1) * kC <= n - first; ++g) {  // key groups, channel by channel
          const int slot0 = first + g * kC;
          const uint16_t* p = got_kp.data() + (size_t{1} * r * stride + slot0) * kp;
          for (int ch = 0; ch < d; ++ch) {
            x.clear();
            for (int j = 0; j < kC; ++j) {
              if (g * kC + j >= c.sink) x.push_back(at(k, b, slot0 + j, h)[ch]);
            }
            uint16_t scale, minimum;
            FitGroup(x, &scale, &minimum, &q);
            ASSERT_EQ(p[2 * ch], scale) << "row " << r << " group " << g << " channel " << ch;
            ASSERT_EQ(p[2 * ch + 1], minimum) << "row " << r << " group " << g;
            const Nibble nb = NibbleOf(ch, d);
            for (int j = 0, fitted = 0; j < kC; ++j) {
              const int code = g * kC + j >= c.sink ? q[fitted++] : 0;
              const int slot = slot0 + j;
              const uint8_t byte = got_kc[(size_t{1} * r * stride + slot) * code_bytes + nb.byte];
              ASSERT_EQ((byte >> nb.shift) & 0xF, code) << "slot " << slot << " channel " << ch;
              if (slot >= quant_lo && slot < quant_hi) {
                kr[size_t{1} * slot * d + ch] = code * kernels::cpu::HalfBitsToFloat(scale) +
                                                kernels::cpu::HalfBitsToFloat(minimum);
              }
            }
          }
          for (int i = 2 * d; i < kC * kp; ++i) ASSERT_EQ(p[i], 0) << "zero padding params";
        }
        for (int slot = 0; slot < n; ++slot) {  // values, token by token and group by group
          const float* src = at(v, b, slot, h);
          const uint8_t* codes = got_vc.data() + (size_t{1} * r * stride + slot) * code_bytes;
          const uint16_t* p = got_vp.data() + (size_t{1} * r * stride + slot) * vp;
          for (int i = 0; 64 * i < d; ++i) {
            const int g = std::min(64, d - 64 * i);
            x.assign(src + 64 * i, src + 64 * i + g);
            uint16_t scale, minimum;
            FitGroup(x, &scale, &minimum, &q);
            ASSERT_EQ(p[2 * i], scale) << "slot " << slot << " value group " << i;
            ASSERT_EQ(p[2 * i + 1], minimum) << "slot " << slot << " value group " << i;
            for (int j = 0; j < g; ++j) {
              const Nibble nb = NibbleOf(64 * i + j, d);
              ASSERT_EQ((codes[nb.byte] >> nb.shift) & 0xF, q[j]) << "slot " << slot;
              if (slot >= quant_lo && slot < quant_hi) {
                vr[size_t{1} * slot * d + 64 * i + j] =
                    q[j] * kernels::cpu::HalfBitsToFloat(scale) +
                    kernels::cpu::HalfBitsToFloat(minimum);
              }
            }
          }
        }
        for (int token = 0; token < n - first; ++token) {  // exact rows: sink, then the window
          const bool sink = token < c.sink;
          if (!sink && token < n - first - c.window) continue;
          const int row = sink ? token : c.sink + token % c.window;
          const size_t off = (size_t{1} * r * exact_rows + row) * d;
          for (int i = 0; i < d; ++i) {
            ASSERT_EQ(got_ke[off + i], at(k, b, first + token, h)[i]) << "exact token " << token;
            ASSERT_EQ(got_ve[off + i], at(v, b, first + token, h)[i]) << "exact token " << token;
          }
        }
      }
    }

    for (int group : groups) {
      SCOPED_TRACE("group " + std::to_string(group));
      const int heads = group * c.kv_heads;
      cuda_ops::Q4ChannelDecodeShape s;
      s.batch = c.batch;
      s.num_heads = heads;
      s.num_kv_heads = c.kv_heads;
      s.head_dim = d;
      s.max_len = n;
      s.cache_len = n;
      s.sink = c.sink;
      s.window = c.window;
      s.scale = 1.0f / std::sqrt(static_cast<float>(d));
      const std::vector<float> query = RandomNormals(rng, size_t{1} * c.batch * heads * d);
      cuda_ops::Q4ChannelDecodePlan plan;
      ASSERT_EQ(cuda_ops::PlanDecodeAttentionQ4Channel(s, &plan), cudaSuccess);
      DeviceArray<uint8_t> workspace(plan.workspace_bytes);
      DeviceArray<float> q_dev(query), out(query.size());
      out.Poison();
      ASSERT_EQ(cuda_ops::DecodeAttentionQ4Channel(s, q_dev.get(), table_dev.get(), start_dev.get(),
                                                   plan, workspace.get(), out.get(), nullptr),
                cudaSuccess);
      const std::vector<float> got = out.Download();
      std::vector<double> ref(query.size(), 0.0);
      for (int b = 0; b < c.batch; ++b) {
        for (int head = 0; head < heads; ++head) {
          const int r = b * c.kv_heads + head / group;
          const float* qh = query.data() + (size_t{1} * b * heads + head) * d;
          std::vector<double> score;
          double top = -INFINITY;
          for (int slot = start[b]; slot < n; ++slot) {
            double dot = 0.0;
            for (int i = 0; i < d; ++i)
              dot += double{qh[i]} * keys[(size_t{1} * r * n + slot) * d + i];
            score.push_back(dot * s.scale);
            top = std::max(top, score.back());
          }
          double sum = 0.0;
          for (double& e : score) sum += (e = std::exp(e - top));
          double* o = ref.data() + (size_t{1} * b * heads + head) * d;
          for (int slot = start[b]; slot < n; ++slot) {
            const double w = score[slot - start[b]] / sum;
            for (int i = 0; i < d; ++i) o[i] += w * values[(size_t{1} * r * n + slot) * d + i];
          }
        }
      }
      EXPECT_LT(NormalizedError(ref, got), 5e-3);
    }
  }
};

TEST_F(Q4ChannelHeadDimsTest, WritersAndDecodeMatchTheFormatAroundGroupBoundaries) {
  for (int d : {64, 80, 96, 128, 256}) {
    for (int sink : {0, 1}) {
      for (int window : {32, 64}) {
        for (int context : {1, 31, 32, 33, 63, 64, 65, 97, 300}) {
          Run({.head_dim = d, .sink = sink, .window = window, .context = context}, {1, 4, 8});
        }
      }
    }
  }
}

// One sequence long enough that the plan splits the context (the merge kernel runs).
TEST_F(Q4ChannelHeadDimsTest, OneLongSequenceSplitsOverTheContext) {
  for (int d : {80, 96}) {
    Run({.head_dim = d, .sink = 1, .window = 32, .context = 9000, .batch = 1}, {1, 8});
  }
}

// Rotated keys need a power-of-two head_dim: refused at 80 and 96, on any machine.
TEST(Q4ChannelHeadDimsRefusalTest, RotatedKeysNeedAPowerOfTwo) {
  for (int d : {80, 96}) {
    EXPECT_TRUE(cuda_ops::Q4ChannelHeadDimSupported(d));
    cuda_ops::Q4ChannelDecodeShape s;
    s.batch = 1;
    s.num_heads = 1;
    s.num_kv_heads = 1;
    s.head_dim = d;
    s.max_len = 64;
    s.cache_len = 64;
    s.window = 32;
    s.keys_rotated = true;
    cuda_ops::Q4ChannelDecodePlan plan;
    EXPECT_EQ(cuda_ops::PlanDecodeAttentionQ4Channel(s, &plan), cudaErrorInvalidValue) << d;
    EXPECT_EQ(cuda_ops::WriteExactRowsQ4Channel(1, 1, d, 1, 32, nullptr, nullptr, 1, 0, nullptr,
                                                true, nullptr, nullptr),
              cudaErrorInvalidValue)
        << d;
  }
}

}  // namespace
}  // namespace strata::testing
