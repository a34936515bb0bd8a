// The default 4-bit cache on CUDA (keys by channel, exact sink and window rows) against the CPU
// kernels over the same random inputs: the writers byte for byte (key groups, values, exact rows)
// and decode attention by normalised error (< 5e-3: fp16 MMA operands against the CPU's fp32).
// Rows live at shuffled places of one poisoned arena, each with its own stride, as the engine's
// tiers keep them; slots no kernel may read hold NaN. Lengths straddle every group boundary.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cpu/attention_q4.h"
#include "kernels/cpu/kv_q4.h"
#include "kernels/cpu/kv_q4_channel.h"
#include "kernels/cpu/kv_q4_exact.h"
#include "kernels/kv_q4_format.h"
#include "src/backend/cuda/ops.h"
#include "tests/backend/gpu_test_util.h"

namespace strata::testing {
namespace {

using cuda_ops::Q4ChannelRow;
constexpr int kC = kernels::kQ4ChannelGroup;

struct Case {
  int head_dim = 64;
  int kv_heads = 2;
  int batch = 3;
  int sink = 1;
  int window = 32;
  int context = 40;
  bool rotate_exact = false;  // exact keys rotated (checked for bytes only, no decode)
};

std::string Describe(const Case& c) {
  return "d=" + std::to_string(c.head_dim) + " kv=" + std::to_string(c.kv_heads) +
         " batch=" + std::to_string(c.batch) + " sink=" + std::to_string(c.sink) +
         " window=" + std::to_string(c.window) + " context=" + std::to_string(c.context) +
         " seed=" + std::to_string(TestSeed());
}

// The CPU twin: contiguous planes [rows, max_len, ...] and exact rows [rows, sink + window, d].
struct CpuCache {
  std::vector<uint8_t> k_codes, v_codes;
  std::vector<uint16_t> k_params, v_params;
  std::vector<float> k_exact, v_exact;
};

// One row's planes inside the device arena.
struct RowPlaces {
  size_t k_codes, k_params, v_codes, v_params, k_exact, v_exact;
  int stride;
};

class Q4ChannelTest : public GpuTest {
 protected:
  void Run(const Case& c, const std::vector<int>& groups) {
    SCOPED_TRACE(Describe(c));
    std::mt19937_64 rng(TestSeed() + c.context * 131 + c.head_dim * 7 + c.sink + c.window * 3);
    const int d = c.head_dim;
    const int rows = c.batch * c.kv_heads;
    const int max_len = c.context + 5;
    const int exact_rows = c.sink + c.window;
    const int code_bytes = kernels::Q4CodeBytes(d);
    const int kp_halves = kernels::Q4ChannelParamHalves(d);
    const int vp_halves = kernels::Q4ParamHalves(d);
    // Starts: unpadded, left-padded, all padding, then random.
    std::vector<int> start(c.batch);
    for (int b = 0; b < c.batch; ++b) {
      start[b] = b == 0   ? 0
                 : b == 1 ? (c.context - 1) / 2
                 : b == 2 ? c.context
                          : static_cast<int>(rng() % (c.context + 1));
    }

    // Device rows at shuffled places with gaps, strides differing by row.
    std::vector<RowPlaces> places(rows);
    std::vector<int> order(rows);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    size_t arena_bytes = 0;
    auto take = [&](size_t bytes) {
      const size_t at = arena_bytes;
      arena_bytes += (bytes + 255) / 256 * 256 + 256 * (rng() % 3);
      return at;
    };
    for (int r : order) {
      RowPlaces& p = places[r];
      p.stride = max_len + 32 * (r % 3);
      p.v_params = take(size_t{2} * p.stride * vp_halves);
      p.k_codes = take(size_t{1} * p.stride * code_bytes);
      p.k_exact = take(size_t{4} * exact_rows * d);
      p.v_codes = take(size_t{1} * p.stride * code_bytes);
      p.k_params = take(size_t{2} * p.stride * kp_halves);
      p.v_exact = take(size_t{4} * exact_rows * d);
    }
    DeviceArray<uint8_t> arena(arena_bytes);
    arena.Poison();
    std::vector<Q4ChannelRow> table(rows);
    for (int r = 0; r < rows; ++r) {
      uint8_t* base = arena.get();
      table[r].k_codes = base + places[r].k_codes;
      table[r].k_params = reinterpret_cast<uint16_t*>(base + places[r].k_params);
      table[r].v_codes = base + places[r].v_codes;
      table[r].v_params = reinterpret_cast<uint16_t*>(base + places[r].v_params);
      table[r].k_exact = reinterpret_cast<float*>(base + places[r].k_exact);
      table[r].v_exact = reinterpret_cast<float*>(base + places[r].v_exact);
      table[r].stride = places[r].stride;
    }
    DeviceArray<Q4ChannelRow> table_dev(table);
    DeviceArray<int> start_dev(start);

    CpuCache cpu;
    cpu.k_codes.assign(size_t{1} * rows * max_len * code_bytes, 0);
    cpu.v_codes.assign(cpu.k_codes.size(), 0);
    cpu.k_params.assign(size_t{1} * rows * max_len * kp_halves, 0);
    cpu.v_params.assign(size_t{1} * rows * max_len * vp_halves, 0);
    cpu.k_exact.assign(size_t{1} * rows * exact_rows * d, 0.0f);
    cpu.v_exact.assign(cpu.k_exact.size(), 0.0f);

    // Keys whose channels differ in mean and spread by two orders of magnitude, as real keys do.
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> mean(d), spread(d);
    for (int x = 0; x < d; ++x) {
      mean[x] = x % 9 == 0 ? 20.0f * normal(rng) : 0.5f * normal(rng);
      spread[x] = x % 7 == 0 ? 8.0f : 0.3f;
    }
    // A prompt, then single decode steps, as the engine writes them.
    std::vector<int> writes;
    const int prompt = c.context > 4 ? c.context - 3 : c.context;
    writes.push_back(prompt);
    for (int t = prompt; t < c.context; ++t) writes.push_back(1);
    int slot = 0;
    for (int n : writes) {
      const size_t floats = size_t{1} * c.batch * n * c.kv_heads * d;
      std::vector<float> k_new(floats), v_new(floats);
      for (size_t i = 0; i < floats; ++i) {
        k_new[i] = mean[i % d] + spread[i % d] * normal(rng);
        v_new[i] = 0.5f + normal(rng);
      }
      // CPU: key groups (before the exact rows take this write), values, exact rows.
      for (int r = 0; r < rows; ++r) {
        const int b = r / c.kv_heads, h = r % c.kv_heads;
        kernels::cpu::WriteKeyGroupsByChannel(
            d, c.sink, c.window, start[b], slot, n,
            k_new.data() + (size_t{1} * b * n * c.kv_heads + h) * d, long{c.kv_heads} * d,
            cpu.k_exact.data() + size_t{1} * r * exact_rows * d,
            cpu.k_codes.data() + size_t{1} * r * max_len * code_bytes,
            cpu.k_params.data() + size_t{1} * r * max_len * kp_halves);
      }
      kernels::cpu::WriteQ4Cache({c.batch, c.kv_heads, max_len, d}, v_new.data(), n, slot, false,
                                 cpu.v_codes.data(), cpu.v_params.data());
      kernels::cpu::WriteExactRows(c.batch, c.kv_heads, d, c.sink, c.window, k_new.data(),
                                   v_new.data(), n, slot, start.data(), c.rotate_exact,
                                   cpu.k_exact.data(), cpu.v_exact.data());
      // CUDA, in the same order.
      DeviceArray<float> k_dev(k_new), v_dev(v_new);
      ASSERT_EQ(cuda_ops::WriteKeyGroupsQ4Channel(c.batch, c.kv_heads, d, c.sink, c.window,
                                                  start_dev.get(), slot, n, k_dev.get(),
                                                  table_dev.get(), nullptr),
                cudaSuccess);
      ASSERT_EQ(cuda_ops::WriteValueRowsQ4Channel(c.batch, c.kv_heads, d, v_dev.get(), n, slot,
                                                  table_dev.get(), nullptr),
                cudaSuccess);
      ASSERT_EQ(cuda_ops::WriteExactRowsQ4Channel(
                    c.batch, c.kv_heads, d, c.sink, c.window, k_dev.get(), v_dev.get(), n, slot,
                    start_dev.get(), c.rotate_exact, table_dev.get(), nullptr),
                cudaSuccess);
      slot += n;
    }
    const std::vector<uint8_t> dev = arena.Download();

    // The written bytes, the same on both sides.
    for (int r = 0; r < rows; ++r) {
      const int b = r / c.kv_heads;
      const RowPlaces& p = places[r];
      const int len = std::max(0, c.context - start[b]);
      const int grouped_end = start[b] + len / kC * kC;  // slots of complete key groups
      int bad = 0;
      for (int s = start[b]; s < grouped_end; ++s) {
        bad += std::memcmp(dev.data() + p.k_codes + size_t{1} * s * code_bytes,
                           cpu.k_codes.data() + (size_t{1} * r * max_len + s) * code_bytes,
                           code_bytes) != 0;
        bad += std::memcmp(dev.data() + p.k_params + size_t{2} * s * kp_halves,
                           cpu.k_params.data() + (size_t{1} * r * max_len + s) * kp_halves,
                           size_t{2} * kp_halves) != 0;
      }
      EXPECT_EQ(bad, 0) << "key group slots differ in row " << r;
      bad = 0;
      for (int s = 0; s < c.context; ++s) {
        bad += std::memcmp(dev.data() + p.v_codes + size_t{1} * s * code_bytes,
                           cpu.v_codes.data() + (size_t{1} * r * max_len + s) * code_bytes,
                           code_bytes) != 0;
        bad += std::memcmp(dev.data() + p.v_params + size_t{2} * s * vp_halves,
                           cpu.v_params.data() + (size_t{1} * r * max_len + s) * vp_halves,
                           size_t{2} * vp_halves) != 0;
      }
      EXPECT_EQ(bad, 0) << "value slots differ in row " << r;
      std::set<int> written;
      for (int i = 0; i < len; ++i) written.insert(i < c.sink ? i : c.sink + i % c.window);
      bad = 0;
      for (int e : written) {
        const size_t at = (size_t{1} * r * exact_rows + e) * d;
        bad += std::memcmp(dev.data() + p.k_exact + size_t{4} * e * d, &cpu.k_exact[at],
                           size_t{4} * d) != 0;
        bad += std::memcmp(dev.data() + p.v_exact + size_t{4} * e * d, &cpu.v_exact[at],
                           size_t{4} * d) != 0;
      }
      EXPECT_EQ(bad, 0) << "exact rows differ in row " << r;
    }
    if (c.rotate_exact) return;

    // Decode attention, the query at slot context - 1, against the CPU kernel on its own planes.
    for (int group : groups) {
      SCOPED_TRACE("group=" + std::to_string(group));
      const int heads = c.kv_heads * group;
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      std::vector<float> q = RandomNormals(rng, size_t{1} * c.batch * heads * d);
      const kernels::cpu::DecodeAttentionQ4Shape cs{.batch = c.batch,
                                                    .num_heads = heads,
                                                    .num_kv_heads = c.kv_heads,
                                                    .head_dim = d,
                                                    .max_len = max_len,
                                                    .cache_len = c.context,
                                                    .scale = scale,
                                                    .keys_by_channel = true};
      const kernels::cpu::Q4ExactRows exact{c.sink, c.window, cpu.k_exact.data(),
                                            cpu.v_exact.data()};
      std::vector<float> cpu_out(q.size());
      kernels::cpu::DecodeAttentionQ4(cs, q.data(), {cpu.k_codes.data(), cpu.k_params.data()},
                                      {cpu.v_codes.data(), cpu.v_params.data()}, start.data(),
                                      cpu_out.data(), kernels::cpu::Q4Isa::kAuto, &exact);
      cuda_ops::Q4ChannelDecodeShape s;
      s.batch = c.batch;
      s.num_heads = heads;
      s.num_kv_heads = c.kv_heads;
      s.head_dim = d;
      s.max_len = max_len;
      s.cache_len = c.context;
      s.sink = c.sink;
      s.window = c.window;
      s.scale = scale;
      cuda_ops::Q4ChannelDecodePlan plan;
      ASSERT_EQ(cuda_ops::PlanDecodeAttentionQ4Channel(s, &plan), cudaSuccess);
      DeviceArray<uint8_t> workspace(plan.workspace_bytes);
      DeviceArray<float> q_dev(q), out(q.size());
      out.Poison();
      ASSERT_EQ(cuda_ops::DecodeAttentionQ4Channel(s, q_dev.get(), table_dev.get(), start_dev.get(),
                                                   plan, workspace.get(), out.get(), nullptr),
                cudaSuccess);
      const std::vector<float> got = out.Download();
      EXPECT_LT(NormalizedError(ToDouble(cpu_out), got), 5e-3) << "splits=" << plan.num_splits;
      for (int b = 0; b < c.batch; ++b) {
        if (start[b] < c.context) continue;  // all padding: zeros
        for (int i = 0; i < heads * d; ++i) {
          ASSERT_EQ(got[size_t{1} * b * heads * d + i], 0.0f) << "padded sequence " << b;
        }
      }
    }
  }
};

TEST_F(Q4ChannelTest, WritersAndDecodeMatchCpuAroundGroupBoundaries) {
  for (int d : {64, 128, 256}) {
    for (int sink : {0, 1}) {
      for (int window : {32, 64}) {
        for (int context : {1, 31, 32, 33, 63, 64, 65, 97, 300}) {
          Run({.head_dim = d, .sink = sink, .window = window, .context = context}, {1, 4, 8});
        }
      }
    }
  }
}

TEST_F(Q4ChannelTest, OneLongSequenceSplitsOverTheContext) {
  for (int d : {64, 128, 256}) {
    Run({.head_dim = d, .kv_heads = 2, .batch = 1, .sink = 1, .window = 32, .context = 9000},
        {1, 4, 8});
  }
}

TEST_F(Q4ChannelTest, BatchOf64) {
  Run({.head_dim = 128, .kv_heads = 2, .batch = 64, .sink = 1, .window = 32, .context = 700},
      {1, 4, 8});
  Run({.head_dim = 64, .kv_heads = 4, .batch = 64, .sink = 0, .window = 64, .context = 1500}, {8});
}

TEST_F(Q4ChannelTest, GroupsOfMoreThanEightHeads) {
  Run({.head_dim = 128, .kv_heads = 1, .batch = 3, .sink = 1, .window = 32, .context = 500},
      {12, 16});
}

TEST_F(Q4ChannelTest, RotatedExactKeysMatchCpuBytes) {
  Run({.head_dim = 128, .sink = 1, .window = 32, .context = 100, .rotate_exact = true}, {});
}

// Head sizes the format or the kernels do not take are refused with an error, on any machine.
TEST(Q4ChannelRefusalTest, UnsupportedHeadDimsAreErrors) {
  for (int d : {32, 112, 192, 512}) {
    cuda_ops::Q4ChannelDecodeShape s;
    s.batch = 1;
    s.num_heads = 1;
    s.num_kv_heads = 1;
    s.head_dim = d;
    s.max_len = 64;
    s.cache_len = 64;
    s.window = 32;
    cuda_ops::Q4ChannelDecodePlan plan;
    EXPECT_EQ(cuda_ops::PlanDecodeAttentionQ4Channel(s, &plan), cudaErrorInvalidValue) << d;
    EXPECT_EQ(cuda_ops::DecodeAttentionQ4Channel(s, nullptr, nullptr, nullptr, plan, nullptr,
                                                 nullptr, nullptr),
              cudaErrorInvalidValue)
        << d;
    EXPECT_EQ(cuda_ops::WriteKeyGroupsQ4Channel(1, 1, d, 1, 32, nullptr, 0, 32, nullptr, nullptr,
                                                nullptr),
              cudaErrorInvalidValue)
        << d;
    EXPECT_FALSE(cuda_ops::Q4ChannelHeadDimSupported(d));
  }
  cuda_ops::Q4ChannelDecodeShape s;  // a window shorter than a key group
  s.batch = 1;
  s.num_heads = 1;
  s.num_kv_heads = 1;
  s.head_dim = 64;
  s.max_len = 64;
  s.cache_len = 64;
  s.window = 16;
  cuda_ops::Q4ChannelDecodePlan plan;
  EXPECT_EQ(cuda_ops::PlanDecodeAttentionQ4Channel(s, &plan), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace strata::testing
