// The CUDA backend's 4-bit KV cache ops (WriteKvQ4, AttendKvQ4, FitKeySmoothing, SmoothKeys,
// ScaleQueries) against the CPU backend's, through the Backend interface on the same random inputs:
// a prefill and then decode steps, the cache's bytes (codes, params and exact rows) equal after
// every write (both backends' kernels round alike, as kv_q4_test.cc and
// attention_decode_q4c_test.cc check), decode attention within 5e-3 normalised error (fp16 MMA
// operands against the CPU's fp32, as in attention_decode_q4c_test.cc), the smoothing within 1e-6
// (fp64 sums and single fp32 operations on both sides). Rows lie in shuffled order across two
// poisoned buffers, each with its own stride, and every cache op is given as two calls split inside
// a sequence, as CPU delegation splits a micro-batch's rows. Shapes: head_dim 64 and 128, and 80
// and 96 (a last group of 16 or 32; keys by channel only, the one format the CUDA kernels run
// there), with 1, 4 and 8 query heads per KV head (and 2, 3), one sequence and 64, prompts of 1,
// 17, 30, 31, 33, 40, 90 and 95 tokens. With fp16 and bf16 activations (the CUDA backend's
// default), the inputs are rounded to them first and the CPU given the rounded values as fp32: the
// cache bytes and the fit are as with fp32 (the CUDA ops widen their inputs exactly), and what the
// ops store in the activations (attention outputs, smoothed keys, scaled queries) is rounded once
// more, u / sqrt(3) in RMS for unit roundoff u (fp16 2^-11: 2.8e-4; bf16 2^-8: 2.3e-3): 1e-2 for
// attention, 2e-3 and 1e-2 for the rest.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "src/backend/backend.h"
#include "src/backend/q4_sizes.h"
#include "tests/backend/cuda_backend_workspace.h"
#include "tests/backend/gpu_test_util.h"

