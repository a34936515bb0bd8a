#include "policy/memory_accounting.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "policy/fit_check.h"

namespace strata {
namespace {

ModelSpec Preset(const std::string& name) {
  return LoadModelSpecYaml(ResolveConfigFile("models", name).value()).value();
}

HardwareSpec Profile(const std::string& name) {
  return LoadHardwareSpecYaml(ResolveConfigFile("hardware", name).value()).value();
}

Plan Split(int wg, int wc, int cg, int cc, int ag, int ac) {
  return PlanFromFlexGenPercent({wg, wc, cg, cc, ag, ac}, 8, 4).value();
}

int64_t TotalWeightBytes(const ModelSpec& m, bool compress) {
  int64_t n = 0;
  for (const WeightLayer& l : BuildWeightLayers(m)) {
    n += l.count * StoredLayerBytes(l, compress, m.weight_dtype_bytes);
  }
  return n;
}

TEST(MemoryAccountingTest, FourBitSizes) {
  EXPECT_EQ(Q4RowBytes(64, 64), 36);      // 32 bytes of codes + fp16 scale and minimum
  EXPECT_EQ(Q4RowBytes(4096, 64), 2304);  // 4.5 bits per element
  EXPECT_EQ(Q4RowBytes(4096, 32), 2560);  // 5 bits per element in a GGUF's blocks of 32
  WeightTensor t{"w", 8, 96, true, 64};
  EXPECT_FALSE(StoredQ4(t, true));  // 96 is not whole groups of 64
  t.q4_group = 32;
  EXPECT_TRUE(StoredQ4(t, true));
  EXPECT_EQ(StoredRowBytes(t, true, 2), 48 + 3 * 4);
  ModelSpec m = Preset("llama-3-8b");
  Plan fp16, plain, channel;
  plain.compress_cache = channel.compress_cache = true;
  plain.cache_keys = CacheKeys::kPlain;
  ASSERT_EQ(channel.cache_keys, CacheKeys::kChannel);
  EXPECT_EQ(KvHeadTokenBytes(m, fp16), 2 * 256);
  EXPECT_EQ(KvHeadTokenBytes(m, plain), 2 * 72);
  // Keys by channel: 128 channels' fp16 scale and minimum per group of 32 tokens, 16 bytes a token.
  EXPECT_EQ(KvHeadTokenBytes(m, channel), (64 + 16) + 72);
  m.head_dim = 32;
  EXPECT_EQ(KvHeadTokenBytes(m, plain), 2 * 20);  // one group of 32: 16 + 4
  EXPECT_EQ(KvHeadTokenBytes(m, channel), 2 * 20);
  m.head_dim = 40;  // 80 halves of key params over 32 slots: 3 halves a slot
  EXPECT_EQ(KvHeadTokenPlaneBytes(m.head_dim, m.activation_dtype_bytes, channel),
            (std::array<int64_t, 4>{20, 6, 20, 4}));
  // Groups of 64 and a last one of 16 or 32: two per token; by channel, 160 or 192 halves of key
  // params over 32 slots, rounded up to an even 6 halves a slot.
  for (int d : {80, 96}) {
    EXPECT_TRUE(KvQ4TakesHeadDim(d));
    EXPECT_EQ(KvHeadTokenPlaneBytes(d, 4, plain), (std::array<int64_t, 4>{d / 2, 8, d / 2, 8}));
    EXPECT_EQ(KvHeadTokenPlaneBytes(d, 4, channel), (std::array<int64_t, 4>{d / 2, 12, d / 2, 8}));
  }
  for (int d : {2, 40, 64, 128, 192, 256}) EXPECT_TRUE(KvQ4TakesHeadDim(d)) << d;
  for (int d : {0, 33, 66, 112, 160, 200}) EXPECT_FALSE(KvQ4TakesHeadDim(d)) << d;
}

// Weights are split by rows: every byte is somewhere, and each tier's share of each layer is
// within one row of what the plan asks.
TEST(MemoryAccountingTest, WeightsAreByteExactAndFollowThePercents) {
  const Workload w{512, 32, 64};
  for (const char* name : {"opt-30b", "llama-3-8b", "llama-2-70b"}) {
    const ModelSpec m = Preset(name);
    for (bool compress : {false, true}) {
      for (const auto& [wg, wc] : std::vector<std::pair<int, int>>{
               {20, 80}, {10, 90}, {0, 100}, {33, 33}, {100, 0}, {1, 98}, {0, 0}}) {
        Plan p = Split(wg, wc, 100, 0, 100, 0);
        p.compress_weight = compress;
        Result<MemoryPlan> mem = AccountMemory(m, w, p);
        ASSERT_TRUE(mem.ok()) << mem.status().ToString();
        EXPECT_EQ(mem->weight_bytes.sum(), TotalWeightBytes(m, compress)) << name;
        for (size_t i = 0; i < mem->weight_layers.size(); ++i) {
          const LayerPlacement& lp = mem->weight_layers[i];
          const WeightLayer layer = BuildWeightLayers(m)[i];
          int64_t max_row = 0;
          for (const TensorPlacement& t : lp.tensors) max_row = std::max(max_row, t.row_bytes);
          const double total = lp.gpu_bytes + lp.cpu_bytes + lp.disk_bytes;
          EXPECT_EQ(total, StoredLayerBytes(layer, compress, m.weight_dtype_bytes));
          EXPECT_LE(std::abs(lp.gpu_bytes - total * wg / 100), max_row) << name << " " << wg;
          EXPECT_LE(std::abs(lp.cpu_bytes - total * wc / 100), 2 * max_row) << name << " " << wc;
          for (const TensorPlacement& t : lp.tensors) {
            EXPECT_GE(t.gpu_rows, 0);
            EXPECT_GE(t.cpu_rows, 0);
            EXPECT_GE(t.disk_rows, 0);
          }
        }
      }
    }
  }
}

// FlexGen's midpoint rule put 8.3% of OPT-30B on the GPU for --percent 20 80; strata puts 20%.
TEST(MemoryAccountingTest, Opt30bTwentyPercentIsTwentyPercent) {
  Result<MemoryPlan> mem =
      AccountMemory(Preset("opt-30b"), {512, 32, 144}, Split(20, 80, 0, 100, 0, 100));
  ASSERT_TRUE(mem.ok());
  EXPECT_NEAR(double(mem->weight_bytes.gpu_bytes) / mem->weight_bytes.sum(), 0.20, 0.001);
}

TEST(MemoryAccountingTest, CacheAndActivationsSplitByRows) {
  const ModelSpec m = Preset("opt-6.7b");
  const Workload w{512, 32, 64};
  Result<MemoryPlan> mem = AccountMemory(m, w, Split(100, 0, 25, 50, 10, 60));
  ASSERT_TRUE(mem.ok());
  const RowSplit& kv = mem->kv_cache;
  EXPECT_EQ(kv.rows, 8 * 32);              // (sequence, KV head) pairs of one micro-batch
  EXPECT_EQ(kv.copies, 32 * 4);            // layers x micro-batches
  EXPECT_EQ(kv.row_bytes, 2 * 544 * 256);  // K and V, 544 tokens, 128 fp16 elements
  EXPECT_EQ(kv.gpu_rows, 64);
  EXPECT_EQ(kv.cpu_rows, 128);
  EXPECT_EQ(kv.disk_rows, 64);
  EXPECT_EQ(mem->kv_cache_bytes.sum(), int64_t{32} * 4 * 8 * 32 * 2 * 544 * 256);
  const RowSplit& act = mem->activations;
  EXPECT_EQ(act.rows, 8 * 512);
  EXPECT_EQ(act.gpu_rows + act.cpu_rows + act.disk_rows, act.rows);
  EXPECT_NEAR(double(act.gpu_rows) / act.rows, 0.10, 1.0 / act.rows);
  // Something is on disk, so the pinned ring exists; the totals add up.
  bool ring = false;
  for (const NamedBuffer& b : mem->buffers) ring |= b.name == "disk_ring";
  EXPECT_TRUE(ring);
  TierBytes sum = mem->weight_bytes;
  for (const TierBytes* t :
       {&mem->kv_cache_bytes, &mem->activation_bytes, &mem->staging_bytes, &mem->workspace_bytes,
        &mem->alignment_bytes}) {
    sum += *t;
  }
  EXPECT_EQ(sum.gpu_bytes, mem->total_bytes.gpu_bytes);
  EXPECT_EQ(sum.cpu_bytes, mem->total_bytes.cpu_bytes);
  EXPECT_EQ(sum.disk_bytes, mem->total_bytes.disk_bytes);
}

TEST(MemoryAccountingTest, AllOnGpuNeedsNoStaging) {
  Result<MemoryPlan> mem = AccountMemory(Preset("llama-3-8b"), {128, 16, 8}, Plan());
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ(mem->staging_bytes.sum(), 0);
  EXPECT_EQ(mem->total_bytes.cpu_bytes, 0);
  EXPECT_EQ(mem->total_bytes.disk_bytes, 0);
  EXPECT_GT(mem->workspace_bytes.gpu_bytes, 0);
}

// The search's linear forms match the exact accounting up to row rounding (one row per tensor
// boundary and per KV or activation unit) and the CPU buffers they always reserve.
TEST(MemoryAccountingTest, LinearFormsMatchTheExactFiguresUpToRows) {
  const ModelSpec m = Preset("opt-30b");
  const Workload w{512, 32, 0};
  for (Plan p :
       {Split(20, 80, 0, 100, 0, 100), Split(0, 50, 0, 0, 0, 100), Split(50, 30, 40, 40, 100, 0)}) {
    for (bool cpu_attention : {false, true}) {
      p.cpu_attention = cpu_attention;
      p.compress_weight = p.compress_cache = cpu_attention;
      Result<MemoryPlan> mem = AccountMemory(m, w, p);
      ASSERT_TRUE(mem.ok());
      double slack = (mem->kv_cache.copies + 4) * mem->kv_cache.row_bytes +
                     (mem->activations.copies + 4) * mem->activations.row_bytes + kDiskRingBytes;
      for (const LayerPlacement& layer : mem->weight_layers) {
        for (const TensorPlacement& t : layer.tensors) slack += 4 * layer.count * t.row_bytes;
      }
      // Alignment padding, and the staging slots, which hold whole tensors or hidden states
      // while the forms count them in proportion to what is off the GPU.
      slack += mem->alignment_bytes.gpu_bytes + mem->alignment_bytes.cpu_bytes +
               mem->alignment_bytes.disk_bytes;
      for (const NamedBuffer& b : mem->buffers) {
        if (b.name == "cpu_attention_workspace" || b.name == "weight_staging" ||
            b.name == "activation_slots") {
          slack += b.bytes * b.count;
        }
      }
      const LinearMemory lm = LinearMemoryOf(m, w, p);
      const Fractions x = FractionsOf(p);
      EXPECT_NEAR(lm.gpu_bytes.Eval(x), mem->total_bytes.gpu_bytes, slack);
      EXPECT_NEAR(lm.cpu_bytes.Eval(x), mem->total_bytes.cpu_bytes, slack);
      EXPECT_NEAR(lm.disk_bytes.Eval(x), mem->total_bytes.disk_bytes, slack);
    }
  }
}

// Smoothed keys add their statistics (fp32 mean and scale per layer, sequence, KV head and
// channel) to the GPU, both in the exact plan and in the forms the search's LP constrains, and
// nothing else; rotated and plain keys add none (channel keys change the key params plane:
// FourBitSizes).
TEST(MemoryAccountingTest, SmoothedKeysAddTheirStatisticsToTheGpuExactly) {
  const ModelSpec m = Preset("llama-2-7b");
  const Workload w{512, 32, 0};
  Plan p = Split(30, 50, 20, 40, 100, 0);
  p.gpu_batch_size = 8;
  p.num_gpu_batches = 3;
  p.compress_cache = true;
  const int64_t stats = 2 * int64_t{m.num_layers} * 24 * m.num_kv_heads * m.head_dim * 4;
  p.cache_keys = CacheKeys::kSmoothed;
  const MemoryPlan smoothed = AccountMemory(m, w, p).value();
  const LinearMemory smoothed_forms = LinearMemoryOf(m, w, p);
  for (CacheKeys keys : {CacheKeys::kRotated, CacheKeys::kPlain}) {
    p.cache_keys = keys;
    const MemoryPlan other = AccountMemory(m, w, p).value();
    const LinearMemory other_forms = LinearMemoryOf(m, w, p);
    const Fractions x = FractionsOf(p);
    EXPECT_EQ(smoothed.workspace_bytes.gpu_bytes - other.workspace_bytes.gpu_bytes, stats);
    EXPECT_EQ(smoothed.total_bytes.cpu_bytes, other.total_bytes.cpu_bytes);
    EXPECT_EQ(smoothed.total_bytes.disk_bytes, other.total_bytes.disk_bytes);
    EXPECT_DOUBLE_EQ(smoothed_forms.gpu_bytes.Eval(x) - other_forms.gpu_bytes.Eval(x), stats);
    EXPECT_DOUBLE_EQ(smoothed_forms.cpu_bytes.Eval(x), other_forms.cpu_bytes.Eval(x));
  }
}

// Exact tokens of the 4-bit cache add their fp32 keys and values (sink + window rows per layer,
// sequence, KV head) to the GPU, both in the exact plan and in the search's forms, and nothing
// else.
TEST(MemoryAccountingTest, ExactTokensAddTheirRowsToTheGpuExactly) {
  const ModelSpec m = Preset("llama-2-7b");
  const Workload w{512, 32, 0};
  Plan p = Split(30, 50, 20, 40, 100, 0);
  p.gpu_batch_size = 8;
  p.num_gpu_batches = 3;
  p.compress_cache = true;
  p.cache_keys = CacheKeys::kPlain;  // channel keys need a window
  p.cache_sink = p.cache_window = 0;
  const MemoryPlan none = AccountMemory(m, w, p).value();
  const LinearMemory none_forms = LinearMemoryOf(m, w, p);
  p.cache_sink = 1;
  p.cache_window = 16;
  const MemoryPlan exact = AccountMemory(m, w, p).value();
  const LinearMemory exact_forms = LinearMemoryOf(m, w, p);
  const int64_t rows = 2 * int64_t{m.num_layers} * 24 * m.num_kv_heads * 17 * m.head_dim * 4;
  const Fractions x = FractionsOf(p);
  EXPECT_EQ(exact.workspace_bytes.gpu_bytes - none.workspace_bytes.gpu_bytes, rows);
  EXPECT_EQ(exact.total_bytes.cpu_bytes, none.total_bytes.cpu_bytes);
  EXPECT_EQ(exact.total_bytes.disk_bytes, none.total_bytes.disk_bytes);
  EXPECT_DOUBLE_EQ(exact_forms.gpu_bytes.Eval(x) - none_forms.gpu_bytes.Eval(x), rows);
  EXPECT_DOUBLE_EQ(exact_forms.cpu_bytes.Eval(x), none_forms.cpu_bytes.Eval(x));
}

TEST(MemoryAccountingTest, InfeasiblePlansNameTheBindingConstraint) {
  const HardwareSpec t4 = Profile("t4-flexgen");
  const ModelSpec m = Preset("opt-175b");
  Plan all_gpu;
  Result<MemoryPlan> mem = AccountMemory(m, {512, 32, 1}, all_gpu);
  ASSERT_TRUE(mem.ok());
  Status s = CheckFits(*mem, t4, all_gpu);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("GPU memory: the plan needs"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("over by"), std::string::npos);
  EXPECT_NE(s.message().find("lower weight_gpu_percent"), std::string::npos);

  // OPT-175B on a machine with 100 GB in all: no placement can hold its 350 GB of weights.
  HardwareSpec tiny = t4;
  tiny.name = "tiny";
  tiny.cpu_capacity_bytes = 50'000'000'000;
  tiny.disk_capacity_bytes = 35'000'000'000;
  Plan on_disk = Split(0, 0, 0, 0, 0, 100);
  mem = AccountMemory(m, {512, 32, 1}, on_disk);
  ASSERT_TRUE(mem.ok());
  s = CheckFits(*mem, tiny, on_disk);
  EXPECT_NE(s.message().find("all tiers together"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("no placement fits"), std::string::npos);
}

// Host memory (CheckHostMemory) with a made-up available figure: the device tier counts, since
// the engine keeps it in host memory, and the reserve is kept free; a plan over it is refused
// with the figures and the nearest plan that fits, which does fit, and moves no more weights to
// disk than it must.
TEST(MemoryAccountingTest, HostMemoryCountsTheDeviceTierAndSuggestsAPlanThatFits) {
  const ModelSpec m = Preset("opt-6.7b");
  const Workload w{64, 8, 0};
  const Plan all_gpu;
  const MemoryPlan mem = AccountMemory(m, w, all_gpu).value();
  const int64_t need = HostBytesOf(mem, m, all_gpu);
  EXPECT_EQ(need, mem.total_bytes.gpu_bytes + mem.total_bytes.cpu_bytes);
  EXPECT_GT(need, 13'000'000'000);
  EXPECT_TRUE(CheckHostMemory(m, w, all_gpu, need + kHostMemoryReserveBytes).ok());
  EXPECT_FALSE(CheckHostMemory(m, w, all_gpu, need + kHostMemoryReserveBytes - 1).ok());

  const int64_t available = 10'000'000'000;
  const Status s = CheckHostMemory(m, w, all_gpu, available);
  ASSERT_EQ(s.code(), StatusCode::kResourceExhausted);
  const std::string& text = s.message();
  EXPECT_NE(text.find("host memory: the plan (--percent 100 0 100 0 100 0"), std::string::npos)
      << text;
  EXPECT_NE(text.find("needs " + FormatBytes(need)), std::string::npos) << text;
  EXPECT_NE(text.find(FormatBytes(available) + " is available (MemAvailable), of which " +
                      FormatBytes(kHostMemoryReserveBytes) + " is kept"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("To fit, move weights to disk: --percent "), std::string::npos) << text;
  // The suggestion, read back: it fits, and one more percent of weights kept would not.
  const size_t at = text.find("--percent ", text.find("To fit"));
  std::vector<int> percent(6);
  ASSERT_EQ(std::sscanf(text.c_str() + at, "--percent %d %d %d %d %d %d", &percent[0],
                        &percent[1], &percent[2], &percent[3], &percent[4], &percent[5]),
            6);
  EXPECT_EQ(percent[1], 0);
  EXPECT_GT(percent[0], 0);
  EXPECT_LT(percent[0], 100);
  const Plan fit = PlanFromFlexGenPercent(percent, 1, 1).value();
  EXPECT_TRUE(CheckHostMemory(m, w, fit, available).ok());
  EXPECT_FALSE(CheckHostMemory(m, w, Split(percent[0] + 1, 0, 100, 0, 100, 0), available).ok());

  // CPU memory counts the same, and is moved to disk before the GPU share.
  const std::string mixed = CheckHostMemory(m, w, Split(50, 50, 100, 0, 100, 0), available)
                                .message();
  EXPECT_NE(mixed.find("--percent 50 ", mixed.find("To fit")), std::string::npos) << mixed;

  // 4-bit weights quantized at setup are held next to the tiers while they go home.
  Plan q4 = all_gpu;
  q4.compress_weight = true;
  const MemoryPlan q4_mem = AccountMemory(m, w, q4).value();
  EXPECT_EQ(HostBytesOf(q4_mem, m, q4), q4_mem.total_bytes.gpu_bytes +
                                           q4_mem.total_bytes.cpu_bytes +
                                           q4_mem.weight_bytes.sum());

  // Too little for anything: said so.
  EXPECT_NE(CheckHostMemory(m, w, all_gpu, 100'000'000).message().find("Nothing fits"),
            std::string::npos);
}

TEST(MemoryAccountingTest, RejectsWhatCannotBePlanned) {
  const ModelSpec m = Preset("opt-6.7b");
  Result<MemoryPlan> r = AccountMemory(m, {2000, 100, 1}, Plan());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status().message().find("exceeds the context of opt-6.7b (2048 positions)"),
            std::string::npos);
  ModelSpec odd = m;
  odd.head_dim = 112;
  odd.num_heads = odd.num_kv_heads = 4096 / 112;
  Plan q4;
  q4.compress_cache = true;
  r = AccountMemory(odd, {16, 4, 1}, q4);
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find(kKvQ4HeadDims), std::string::npos)
      << r.status().message();
}

// Only rotated (and smoothed) keys need a power-of-two head_dim; channel keys, the default, take
// every head_dim the 4-bit cache does.
TEST(MemoryAccountingTest, OnlyRotatedKeysNeedAPowerOfTwoHeadDim) {
  ModelSpec m = Preset("opt-6.7b");
  m.head_dim = 192;
  m.num_heads = m.num_kv_heads = 4096 / 192;
  Plan q4;
  q4.compress_cache = true;
  EXPECT_TRUE(AccountMemory(m, {16, 4, 1}, q4).ok());
  for (CacheKeys keys : {CacheKeys::kRotated, CacheKeys::kSmoothed}) {
    q4.cache_keys = keys;
    const Result<MemoryPlan> r = AccountMemory(m, {16, 4, 1}, q4);
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << CacheKeysName(keys);
    EXPECT_NE(r.status().message().find("power-of-two head_dim"), std::string::npos);
  }
}

}  // namespace
}  // namespace strata
