#include "policy/cost_model.h"

#include <gtest/gtest.h>

#include "policy/weight_layout.h"

namespace strata {
namespace {

ModelSpec Preset(const std::string& name) {
  return LoadModelSpecYaml(ResolveConfigFile("models", name).value()).value();
}

HardwareSpec FlexGenT4() {
  return LoadHardwareSpecYaml(ResolveConfigFile("hardware", "t4-flexgen").value()).value();
}

Plan Split(int wg, int wc, int cg, int cc, int gbs, int nb) {
  return PlanFromFlexGenPercent({wg, wc, cg, cc, 100, 0}, gbs, nb).value();
}

TEST(CostModelTest, AllOnGpuMovesNothing) {
  const CostEstimate e = EstimateCost(Preset("opt-6.7b"), {512, 32, 2}, Plan(), FlexGenT4());
  for (const LayerTimes& t : {e.prefill.layer, e.decode.layer}) {
    EXPECT_EQ(t.h2d_s + t.d2h_s + t.disk_lane_s(), 0);
    EXPECT_GT(t.gpu_gemm_s, 0);
  }
  EXPECT_EQ(e.decode.layer.Bottleneck(), "compute (GPU GEMM)");
}

// A weight byte on the CPU costs one h2d copy per layer step; on disk also a disk read.
TEST(CostModelTest, WeightTrafficFollowsPlacement) {
  const ModelSpec m = Preset("opt-30b");
  const HardwareSpec hw = FlexGenT4();
  const double layer_bytes = StoredLayerBytes(BuildWeightLayers(m)[1], false, 2);
  const CostEstimate cpu = EstimateCost(m, {512, 32, 0}, Split(0, 100, 100, 0, 4, 1), hw);
  EXPECT_NEAR(cpu.decode.layer.h2d_s, layer_bytes / 12.89e9, 1e-9);
  EXPECT_EQ(cpu.decode.layer.disk_read_s, 0);
  const CostEstimate disk = EstimateCost(m, {512, 32, 0}, Split(0, 0, 100, 0, 4, 1), hw);
  EXPECT_NEAR(disk.decode.layer.disk_read_s, layer_bytes / 0.473e9, 1e-9);
  EXPECT_EQ(disk.decode.layer.Bottleneck(), "disk");
}

TEST(CostModelTest, OverlapTakesTheSlowestLaneAndSerialTheSum) {
  const ModelSpec m = Preset("opt-30b");
  Plan p = Split(20, 80, 0, 100, 16, 4);
  const CostEstimate on = EstimateCost(m, {512, 32, 0}, p, FlexGenT4());
  p.overlap = false;
  const CostEstimate off = EstimateCost(m, {512, 32, 0}, p, FlexGenT4());
  const LayerTimes& t = on.decode.layer;
  EXPECT_DOUBLE_EQ(t.step_s(true),
                   std::max({t.disk_lane_s(), t.h2d_lane_s(), t.d2h_s, t.compute_lane_s()}));
  EXPECT_DOUBLE_EQ(t.step_s(false),
                   t.disk_lane_s() + t.h2d_lane_s() + t.d2h_s + t.compute_lane_s());
  EXPECT_GT(t.d2d_s, 0);
  EXPECT_GT(off.block_s, on.block_s);
}

TEST(CostModelTest, CpuAttentionReplacesCacheTransfers) {
  const ModelSpec m = Preset("opt-30b");
  Plan gpu_attention = Split(0, 100, 0, 100, 16, 4);
  Plan cpu_attention = gpu_attention;
  cpu_attention.cpu_attention = true;
  const CostEstimate g = EstimateCost(m, {512, 32, 0}, gpu_attention, FlexGenT4());
  const CostEstimate c = EstimateCost(m, {512, 32, 0}, cpu_attention, FlexGenT4());
  // 64 sequences x 528 tokens of average context x K and V x 56 heads x 128 fp16 elements.
  const double cache = 64.0 * (512 + 16) * 2 * 56 * 128 * 2;
  // GPU attention brings the cache over PCIe; CPU attention sends only queries and outputs.
  EXPECT_NEAR(g.decode.layer.h2d_s - c.decode.layer.h2d_s, cache / 12.89e9, 0.01 * cache / 12.89e9);
  EXPECT_EQ(g.decode.layer.cpu_attention_s, 0);
  EXPECT_NEAR(c.decode.layer.cpu_attention_s, cache / 12.3e9, 1e-9);
  // CPU attention is the compute lane's largest unit, and it lies on a weight-slot chain: a
  // layer's attention weights load only once the previous layer's attention has finished.
  const LayerTimes& t = c.decode.layer;
  EXPECT_GT(t.cpu_attention_s, t.compute_lane_s() - t.cpu_attention_s);
  EXPECT_EQ(t.Bottleneck(), "weight slots");
  Plan serial = cpu_attention;
  serial.overlap = false;
  EXPECT_EQ(EstimateCost(m, {512, 32, 0}, serial, FlexGenT4()).decode.layer.Bottleneck(),
            "compute (CPU attention)");
}

TEST(CostModelTest, CompressionShrinksTrafficAndCostsExpansion) {
  const ModelSpec m = Preset("opt-175b");
  Plan p = Split(0, 100, 0, 100, 16, 2);
  const CostEstimate plain = EstimateCost(m, {512, 32, 0}, p, FlexGenT4());
  p.compress_weight = p.compress_cache = true;
  const CostEstimate q4 = EstimateCost(m, {512, 32, 0}, p, FlexGenT4());
  EXPECT_NEAR(q4.decode.layer.h2d_s / plain.decode.layer.h2d_s, 36.0 / 128, 0.01);
  EXPECT_GT(q4.decode.layer.gpu_dequant_s, 0);
  EXPECT_EQ(plain.decode.layer.gpu_dequant_s, 0);
}

// With a page-write rate, a decode step's disk cache writes cost one 4 KiB page per (sequence,
// KV head, plane), as the executor writes them; planes of rows shorter than a page share pages.
TEST(CostModelTest, DecodeCacheWritesCostPagesAtThePageRate) {
  const ModelSpec m = Preset("opt-30b");  // 56 KV heads of 128 fp16 elements: 256-byte slots
  ASSERT_EQ(m.num_kv_heads, 56);
  ASSERT_EQ(m.head_dim, 128);
  ASSERT_EQ(m.activation_dtype_bytes, 2);
  Plan p = PlanFromFlexGenPercent({0, 100, 0, 0, 100, 0}, 16, 4).value();  // cache on disk
  HardwareSpec hw = FlexGenT4();
  const CostEstimate bytes = EstimateCost(m, {512, 32, 0}, p, hw);
  EXPECT_NEAR(bytes.decode.layer.disk_write_s, 64.0 * 2 * 56 * 256 / (hw.disk_write_gbps * 1e9),
              1e-12);
  hw.disk_page_write_gbps = 0.02;
  const CostEstimate pages = EstimateCost(m, {512, 32, 0}, p, hw);
  EXPECT_NEAR(pages.decode.layer.disk_write_s, 64.0 * 56 * 2 * 4096 / 0.02e9, 1e-9);
  EXPECT_DOUBLE_EQ(pages.prefill.layer.disk_write_s, bytes.prefill.layer.disk_write_s);
  // 4-bit cache (FlexGen's groups), 72 slots: the 64-byte code rows (4608 bytes) fill a page
  // each; the 8-byte parameter rows (576 bytes) share pages, 576 / 4096 of one per row.
  p.compress_cache = true;
  p.cache_keys = CacheKeys::kPlain;
  const CostEstimate q4 = EstimateCost(m, {64, 8, 0}, p, hw);
  EXPECT_NEAR(q4.decode.layer.disk_write_s, 64.0 * 56 * 2 * (1 + 576.0 / 4096) * 4096 / 0.02e9,
              1e-9);
}

// Decode GEMMs run micro-batch after micro-batch, each a roofline of its arithmetic and the
// weight bytes it reads; a layer that fits in the device's last-level cache is read from memory
// by the first micro-batch only. Checked against the arithmetic written out for tinyllama-1.1b's
// 44.0 M-parameter layers (176 MB in fp32) and its 65.5 M-parameter output projection.
TEST(CostModelTest, DecodeGemmsReadWeightsOncePerMicroBatchUnlessTheyStayInTheCache) {
  ModelSpec m = Preset("tinyllama-1.1b");
  m.weight_dtype_bytes = 4;
  const double layer = 2048.0 * 2048 * 2 + 2048.0 * 256 * 2 + 2048.0 * 5632 * 3;
  const double output = 32000.0 * 2048;
  HardwareSpec hw = FlexGenT4();
  hw.gpu_prefill_tflops = 0.1;
  hw.gpu_decode_tflops = 0.05;
  hw.gpu_memory_gbps = 8;
  const Plan p = Split(100, 0, 100, 0, 2, 2);        // 2 micro-batches of 2 sequences
  const double flops_s = 2.0 * 2 * layer / 0.05e12;  // one micro-batch
  const double memory_s = 4 * layer / 8e9;
  ASSERT_GT(memory_s, flops_s);  // memory-bound, as decode GEMMs are
  const CostEstimate streamed = EstimateCost(m, {64, 8, 0}, p, hw);
  EXPECT_NEAR(streamed.decode.layer.gpu_gemm_s, 2 * memory_s, 1e-12);
  EXPECT_NEAR(streamed.decode.output.gpu_gemm_s, 2 * 4 * output / 8e9, 1e-12);
  hw.gpu_cache_bytes = int64_t{200} << 20;  // holds a layer (176 MB), not the output (262 MB)
  const CostEstimate cached = EstimateCost(m, {64, 8, 0}, p, hw);
  EXPECT_NEAR(cached.decode.layer.gpu_gemm_s, memory_s + flops_s, 1e-12);
  EXPECT_NEAR(cached.decode.output.gpu_gemm_s, 2 * 4 * output / 8e9, 1e-12);
  // Prefill GEMMs are compute-bound either way.
  EXPECT_NEAR(cached.prefill.layer.gpu_gemm_s, 2.0 * 2 * 64 * 2 * layer / 0.1e12, 1e-12);
  EXPECT_NEAR(streamed.prefill.layer.gpu_gemm_s, 2.0 * 2 * 64 * 2 * layer / 0.1e12, 1e-12);
}

// Each awaited disk write of the store lane waits behind the reads on the disk: the profile's
// disk_write_wait_bytes, or half the reads of its part of the layer where those are fewer.
// Written out for tinyllama-1.1b in fp32 (hidden 2048, 4 KV heads of 64, FFN 5632) at 2 GB/s.
TEST(CostModelTest, DiskWritesWaitBehindTheReadsOfTheirPart) {
  ModelSpec m = Preset("tinyllama-1.1b");
  m.weight_dtype_bytes = 4;
  const double act = 2.0 * 2048;  // one token's hidden state, fp16
  const double attention = 4 * (2048 + 2048.0 * 2048 * 2 + 256.0 * 2048 * 2);
  const double mlp = 4 * (2048 + 5632.0 * 2048 * 3);
  const double embed = 4 * 2048.0 * 4;  // a decode step's input rows: one per sequence
  const double cache = 4 * (64 + 8 / 2) * 2 * 4 * 64 * 2.0;  // 4 sequences attend 68 slots
  const double rate = 2e9;
  HardwareSpec hw = FlexGenT4();
  hw.disk_read_gbps = 2;
  const Plan all_disk = PlanFromFlexGenPercent({0, 0, 0, 0, 0, 0}, 2, 2).value();  // 2 x 2 seqs
  ASSERT_GT(all_disk.activation_disk_percent(), 0);
  const Workload w{64, 8, 0};

  hw.disk_write_wait_bytes = 1 << 20;  // less than a layer part's reads: every write waits it
  const double full = (1 << 20) / rate;
  CostEstimate e = EstimateCost(m, w, all_disk, hw);
  // Per micro-batch: attention stores activations and KV, the MLP activations.
  EXPECT_NEAR(e.decode.layer.disk_write_wait_s, 2 * 3 * full, 1e-12);
  EXPECT_NEAR(e.prefill.layer.disk_write_wait_s, 2 * 3 * full, 1e-12);
  // The input step reads only 4 rows, so its writes wait half of that.
  EXPECT_NEAR(e.decode.input.disk_write_wait_s, 2 * embed / rate / 2, 1e-12);
  EXPECT_EQ(e.decode.output.disk_write_wait_s, 0);  // the output layer stores nothing
  // Latency of the store lane, not disk time: the step is still its slowest link or unit.
  const LayerTimes& t = e.decode.layer;
  EXPECT_DOUBLE_EQ(t.step_s(true), std::max({t.disk_lane_s(), t.h2d_lane_s(), t.d2h_s,
                                             t.compute_lane_s(), t.slot_chain_s}));

  hw.disk_write_wait_bytes = int64_t{1} << 40;  // more than any part reads: half its reads
  e = EstimateCost(m, w, all_disk, hw);
  const double attention_half = (attention + 4 * act + cache) / rate / 2;
  const double mlp_half = (mlp + 4 * act) / rate / 2;
  EXPECT_NEAR(e.decode.layer.disk_write_wait_s, 2 * (2 * attention_half + mlp_half), 1e-9);
  EXPECT_NEAR(e.prefill.layer.disk_write_wait_s,
              2 * (2 * (attention + 4 * 64 * act) / rate / 2 + (mlp + 4 * 64 * act) / rate / 2),
              1e-9);
  EXPECT_NEAR(e.decode.input.disk_write_wait_s, 2 * embed / rate / 2, 1e-9);

  // Activations on the GPU, the cache on disk: only the attention's KV stores wait, behind the
  // attention's weight and cache reads.
  e = EstimateCost(m, w, PlanFromFlexGenPercent({0, 0, 0, 0, 100, 0}, 2, 2).value(), hw);
  EXPECT_NEAR(e.decode.layer.disk_write_wait_s, 2 * (attention + cache) / rate / 2, 1e-9);
  EXPECT_EQ(e.decode.input.disk_write_wait_s, 0);

  hw.disk_write_wait_bytes = 0;  // not measured, or a disk that does not queue writes
  EXPECT_EQ(EstimateCost(m, w, all_disk, hw).decode.layer.disk_write_wait_s, 0);
}

// The two weight slots chain loads and compute (cost_model.h). Written out for tinyllama-1.1b in
// fp32 all on disk, 2 micro-batches of 2, with a slow decode GEMM so that the chains bind: the
// attention part has 2 * 2048^2 + 2 * 2048 * 256 of the layer's 44.0 M matrix elements.
TEST(CostModelTest, WeightSlotsChainLoadsAndCompute) {
  ModelSpec m = Preset("tinyllama-1.1b");
  m.weight_dtype_bytes = 4;
  const double attention_params = 2048.0 * 2048 * 2 + 2048.0 * 256 * 2;
  const double share = attention_params / (attention_params + 2048.0 * 5632 * 3);
  const double attention = 4 * (2048 + attention_params);  // its norm and matrices
  const double mlp = 4 * (2048 + 2048.0 * 5632 * 3);
  const double act = 2 * 2.0 * 2048;                         // a micro-batch's hidden states
  const double cache = 2 * (64 + 8 / 2) * 2 * 4 * 64 * 2.0;  // a micro-batch's KV, attended
  HardwareSpec hw = FlexGenT4();
  hw.disk_read_gbps = 2;
  hw.gpu_decode_tflops = 0.05;
  hw.gpu_memory_gbps = 8;
  const Plan p = PlanFromFlexGenPercent({0, 0, 0, 0, 0, 0}, 2, 2).value();
  const Workload w{64, 8, 0};
  const LayerTimes t = EstimateCost(m, w, p, hw).decode.layer;
  const double gemm = t.gpu_gemm_s, rd = 1 / 2e9;
  // Each chain on the disk reads (the h2d copies of the same bytes are faster here): the part's
  // weights, its first micro-batch's inputs (hidden states, and the attention's KV), its compute;
  // with 2 micro-batches no micro-batch of the other part waits for these weights.
  const double attention_slot = (attention + act + cache) * rd + gemm * share + t.gpu_attention_s;
  const double mlp_slot = (mlp + act) * rd + gemm * (1 - share);
  EXPECT_GT(mlp_slot, attention_slot);
  EXPECT_NEAR(t.slot_chain_s, mlp_slot, 1e-12);
  ASSERT_GT(t.slot_chain_s, std::max({t.disk_lane_s(), t.h2d_lane_s(), t.compute_lane_s()}));
  EXPECT_DOUBLE_EQ(t.step_s(true), t.slot_chain_s);
  EXPECT_EQ(t.Bottleneck(), "weight slots");

  // Without overlap the lanes run one after another, and nothing chains.
  Plan serial = p;
  serial.overlap = false;
  const LayerTimes s = EstimateCost(m, w, serial, hw).decode.layer;
  EXPECT_EQ(s.slot_chain_s, 0);
  EXPECT_DOUBLE_EQ(s.step_s(false),
                   s.disk_lane_s() + s.h2d_lane_s() + s.d2h_s + s.compute_lane_s());
  // With every weight on the GPU there are no slots.
  EXPECT_EQ(EstimateCost(m, w, Plan(), hw).decode.layer.slot_chain_s, 0);
}

TEST(CostModelTest, ThroughputIsFlexGensMeasure) {
  const ModelSpec m = Preset("opt-6.7b");
  const Plan p = Split(100, 0, 100, 0, 4, 2);
  const CostEstimate one = EstimateCost(m, {512, 32, 8}, p, FlexGenT4());
  EXPECT_EQ(one.num_blocks, 1);
  EXPECT_DOUBLE_EQ(one.throughput_tokens_per_s, 8 * 32 / one.block_s);
  EXPECT_DOUBLE_EQ(one.prefill_tokens_per_s, 8 * 512 / one.prefill.total_s);
  EXPECT_DOUBLE_EQ(one.decode_tokens_per_s, 8 * 31 / one.decode.total_s);
  EXPECT_DOUBLE_EQ(one.decode.total_s, 31 * one.decode.token_step_s);
  // 9 prompts need two blocks; the second is padded.
  const CostEstimate two = EstimateCost(m, {512, 32, 9}, p, FlexGenT4());
  EXPECT_EQ(two.num_blocks, 2);
  EXPECT_DOUBLE_EQ(two.total_s, 2 * one.block_s);
  const CostEstimate open = EstimateCost(m, {512, 32, 0}, p, FlexGenT4());
  EXPECT_DOUBLE_EQ(open.throughput_tokens_per_s, one.throughput_tokens_per_s);
}

// A tensor split between the GPU and another tier has its GPU rows copied into the weight slot.
// The output layer of llama-2-7b is its final norm and its head, so at 20% on the GPU a fifth of
// the head (to within two rows) is copied every token step; at 0% and 100% nothing is; and a
// transformer layer at 20% copies the GPU rows of the one tensor that straddles the boundary,
// less than the layer's 20%. The input embedding gathers rows instead (next test).
TEST(CostModelTest, SplitTensorsCopyTheirGpuRowsIntoTheSlot) {
  const ModelSpec m = Preset("llama-2-7b");
  HardwareSpec hw = FlexGenT4();
  hw.d2d_gbps = 100;
  const double head = double(m.vocab_size) * m.hidden_size * m.weight_dtype_bytes;
  const double row = double(m.hidden_size) * m.weight_dtype_bytes;
  const CostEstimate split = EstimateCost(m, {512, 32, 0}, Split(20, 80, 0, 100, 16, 4), hw);
  EXPECT_NEAR(split.decode.output.d2d_s, 0.2 * head / 100e9, 2 * row / 100e9);
  EXPECT_EQ(split.decode.input.d2d_s, 0);
  const double layer =
      4.0 * m.hidden_size * m.hidden_size + 3.0 * m.hidden_size * m.intermediate_size;
  EXPECT_GT(split.decode.layer.d2d_s, 0);
  EXPECT_LT(split.decode.layer.d2d_s, 0.2 * layer * m.weight_dtype_bytes / 100e9);
  EXPECT_EQ(split.decode.layer.h2d_lane_s(), split.decode.layer.h2d_s + split.decode.layer.d2d_s);
  for (int gpu : {0, 100}) {
    const CostEstimate whole =
        EstimateCost(m, {512, 32, 0}, Split(gpu, 100 - gpu, 0, 100, 16, 4), hw);
    EXPECT_EQ(whole.decode.input.d2d_s + whole.decode.layer.d2d_s + whole.decode.output.d2d_s, 0)
        << gpu << "% on the GPU";
  }
  hw.d2d_gbps = 0;  // absent: half the device memory bandwidth
  const CostEstimate by_memory = EstimateCost(m, {512, 32, 0}, Split(20, 80, 0, 100, 16, 4), hw);
  EXPECT_NEAR(by_memory.decode.output.d2d_s,
              split.decode.output.d2d_s * 100 / (hw.gpu_memory_gbps / 2), 1e-12);
}

// The emulated device's copies share the host's memory bus with its GEMMs: beside a transformer
// layer whose weights do not fit in the device cache they run at the profile's
// copy_beside_gemm_gbps, both ways; beside one that fits, and for the output layer's weights
// (loaded beside the last layer), at h2d_gbps. Written out for tinyllama-1.1b in fp32 (a 176 MB
// layer) with its weights and activations on the CPU.
TEST(CostModelTest, EmulatedCopiesBesideStreamingGemmsRunAtTheirOwnRate) {
  ModelSpec m = Preset("tinyllama-1.1b");
  m.weight_dtype_bytes = 4;
  const double layer = 4 * (2 * 2048 + 2048.0 * 2048 * 2 + 256.0 * 2048 * 2 + 5632.0 * 2048 * 3);
  const double head = 4 * 32000.0 * 2048 + 4 * 2048;  // lm_head and the final norm
  HardwareSpec hw = FlexGenT4();
  hw.h2d_gbps = 10;
  hw.copy_beside_gemm_gbps = 4;
  hw.gpu_cache_bytes = 32 << 20;
  const Plan p = PlanFromFlexGenPercent({0, 100, 100, 0, 100, 0}, 2, 2).value();
  const Workload w{64, 8, 0};
  CostEstimate e = EstimateCost(m, w, p, hw);
  EXPECT_NEAR(e.decode.layer.h2d_s, layer / 4e9, 1e-12);
  EXPECT_NEAR(e.decode.output.h2d_s, head / 10e9, 1e-12);
  hw.gpu_cache_bytes = int64_t{1} << 30;  // the layer fits: its GEMMs stream nothing
  EXPECT_NEAR(EstimateCost(m, w, p, hw).decode.layer.h2d_s, layer / 10e9, 1e-12);
  hw.gpu_cache_bytes = 32 << 20;
  hw.copy_beside_gemm_gbps = 0;  // not measured (a GPU)
  EXPECT_NEAR(EstimateCost(m, w, p, hw).decode.layer.h2d_s, layer / 10e9, 1e-12);
}

// The input embedding's load brings the rows of the block's tokens (src/runtime/input_rows.h):
// every prompt token's at the prefill (up to the table's rows) and its positions', one row per
// sequence in a decode step; a row read from disk costs at least a 4 KiB page. Written out for
// opt-6.7b (vocab 50272, 2050 position rows, hidden 4096, fp16) with 4 x 2 sequences.
TEST(CostModelTest, InputEmbeddingGathersTheRowsOfTheBlocksTokens) {
  const ModelSpec m = Preset("opt-6.7b");
  ASSERT_EQ(m.position_embedding_rows, 2050);
  const HardwareSpec hw = FlexGenT4();
  const double row = 4096.0 * 2, h2d = hw.h2d_gbps * 1e9, disk = hw.disk_read_gbps * 1e9;
  const CostEstimate cpu = EstimateCost(m, {512, 32, 0}, Split(0, 100, 100, 0, 4, 2), hw);
  EXPECT_NEAR(cpu.prefill.input.h2d_s, (8 * 512 + 512) * row / h2d, 1e-12);
  EXPECT_NEAR(cpu.decode.input.h2d_s, (8 + 8) * row / h2d, 1e-12);
  EXPECT_EQ(cpu.decode.input.disk_read_s, 0);
  const CostEstimate on_disk = EstimateCost(m, {512, 32, 0}, Split(0, 0, 100, 0, 4, 2), hw);
  EXPECT_NEAR(on_disk.decode.input.disk_read_s, (8 + 8) * row / disk, 1e-12);
  // A block of more prompt tokens than the vocabulary reads each row of the table once.
  const CostEstimate big = EstimateCost(m, {2000, 32, 0}, Split(0, 100, 100, 0, 16, 2), hw);
  EXPECT_NEAR(big.prefill.input.h2d_s, (50272 + 2000) * row / h2d, 1e-12);
  // Nothing moves when the weights are all on the GPU.
  const CostEstimate gpu = EstimateCost(m, {512, 32, 0}, Split(100, 0, 100, 0, 4, 2), hw);
  EXPECT_EQ(gpu.prefill.input.h2d_s + gpu.decode.input.h2d_s, 0);
}

// With a GEMM rate curve each GEMM runs at the curve's rate for its rows: a micro-batch's prompt
// tokens at the prefill, its sequences in decode and in the output layer. Without one, the
// prefill and decode rates whatever the rows. Written out for tinyllama-1.1b (44.0 M-parameter
// layers, a 65.5 M-parameter output projection) all on the GPU, with a memory bandwidth that keeps
// every GEMM compute-bound.
TEST(CostModelTest, GemmsRunAtTheCurvesRateForTheirRows) {
  const ModelSpec m = Preset("tinyllama-1.1b");
  const double layer = 2048.0 * 2048 * 2 + 2048.0 * 256 * 2 + 2048.0 * 5632 * 3;
  const double output = 32000.0 * 2048;
  // GEMM seconds of a layer step: two FLOPs per parameter and row, for all of a block's rows.
  const auto gemm_s = [](double rows, double params, double tflops) {
    return 2 * rows * params / (tflops * 1e12);
  };
  HardwareSpec hw = FlexGenT4();
  hw.gpu_memory_gbps = 1e9;
  const Workload w{64, 8, 0};
  const Plan narrow = Split(100, 0, 100, 0, 2, 2);  // 2 micro-batches of 2 sequences
  const Plan wide = Split(100, 0, 100, 0, 8, 2);    // 2 micro-batches of 8 sequences

  const CostEstimate plain = EstimateCost(m, w, narrow, hw);
  const double prefill_s = gemm_s(4 * 64, layer, 21.24);
  EXPECT_NEAR(plain.prefill.layer.gpu_gemm_s, prefill_s, 1e-9 * prefill_s);
  EXPECT_NEAR(plain.decode.layer.gpu_gemm_s, gemm_s(4, layer, 4.3), 1e-9 * gemm_s(4, layer, 4.3));
  const CostEstimate plain_wide = EstimateCost(m, w, wide, hw);
  EXPECT_NEAR(plain_wide.decode.layer.gpu_gemm_s, 4 * plain.decode.layer.gpu_gemm_s,
              1e-9 * plain_wide.decode.layer.gpu_gemm_s);

  // 128 rows (2 x 64 prompt tokens) at four times the prefill rate; 2 rows at 1 + 7 * 1/4 =
  // 2.75 TFLOPS, 8 at 1 + 7 * 3/4 = 6.25; 512 (8 x 64) two thirds of the way from 128 to 1024.
  hw.gpu_gemm_tflops_by_rows = {{1, 1}, {16, 8}, {128, 4 * 21.24}, {1024, 8 * 21.24}};
  const CostEstimate curved = EstimateCost(m, w, narrow, hw);
  EXPECT_NEAR(curved.prefill.layer.gpu_gemm_s, prefill_s / 4, 1e-9 * prefill_s);
  const double decode_s = gemm_s(4, layer, 2.75), output_s = gemm_s(4, output, 2.75);
  EXPECT_NEAR(curved.decode.layer.gpu_gemm_s, decode_s, 1e-9 * decode_s);
  EXPECT_NEAR(curved.decode.output.gpu_gemm_s, output_s, 1e-9 * output_s);
  // The output layer computes one row per sequence at the prefill too.
  EXPECT_NEAR(curved.prefill.output.gpu_gemm_s, output_s, 1e-9 * output_s);

  const CostEstimate curved_wide = EstimateCost(m, w, wide, hw);
  const double wide_s = gemm_s(16, layer, 6.25);
  EXPECT_NEAR(curved_wide.decode.layer.gpu_gemm_s, wide_s, 1e-9 * wide_s);
  EXPECT_LT(curved_wide.decode.layer.gpu_gemm_s / 16, curved.decode.layer.gpu_gemm_s / 4);
  const double wide_prefill_s = gemm_s(16 * 64, layer, (4 + 4 * 2.0 / 3) * 21.24);
  EXPECT_NEAR(curved_wide.prefill.layer.gpu_gemm_s, wide_prefill_s, 1e-9 * wide_prefill_s);
}

}  // namespace
}  // namespace strata