namespace strata::testing {
namespace {

constexpr uint64_t kPlaneAlign = 256;

struct CacheCase {
  std::string name;
  KvQ4Format format;
  int head_dim = 64;
  int kv_heads = 2;
  int heads = 4;
  int prompt = 1;          // the prefill's tokens
  int decode_steps = 0;    // single tokens after it
  std::vector<int> start;  // each sequence's first real slot (its size is the batch)
};

// Bytes of one row's planes with `stride` slots, and of its exact rows (0 without).
struct PlaneBytes {
  uint64_t codes, k_params, v_params, exact;
};

PlaneBytes PlaneBytesOf(const KvQ4Format& f, int d, int stride) {
  const uint64_t slots = static_cast<uint64_t>(stride);
  const int k_halves = f.keys_by_channel ? KvQ4ChannelParamHalves(d) : KvQ4ParamHalves(d);
  return {slots * KvQ4CodeBytes(d), slots * 2 * k_halves, slots * 2 * KvQ4ParamHalves(d),
          f.exact() ? static_cast<uint64_t>(f.sink + f.window) * d * sizeof(float) : 0};
}

// Where one row lies: a buffer (0 or 1) and its planes' offsets there.
struct RowPlace {
  int buffer = 0;
  int stride = 0;
  uint64_t k_codes = 0, k_params = 0, v_codes = 0, v_params = 0, k_exact = 0, v_exact = 0;
};

struct Layout {
  std::vector<RowPlace> rows;
  uint64_t buffer_bytes[2] = {0, 0};
};

// Rows in shuffled order, alternately in the two buffers, each plane at its own aligned offset,
// each row with a stride of its own (at least max_len).
Layout MakeLayout(const CacheCase& c, int rows, int max_len, std::mt19937_64& rng) {
  std::vector<int> order(static_cast<size_t>(rows));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  Layout layout;
  layout.rows.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    RowPlace& p = layout.rows[static_cast<size_t>(order[i])];
    p.buffer = static_cast<int>(i % 2);
    p.stride = max_len + static_cast<int>(rng() % 9);
    const PlaneBytes b = PlaneBytesOf(c.format, c.head_dim, p.stride);
    uint64_t& end = layout.buffer_bytes[p.buffer];
    auto take = [&end](uint64_t bytes) {
      const uint64_t at = end;
      end += (bytes + kPlaneAlign - 1) / kPlaneAlign * kPlaneAlign;
      return at;
    };
    p.k_codes = take(b.codes);
    p.k_params = take(b.k_params);
    p.v_codes = take(b.codes);
    p.v_params = take(b.v_params);
    p.k_exact = take(b.exact);
    p.v_exact = take(b.exact);
  }
  return layout;
}

// One backend's cache: the two buffers, every byte 0xFF (NaN exact rows), and the rows in them.
struct BackendCache {
  DeviceSpan buffers[2];
  std::vector<KvQ4Row> rows;
};

BackendCache MakeCache(BackendWorkspace& ws, const Layout& layout, const CacheCase& c) {
  BackendCache cache;
  for (int i = 0; i < 2; ++i) cache.buffers[i] = ws.Raw(layout.buffer_bytes[i], 0xFF);
  for (const RowPlace& p : layout.rows) {
    const PlaneBytes b = PlaneBytesOf(c.format, c.head_dim, p.stride);
    const DeviceSpan& buf = cache.buffers[p.buffer];
    KvQ4Row row;
    row.k_codes = buf.Sub(p.k_codes, b.codes);
    row.k_params = buf.Sub(p.k_params, b.k_params);
    row.v_codes = buf.Sub(p.v_codes, b.codes);
    row.v_params = buf.Sub(p.v_params, b.v_params);
    if (c.format.exact()) {
      row.k_exact = buf.Sub(p.k_exact, b.exact, SpanType::kF32);
      row.v_exact = buf.Sub(p.v_exact, b.exact, SpanType::kF32);
    }
    row.stride = p.stride;
    cache.rows.push_back(row);
  }
  return cache;
}

// Names the row plane that byte `at` of buffer `buffer` belongs to, for failure messages.
std::string PlaceOf(const Layout& layout, int buffer, uint64_t at) {
  std::string best = "no row";
  uint64_t best_at = 0;
  for (size_t r = 0; r < layout.rows.size(); ++r) {
    const RowPlace& p = layout.rows[r];
    if (p.buffer != buffer) continue;
    const std::pair<const char*, uint64_t> planes[] = {
        {"k_codes", p.k_codes},   {"k_params", p.k_params}, {"v_codes", p.v_codes},
        {"v_params", p.v_params}, {"k_exact", p.k_exact},   {"v_exact", p.v_exact}};
    for (const auto& [name, offset] : planes) {
      if (offset <= at && offset >= best_at) {
        best_at = offset;
        best = "row " + std::to_string(r) + " " + name + " byte " + std::to_string(at - offset);
      }
    }
  }
  return best;
}

// Keys whose channels differ in mean and spread by two orders of magnitude, as real keys do.
class KeySource {
 public:
  KeySource(std::mt19937_64& rng, int head_dim) : rng_(rng), mean_(head_dim), spread_(head_dim) {
    for (int x = 0; x < head_dim; ++x) {
      mean_[x] = x % 9 == 0 ? 20.0f * normal_(rng_) : 0.5f * normal_(rng_);
      spread_[x] = x % 7 == 0 ? 8.0f : 0.3f;
    }
  }
  std::vector<float> Keys(size_t n) {
    std::vector<float> k(n);
    for (size_t i = 0; i < n; ++i) {
      k[i] = mean_[i % mean_.size()] + spread_[i % mean_.size()] * normal_(rng_);
    }
    return k;
  }

 private:
  std::mt19937_64& rng_;
  std::normal_distribution<float> normal_{0.0f, 1.0f};
  std::vector<float> mean_, spread_;
};

class CudaKvQ4BackendTest : public CrossBackendTest {
 protected:
  // A prefill, then single-token decode steps, on both backends: the cache bytes after every
  // write and the attention outputs of every decode step compared.
  // The CUDA backend is given activations (k_new, v_new, q, out) of type `act`.
  void RunCache(const CacheCase& c, SpanType act = SpanType::kF32) {
    std::mt19937_64 rng(TestSeed());
    SCOPED_TRACE(c.name + " " + SpanTypeName(act) + " seed " + std::to_string(TestSeed()));
    const int d = c.head_dim;
    const int kvh = c.kv_heads;
    const int batch = static_cast<int>(c.start.size());
    const int rows = batch * kvh;
    const Layout layout = MakeLayout(c, rows, c.prompt + c.decode_steps, rng);
    host_->Reset();
    dev_->Reset();
    const BackendCache cpu_cache = MakeCache(*host_, layout, c);
    const BackendCache gpu_cache = MakeCache(*dev_, layout, c);
    KeySource keys(rng, d);

    KvQ4Step step;
    step.batch = batch;
    step.num_heads = c.heads;
    step.num_kv_heads = kvh;
    step.head_dim = d;
    step.scale = 1.0f / std::sqrt(static_cast<float>(d));
    step.format = c.format;
    // Inside sequence 1, so that both calls have a sequence they cover only in part; with one
    // sequence inside it, and with one row in one call.
    const int split = rows > kvh + 1 ? kvh + 1 : rows / 2;
    // `op(rows, row_begin)` over rows [0, split), then [split, rows).
    auto in_two_calls = [split](const BackendCache& cache, auto&& op) {
      const std::span<const KvQ4Row> all(cache.rows);
      if (split > 0) op(all.first(static_cast<size_t>(split)), 0);
      op(all.subspan(static_cast<size_t>(split)), split);
    };
    for (int s = 0; s <= c.decode_steps; ++s) {
      step.tokens = s == 0 ? c.prompt : 1;
      step.cache_len = c.prompt + s;
      SCOPED_TRACE("cache_len " + std::to_string(step.cache_len));
      const size_t floats = static_cast<size_t>(batch) * step.tokens * kvh * d;
      const std::vector<float> k_new = RoundedTo(keys.Keys(floats), act);
      const std::vector<float> v_new = RoundedTo(RandomNormals(rng, floats), act);
      auto write = [&](Backend& backend, BackendWorkspace& ws, const BackendCache& cache,
                       SpanType type) {
        const DeviceSpan k = ws.Activations(k_new, type), v = ws.Activations(v_new, type);
        in_two_calls(cache, [&](std::span<const KvQ4Row> part, int begin) {
          backend.WriteKvQ4(ws.stream(), step, k, v, c.start, part, begin);
        });
      };
      write(*cpu_, *host_, cpu_cache, SpanType::kF32);
      write(*gpu_, *dev_, gpu_cache, act);
      for (int i = 0; i < 2; ++i) {
        const std::vector<uint8_t> want = host_->ReadBytes(cpu_cache.buffers[i]);
        const std::vector<uint8_t> got = dev_->ReadBytes(gpu_cache.buffers[i]);
        const auto diff = std::mismatch(want.begin(), want.end(), got.begin());
        ASSERT_TRUE(diff.first == want.end())
            << "cache bytes differ first at " << PlaceOf(layout, i, diff.first - want.begin());
      }
      if (step.tokens != 1) continue;
      const std::vector<float> q =
          RoundedTo(RandomNormals(rng, static_cast<size_t>(batch) * c.heads * d), act);
      auto attend = [&](Backend& backend, BackendWorkspace& ws, const BackendCache& cache,
                        SpanType type) {
        const DeviceSpan dq = ws.Activations(q, type), out = ws.Activations(q.size(), type);
        in_two_calls(cache, [&](std::span<const KvQ4Row> part, int begin) {
          backend.AttendKvQ4(ws.stream(), step, dq, c.start, part, begin, out);
        });
        return ws.Read(out);
      };
      const std::vector<float> want = attend(*cpu_, *host_, cpu_cache, SpanType::kF32);
      EXPECT_LT(NormalizedError(ToDouble(want), attend(*gpu_, *dev_, gpu_cache, act)),
                act == SpanType::kF32 ? 5e-3 : 1e-2);
    }
  }
};

// Starts 0, 1, ..., period - 1 over and over, for `batch` sequences.
std::vector<int> CyclingStarts(int batch, int period) {
  std::vector<int> start(static_cast<size_t>(batch));
  for (int b = 0; b < batch; ++b) start[b] = b % period;
  return start;
}

constexpr KvQ4Format kPlainKeys{};
constexpr KvQ4Format kRotatedKeys{.rotate_keys = true};
constexpr KvQ4Format ChannelKeys(int sink, int window) {
  return {.keys_by_channel = true, .sink = sink, .window = window};
}

// The default format (keys by channel with exact sink and window tokens) and the per-token ones.
// Prompts and the steps after them cross key-group boundaries of every sequence (32 real tokens
// apart, counted from each one's start) and wrap the window's ring.
std::vector<CacheCase> CacheCases() {
  return {
      {"ChannelD128G4", ChannelKeys(4, 64), 128, 2, 8, 90, 14, {0, 7, 33}},
      {"ChannelD64G1", ChannelKeys(1, 32), 64, 3, 3, 30, 6, {2, 0}},
      {"ChannelD128G8OneSequence", ChannelKeys(4, 32), 128, 1, 8, 1, 33, {0}},
      {"ChannelD64G8Prompt31", ChannelKeys(4, 32), 64, 4, 32, 31, 3, {0, 1, 30}},
      {"ChannelD128G1Prompt95", ChannelKeys(1, 64), 128, 4, 4, 95, 2, {0, 31}},
      {"ChannelD64G4Batch64", ChannelKeys(4, 32), 64, 2, 8, 33, 2, CyclingStarts(64, 33)},
      {"ChannelD80G4", ChannelKeys(4, 32), 80, 2, 8, 40, 30, {0, 7, 33}},
      {"ChannelD80G8OneSequence", ChannelKeys(4, 32), 80, 1, 8, 1, 33, {0}},
      {"ChannelD96G1Prompt95", ChannelKeys(1, 64), 96, 3, 3, 95, 2, {0, 31}},
      {"ChannelD96G4Batch64", ChannelKeys(4, 32), 96, 2, 8, 33, 2, CyclingStarts(64, 33)},
      {"RotatedD64G3", kRotatedKeys, 64, 2, 6, 40, 5, {0, 3, 20}},
      {"RotatedD128G4OneSequence", kRotatedKeys, 128, 2, 8, 33, 2, {0}},
      {"PlainD128G2", kPlainKeys, 128, 2, 4, 17, 3, {5, 0}},
      {"PlainD128G1Prompt95", kPlainKeys, 128, 2, 2, 95, 1, {0, 94}},
      {"PlainD64G8Batch64", kPlainKeys, 64, 1, 8, 31, 2, CyclingStarts(64, 31)},
  };
}

void PrintTo(const CacheCase& c, std::ostream* os) { *os << c.name; }

class CudaKvQ4CacheTest : public CudaKvQ4BackendTest,
                          public ::testing::WithParamInterface<CacheCase> {};

TEST_P(CudaKvQ4CacheTest, WritesAndDecodeAttentionMatchCpu) { RunCache(GetParam()); }

// fp16 and bf16 activations, on the default format and a per-token one.
TEST_F(CudaKvQ4BackendTest, HalfActivationsMatchCpu) {
  for (SpanType act : {SpanType::kF16, SpanType::kBF16}) {
    RunCache({"ChannelD128G4", ChannelKeys(4, 64), 128, 2, 8, 90, 14, {0, 7, 33}}, act);
    RunCache({"ChannelD64G4Batch64", ChannelKeys(4, 32), 64, 2, 8, 33, 2, CyclingStarts(64, 33)},
             act);
    RunCache({"PlainD128G2", kPlainKeys, 128, 2, 4, 17, 3, {5, 0}}, act);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaKvQ4CacheTest, ::testing::ValuesIn(CacheCases()),
                         [](const ::testing::TestParamInfo<CacheCase>& info) {
                           return info.param.name;
                         });

struct SmoothingCase {
  int head_dim, kv_heads, heads, tokens;
  std::vector<int> start;  // a sequence with fewer than two real tokens gets the identity
};

// FitKeySmoothing over a prefill, then SmoothKeys on a prefill's and a decode step's keys and
// ScaleQueries on a decode step's queries, with the same mean and scale on both sides; for the
// CUDA backend, keys and queries of each activation type.
TEST_F(CudaKvQ4BackendTest, KeySmoothingMatchesCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  for (SpanType act : {SpanType::kF32, SpanType::kF16, SpanType::kBF16}) {
    SCOPED_TRACE(SpanTypeName(act));
    // What the ops store in the activations: rounded once more with a half type.
    const double stored_error = act == SpanType::kF32 ? 1e-6 : act == SpanType::kF16 ? 2e-3 : 1e-2;
    for (const SmoothingCase& c :
         {SmoothingCase{64, 2, 6, 48, {0, 9, 47, 48}}, SmoothingCase{128, 8, 64, 95, {0, 94, 95}},
          SmoothingCase{64, 4, 16, 33, CyclingStarts(64, 34)}, SmoothingCase{128, 2, 2, 1, {0}},
          SmoothingCase{64, 1, 4, 31, {0, 5}}}) {
      const int kvh = c.kv_heads, d = c.head_dim, tokens = c.tokens;
      const int batch = static_cast<int>(c.start.size());
      SCOPED_TRACE(::testing::Message() << "head_dim " << d << ", heads " << c.heads << "/" << kvh
                                        << ", " << batch << " x " << tokens << " tokens");
      KvQ4Step step;
      step.batch = batch;
      step.num_heads = c.heads;
      step.num_kv_heads = kvh;
      step.head_dim = d;
      step.tokens = tokens;
      step.cache_len = tokens;
      KeySource keys(rng, d);
      const std::vector<float> prompt =
          RoundedTo(keys.Keys(static_cast<size_t>(batch) * tokens * kvh * d), act);
      const size_t n = static_cast<size_t>(batch) * kvh * d;
      auto fit = [&](Backend& backend, BackendWorkspace& ws, SpanType type) {
        ws.Reset();
        const DeviceSpan mean = ws.Floats(n), scale = ws.Floats(n);
        backend.FitKeySmoothing(ws.stream(), step, ws.Activations(prompt, type), c.start, mean,
                                scale);
        return std::pair(ws.Read(mean), ws.Read(scale));
      };
      const auto [cpu_mean, cpu_scale] = fit(*cpu_, *host_, SpanType::kF32);
      const auto [gpu_mean, gpu_scale] = fit(*gpu_, *dev_, act);
      EXPECT_LT(NormalizedError(ToDouble(cpu_mean), gpu_mean), 1e-6);
      EXPECT_LT(NormalizedError(ToDouble(cpu_scale), gpu_scale), 1e-6);
      for (int b = 0; b < batch; ++b) {
        if (tokens - c.start[b] >= 2) continue;
        for (size_t i = static_cast<size_t>(b) * kvh * d; i < static_cast<size_t>(b + 1) * kvh * d;
             ++i) {
          ASSERT_EQ(gpu_mean[i], 0.0f) << "sequence " << b << " " << i;
          ASSERT_EQ(gpu_scale[i], 1.0f) << "sequence " << b << " " << i;
        }
      }

      for (int step_tokens : {tokens, 1}) {
        step.tokens = step_tokens;
        step.cache_len = tokens + (step_tokens == 1 ? 1 : 0);
        SCOPED_TRACE("tokens " + std::to_string(step_tokens));
        const std::vector<float> k =
            RoundedTo(keys.Keys(static_cast<size_t>(batch) * step_tokens * kvh * d), act);
        auto smooth = [&](Backend& backend, BackendWorkspace& ws, SpanType type) {
          ws.Reset();
          const DeviceSpan dk = ws.Activations(k, type);
          backend.SmoothKeys(ws.stream(), step, dk, ws.Floats(cpu_mean), ws.Floats(cpu_scale));
          return ws.Read(dk);
        };
        EXPECT_LT(NormalizedError(ToDouble(smooth(*cpu_, *host_, SpanType::kF32)),
                                  smooth(*gpu_, *dev_, act)),
                  stored_error);
      }
      step.tokens = 1;
      step.cache_len = tokens + 1;
      const std::vector<float> q =
          RoundedTo(RandomNormals(rng, static_cast<size_t>(batch) * c.heads * d), act);
      auto scale_queries = [&](Backend& backend, BackendWorkspace& ws, SpanType type) {
        ws.Reset();
        const DeviceSpan dq = ws.Activations(q, type);
        backend.ScaleQueries(ws.stream(), step, dq, ws.Floats(cpu_scale));
        return ws.Read(dq);
      };
      EXPECT_LT(NormalizedError(ToDouble(scale_queries(*cpu_, *host_, SpanType::kF32)),
                                scale_queries(*gpu_, *dev_, act)),
                stored_error);
    }
  }
}

// Formats the CUDA kernels do not run yet stop with a message naming them, before any work.
TEST_F(CudaKvQ4BackendTest, FormatsNotRunYetFailWithAClearMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  KvQ4Step step;
  step.batch = 1;
  step.num_heads = 2;
  step.num_kv_heads = 1;
  step.head_dim = 64;
  step.tokens = 1;
  step.cache_len = 1;
  const std::vector<int> start = {0};
  step.format.sink = 1;
  step.format.window = 32;
  EXPECT_DEATH(gpu_->WriteKvQ4(dev_->stream(), step, {}, {}, start, {}, 0),
               "does not yet run 4-bit per-token keys with exact tokens");
  EXPECT_DEATH(gpu_->AttendKvQ4(dev_->stream(), step, {}, start, {}, 0, {}),
               "does not yet run 4-bit per-token keys with exact tokens");
  step.format.keys_by_channel = true;
  step.format.rotate_keys = true;
  EXPECT_DEATH(gpu_->WriteKvQ4(dev_->stream(), step, {}, {}, start, {}, 0),
               "does not yet run rotated 4-bit keys by channel");
}

}  // namespace
}  // namespace strata::testing
