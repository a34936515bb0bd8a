// What the CUDA backend decides without CUDA, checked on any machine (no GPU, no `gpu` label):
// its scratch sizes for the fixture models' shapes against the buffers its ops ask for, GEMM
// selection, the mapping of CUDA errors to Status, and offsets in a device arena (a fake one with
// no memory, the way the CUDA arena's spans are turned into addresses).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "kernels/cuda/decode_q4c_params.h"
#include "kernels/cuda/params.h"
#include "policy/plan.h"
#include "src/backend/cuda/cuda_scratch.h"
#include "src/backend/cuda/cuda_status.h"
#include "src/backend/cuda/gemm_plans.h"
#include "src/backend/memory.h"
#include "src/memory/placement.h"
#include "src/model/model.h"

namespace strata {
namespace {

using B = CudaScratchBuffer;

std::unique_ptr<Model> Load(const std::string& name) {
  auto m = LoadModel(std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/" + name);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

Plan CachePlan(bool compress_cache, CacheKeys keys) {
  Plan plan;
  plan.gpu_batch_size = 4;
  plan.num_gpu_batches = 2;
  plan.compress_cache = compress_cache;
  plan.cache_keys = keys;
  return plan;
}

// ---- scratch sizes ----

// llama-gqa (vocab 512, hidden 64, intermediate 160, 4 heads, 2 KV heads, head_dim 16, BF16),
// blocks of 4 sequences of 8 prompt tokens and 12 slots, the default 4-bit cache: every buffer by
// hand.
TEST(CudaScratchTest, TheFixtureGivesTheBuffersItsOpsUse) {
  auto model = Load("llama-gqa");
  ASSERT_NE(model, nullptr);
  const OpLimits l = OpLimitsOf(*model, CachePlan(true, CacheKeys::kChannel), {4, 2, 8, 12});
  EXPECT_EQ(l.rows, 32);
  EXPECT_EQ(l.linear_in, 160);
  EXPECT_EQ(l.linear_out, 512);
  EXPECT_EQ(l.linear_weight_elements, 512 * 64);
  EXPECT_TRUE(l.half_weights);

  const CudaScratchLayout s = CudaScratchLayoutFor(l, /*fp32_gemm=*/false, 12345);
  EXPECT_EQ(s.bytes_of(B::kCublasWorkspace), uint64_t{32} << 20);
  EXPECT_EQ(s.bytes_of(B::kRoundedX), 32u * 160 * 2);  // the MLP's down projection's input
  EXPECT_EQ(s.bytes_of(B::kWidenedMatrix), 0u);        // not fp32_gemm
  EXPECT_EQ(s.bytes_of(B::kWidenedVector0), 512u * 4);
  EXPECT_EQ(s.bytes_of(B::kWidenedVector1), 512u * 4);
  EXPECT_EQ(s.bytes_of(B::kStaging0), 32u * 4);  // 32 token ids; 4 sampling parameters are 128 too
  EXPECT_EQ(s.bytes_of(B::kStaging1), 4u * 2 * sizeof(kernels::cuda::Q4ChannelRow));
  EXPECT_EQ(s.bytes_of(B::kKvHeadRows), 2u * 8 * 16 * 4);
  EXPECT_EQ(s.bytes_of(B::kDecodeWorkspace), 0u);  // 12 slots: one split, no partial outputs
  EXPECT_EQ(s.bytes_of(B::kLimitedLogits), 4u * 512 * 4);
  EXPECT_EQ(s.bytes_of(B::kSamplingWorkspace), 12345u);
  EXPECT_EQ(s.bytes_of(B::kResults), 4u * 8);
  EXPECT_EQ(s.bytes_of(B::kRoundedWeight), 0u);     // fp32 activations
  EXPECT_EQ(s.bytes_of(B::kLinearBias), 0u);        // likewise (biases widen to fp32)
  EXPECT_EQ(s.bytes_of(B::kWideActivations0), 0u);  // likewise
  // Each rounded up to 256 bytes, one after another.
  EXPECT_EQ(s.total_bytes,
            (uint64_t{32} << 20) + 10240 + 2048 + 2048 + 256 + 512 + 1024 + 8192 + 12544 + 256);
  EXPECT_EQ(s.total_bytes, 33591552u);
}

// llama3-rope is stored in fp32: its Linears neither round nor widen.
TEST(CudaScratchTest, Fp32WeightsNeedNoConversionBuffers) {
  auto model = Load("llama3-rope");
  ASSERT_NE(model, nullptr);
  const OpLimits l = OpLimitsOf(*model, CachePlan(false, CacheKeys::kChannel), {4, 2, 8, 12});
  EXPECT_FALSE(l.half_weights);
  for (bool fp32_gemm : {false, true}) {
    const CudaScratchLayout s = CudaScratchLayoutFor(l, fp32_gemm, 0);
    EXPECT_EQ(s.bytes_of(B::kRoundedX), 0u);
    EXPECT_EQ(s.bytes_of(B::kWidenedMatrix), 0u);
    EXPECT_EQ(s.bytes_of(B::kWidenedVector0), 0u);
    EXPECT_EQ(s.bytes_of(B::kKvHeadRows), 0u);  // no 4-bit cache
  }
}

// The sizes for every fixture (F16, BF16 and F32 weights) bound what each op asks for at the
// block's largest step, for each activation type: each Linear of the model (its real weights'
// shapes and types) at the prefill rows, by ChooseGemm, and the 4-bit cache ops at a prefill and
// at the last decode step.
TEST(CudaScratchTest, EveryFixtureLinearFitsItsReservation) {
  for (const char* name : {"opt", "llama-gqa", "llama3-rope", "llama-bias", "qwen2", "qwen3"}) {
    SCOPED_TRACE(name);
    auto model = Load(name);
    ASSERT_NE(model, nullptr);
    for (SpanType activations : {SpanType::kF32, SpanType::kF16, SpanType::kBF16}) {
      for (bool fp32_gemm : {false, true}) {
        SCOPED_TRACE(SpanTypeName(activations));
        const OpLimits l = OpLimitsOf(*model, CachePlan(true, CacheKeys::kChannel),
                                      {3, 1, 7, 40}, activations);
        const CudaScratchLayout s = CudaScratchLayoutFor(l, fp32_gemm, 0);
        const ModelWeights& w = model->weights();
        std::vector<const TensorView*> linears = {&w.lm_head};
        for (const LayerWeights& layer : w.layers) {
          for (const TensorView* t : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate,
                                      &layer.w_up, &layer.w_down}) {
            if (t->present()) linears.push_back(t);
          }
        }
        for (const TensorView* t : linears) {
          const int64_t out = t->dim(0), in = t->dim(1);
          EXPECT_LE(in, l.linear_in);
          EXPECT_LE(out, l.linear_out);
          const GemmChoice g =
              ChooseGemm(activations, SpanTypeOf(t->dtype), fp32_gemm, l.rows, in, out);
          EXPECT_LE(g.rounded_x_bytes, s.bytes_of(B::kRoundedX));
          EXPECT_LE(g.widened_weight_bytes, s.bytes_of(B::kWidenedMatrix));
          EXPECT_LE(g.rounded_weight_bytes, s.bytes_of(B::kRoundedWeight));
          if (l.half_weights) {
            EXPECT_LE(static_cast<uint64_t>(out) * 4, s.bytes_of(B::kWidenedVector1));
          }
        }
        EXPECT_GE(s.bytes_of(B::kKvHeadRows), KvHeadRowsBytes(7, model->config().head_dim));
        EXPECT_GE(s.bytes_of(B::kStaging0), 3u * 7 * sizeof(int32_t));
        EXPECT_GE(s.bytes_of(B::kStaging0), 3u * sizeof(kernels::cuda::SamplingParams));
        if (activations != SpanType::kF32) {
          // The 4-bit cache ops' fp32 copies: the prefill's k_new (3 x 7 tokens) and a decode
          // step's q.
          const ModelConfig& c = model->config();
          for (B wide : {B::kWideActivations0, B::kWideActivations1}) {
            EXPECT_GE(s.bytes_of(wide), 3u * 7 * c.num_kv_heads * c.head_dim * 4);
            EXPECT_GE(s.bytes_of(wide), 3u * c.num_heads * c.head_dim * 4);
          }
        }
      }
    }
  }
}

// fp16/bf16 activations: no rounded activations or widened weights (the GEMMs take the
// activations as they are); weights of another type rounded to the activations', the largest.
TEST(CudaScratchTest, HalfActivationsRoundOnlyWeightsOfAnotherType) {
  auto fp32 = Load("llama3-rope");  // F32 weights
  ASSERT_NE(fp32, nullptr);
  for (SpanType activations : {SpanType::kF16, SpanType::kBF16}) {
    const OpLimits l =
        OpLimitsOf(*fp32, CachePlan(false, CacheKeys::kChannel), {4, 1, 8, 12}, activations);
    ASSERT_FALSE(l.half_weights);
    EXPECT_EQ(l.rounded_weight_elements, l.linear_weight_elements);
    for (bool fp32_gemm : {false, true}) {
      const CudaScratchLayout s = CudaScratchLayoutFor(l, fp32_gemm, 0);
      EXPECT_EQ(s.bytes_of(B::kRoundedWeight), static_cast<uint64_t>(l.linear_weight_elements) * 2);
      EXPECT_EQ(s.bytes_of(B::kRoundedX), 0u);
      EXPECT_EQ(s.bytes_of(B::kWidenedMatrix), 0u);
      EXPECT_EQ(s.bytes_of(B::kWidenedVector0), 0u);  // norm weights and biases are fp32
      // The fp32 biases rounded to the activations' type for cuBLASLt's epilogue.
      EXPECT_EQ(s.bytes_of(B::kLinearBias), static_cast<uint64_t>(l.linear_out) * 2);
    }
  }
  auto bf16 = Load("llama-gqa");  // BF16 weights
  ASSERT_NE(bf16, nullptr);
  const OpLimits same =
      OpLimitsOf(*bf16, CachePlan(false, CacheKeys::kChannel), {4, 1, 8, 12}, SpanType::kBF16);
  EXPECT_EQ(same.rounded_weight_elements, 0);  // of the activations' type: nothing to round
  const CudaScratchLayout s = CudaScratchLayoutFor(same, /*fp32_gemm=*/true, 0);
  EXPECT_EQ(s.bytes_of(B::kRoundedWeight), 0u);
  EXPECT_EQ(s.bytes_of(B::kRoundedX), 0u);
  EXPECT_EQ(s.bytes_of(B::kWidenedMatrix), 0u);
  EXPECT_EQ(s.bytes_of(B::kWidenedVector0), 512u * 4);  // half norm weights still widen
  // fp16 activations over BF16 weights (--activations fp16): the largest one rounded.
  const OpLimits other =
      OpLimitsOf(*bf16, CachePlan(false, CacheKeys::kChannel), {4, 1, 8, 12}, SpanType::kF16);
  EXPECT_EQ(other.rounded_weight_elements, other.linear_weight_elements);
  EXPECT_EQ(CudaScratchLayoutFor(other, false, 0).bytes_of(B::kRoundedWeight),
            static_cast<uint64_t>(other.linear_weight_elements) * 2);
}

// llama-gqa (head_dim 16) with bf16 activations and the default 4-bit cache: two fp32 copies of
// the larger of the prefill's k_new (4 x 8 tokens x 2 KV heads x 16) and a decode step's q or
// out (4 x 4 heads x 16); no fp16 decode (bf16, and head_dim 16 is not the kernel's).
TEST(CudaScratchTest, HalfActivationsWidenForTheFp32Kernels) {
  auto model = Load("llama-gqa");
  ASSERT_NE(model, nullptr);
  OpLimits l =
      OpLimitsOf(*model, CachePlan(true, CacheKeys::kChannel), {4, 2, 8, 12}, SpanType::kBF16);
  const CudaScratchLayout s = CudaScratchLayoutFor(l, /*fp32_gemm=*/false, 0);
  EXPECT_EQ(WideActivationsBytes(l), 4u * 8 * 2 * 16 * 4);
  EXPECT_EQ(s.bytes_of(B::kWideActivations0), 4u * 8 * 2 * 16 * 4);
  EXPECT_EQ(s.bytes_of(B::kWideActivations1), 4u * 8 * 2 * 16 * 4);
  EXPECT_EQ(s.bytes_of(B::kDecodeWorkspace), 0u);
  EXPECT_EQ(s.bytes_of(B::kRoundedX), 0u);
  EXPECT_EQ(s.bytes_of(B::kRoundedWeight), 0u);  // BF16 weights, bf16 activations
  // Without the 4-bit cache only a decode step's q and out are widened (for fp16 decode).
  l.kv_q4 = false;
  EXPECT_EQ(WideActivationsBytes(l), 4u * 4 * 16 * 4);
  l.activations = SpanType::kF32;
  EXPECT_EQ(WideActivationsBytes(l), 0u);
}

// Attention's fp16 decode runs on the flash-decoding kernel at head_dim 64 and 128, every query
// head of the batch planned at once: its partial outputs for the longest cache.
TEST(CudaScratchTest, Fp16DecodeAttentionReservesItsPartialOutputs) {
  EXPECT_TRUE(DecodesOnF16Kernel(SpanType::kF16, 64));
  EXPECT_TRUE(DecodesOnF16Kernel(SpanType::kF16, 128));
  EXPECT_FALSE(DecodesOnF16Kernel(SpanType::kF16, 96));
  EXPECT_FALSE(DecodesOnF16Kernel(SpanType::kBF16, 128));
  EXPECT_FALSE(DecodesOnF16Kernel(SpanType::kF32, 128));
  OpLimits l;
  l.rows = 8;
  l.batch = 8;
  l.num_heads = 32;
  l.num_kv_heads = 8;
  l.head_dim = 128;
  l.step_tokens = 1;
  l.max_len = 4096;
  l.activations = SpanType::kF16;
  // 256 tiles of 16 slots, 8 a split: 32 splits of 128 values and a log-sum-exp.
  EXPECT_EQ(CudaScratchLayoutFor(l, false, 0).bytes_of(B::kDecodeWorkspace),
            8u * 32 * 32 * 129 * 4);
  EXPECT_EQ(CudaScratchLayoutFor(l, false, 0).bytes_of(B::kWideActivations0), 8u * 32 * 128 * 4);
  l.activations = SpanType::kBF16;  // the causal kernel: no partial outputs
  EXPECT_EQ(CudaScratchLayoutFor(l, false, 0).bytes_of(B::kDecodeWorkspace), 0u);
}

TEST(CudaScratchTest, HalfWeightsRoundTheActivationsOrWidenTheLargestWeight) {
  auto model = Load("llama-gqa");
  ASSERT_NE(model, nullptr);
  OpLimits l = OpLimitsOf(*model, CachePlan(false, CacheKeys::kChannel), {4, 1, 8, 12});
  l.half_weights = true;
  const CudaScratchLayout rounded = CudaScratchLayoutFor(l, /*fp32_gemm=*/false, 0);
  EXPECT_EQ(rounded.bytes_of(B::kRoundedX), 32u * 160 * 2);
  EXPECT_EQ(rounded.bytes_of(B::kWidenedMatrix), 0u);
  EXPECT_EQ(rounded.bytes_of(B::kWidenedVector0), 512u * 4);
  EXPECT_EQ(rounded.bytes_of(B::kWidenedVector1), 512u * 4);
  const CudaScratchLayout widened = CudaScratchLayoutFor(l, /*fp32_gemm=*/true, 0);
  EXPECT_EQ(widened.bytes_of(B::kRoundedX), 0u);
  EXPECT_EQ(widened.bytes_of(B::kWidenedMatrix), 512u * 64 * 4);
  // No 4-bit cache: none of its buffers.
  EXPECT_EQ(rounded.bytes_of(B::kKvHeadRows), 0u);
  EXPECT_EQ(rounded.bytes_of(B::kDecodeWorkspace), 0u);
  EXPECT_EQ(rounded.bytes_of(B::kStaging1), 16u / 2 * 4);  // RoPE's frequencies
}

TEST(CudaScratchTest, LongCachesSplitDecodeAttentionAndReserveItsPartialOutputs) {
  EXPECT_EQ(DecodeSplitsBound(12, kQ4ChannelTileTokens), 1);
  EXPECT_EQ(DecodeSplitsBound(4096, kQ4ChannelTileTokens), 16);  // 128 tiles, 8 a split
  EXPECT_EQ(DecodeSplitsBound(4096, kDecodeTileTokens), 32);
  EXPECT_EQ(DecodeSplitsBound(1 << 20, kDecodeTileTokens), kDecodeMaxSplits);
  auto model = Load("llama-gqa");
  ASSERT_NE(model, nullptr);
  // Keys by channel plan every query head of the batch at once: 4 x 4 heads x 16 splits x 17.
  const OpLimits channel =
      OpLimitsOf(*model, CachePlan(true, CacheKeys::kChannel), {4, 1, 8, 4096});
  EXPECT_EQ(CudaScratchLayoutFor(channel, false, 0).bytes_of(B::kDecodeWorkspace),
            4u * 4 * 16 * 17 * 4);
  // Per-token keys: one KV head's group of 2 query heads at a time, 32 splits.
  const OpLimits plain = OpLimitsOf(*model, CachePlan(true, CacheKeys::kPlain), {4, 1, 8, 4096});
  EXPECT_FALSE(plain.kv_q4_format.keys_by_channel);
  EXPECT_EQ(CudaScratchLayoutFor(plain, false, 0).bytes_of(B::kDecodeWorkspace), 2u * 32 * 17 * 4);
}

TEST(CudaScratchTest, BuffersLieAlignedOneAfterAnotherWithinTheTotal) {
  auto model = Load("qwen3");
  ASSERT_NE(model, nullptr);
  OpLimits l = OpLimitsOf(*model, CachePlan(true, CacheKeys::kChannel), {5, 1, 9, 3000});
  l.half_weights = true;
  const CudaScratchLayout s = CudaScratchLayoutFor(l, false, 1001);
  for (int i = 0; i < kCudaScratchBuffers; ++i) {
    SCOPED_TRACE(CudaScratchBufferName(static_cast<B>(i)));
    EXPECT_EQ(s.offset[i] % kCudaScratchAlignment, 0u);
    EXPECT_LE(s.offset[i] + s.bytes[i], s.total_bytes);
    if (i > 0) {
      EXPECT_GE(s.offset[i], s.offset[i - 1] + s.bytes[i - 1]);
    }
  }
  EXPECT_EQ(s.total_bytes % kCudaScratchAlignment, 0u);
  EXPECT_EQ(std::string(CudaScratchBufferName(B::kRoundedX)), "rounded_x");
  EXPECT_EQ(std::string(CudaScratchBufferName(B::kSamplingWorkspace)), "sampling_workspace");
}

// ---- GEMM selection ----

TEST(GemmChoiceTest, Fp32WeightsRunAnFp32GemmWithNoScratch) {
  for (bool fp32_gemm : {false, true}) {
    const GemmChoice g = ChooseGemm(SpanType::kF32, SpanType::kF32, fp32_gemm, 8, 64, 512);
    EXPECT_EQ(g.path, GemmPath::kFp32);
    EXPECT_EQ(g.rounded_x_bytes, 0u);
    EXPECT_EQ(g.widened_weight_bytes, 0u);
  }
}

TEST(GemmChoiceTest, HalfWeightsRoundTheActivationsForTensorCores) {
  for (SpanType t : {SpanType::kF16, SpanType::kBF16}) {
    const GemmChoice g = ChooseGemm(SpanType::kF32, t, /*fp32_gemm=*/false, 8, 64, 512);
    EXPECT_EQ(g.path, GemmPath::kHalfTensorCore);
    EXPECT_EQ(g.rounded_x_bytes, 8u * 64 * 2);
    EXPECT_EQ(g.widened_weight_bytes, 0u);
    EXPECT_EQ(std::string(GemmPathName(g.path)), "half_tensor_core");
  }
}

TEST(GemmChoiceTest, Fp32GemmWidensAHalfWeight) {
  const GemmChoice g = ChooseGemm(SpanType::kF32, SpanType::kBF16, /*fp32_gemm=*/true, 8, 64, 512);
  EXPECT_EQ(g.path, GemmPath::kWidenedFp32);
  EXPECT_EQ(g.rounded_x_bytes, 0u);
  EXPECT_EQ(g.widened_weight_bytes, 512u * 64 * 4);
}

TEST(GemmChoiceTest, HalfActivationsTakeWeightsOfTheirTypeAsTheyAre) {
  for (SpanType t : {SpanType::kF16, SpanType::kBF16}) {
    for (bool fp32_gemm : {false, true}) {
      const GemmChoice g = ChooseGemm(t, t, fp32_gemm, 8, 64, 512);
      EXPECT_EQ(g.path, GemmPath::kHalf);
      EXPECT_EQ(g.rounded_x_bytes, 0u);
      EXPECT_EQ(g.widened_weight_bytes, 0u);
      EXPECT_EQ(g.rounded_weight_bytes, 0u);
      EXPECT_EQ(std::string(GemmPathName(g.path)), "half");
    }
  }
}

TEST(GemmChoiceTest, HalfActivationsRoundAWeightOfAnotherType) {
  struct Case {
    SpanType activations, weight;
  };
  for (const Case c :
       {Case{SpanType::kF16, SpanType::kF32}, Case{SpanType::kBF16, SpanType::kF32},
        Case{SpanType::kF16, SpanType::kBF16}, Case{SpanType::kBF16, SpanType::kF16}}) {
    for (bool fp32_gemm : {false, true}) {
      const GemmChoice g = ChooseGemm(c.activations, c.weight, fp32_gemm, 8, 64, 512);
      EXPECT_EQ(g.path, GemmPath::kRoundedWeight);
      EXPECT_EQ(g.rounded_weight_bytes, 512u * 64 * 2);
      EXPECT_EQ(g.rounded_x_bytes, 0u);
      EXPECT_EQ(g.widened_weight_bytes, 0u);
      EXPECT_EQ(std::string(GemmPathName(g.path)), "rounded_weight");
    }
  }
}

TEST(GemmChoiceDeathTest, AWeightOrActivationsOfAnotherTypeIsABug) {
  EXPECT_DEATH(ChooseGemm(SpanType::kF32, SpanType::kQ4, false, 1, 64, 64), "not F32, F16 or BF16");
  EXPECT_DEATH(ChooseGemm(SpanType::kBytes, SpanType::kF16, false, 1, 64, 64),
               "activations are not F32, F16 or BF16");
}

// ---- cuBLASLt's GEMMs: which run there, their epilogues, the keys of their kept plans ----

TEST(LtGemmPlanTest, EveryHalfInputPathRunsOnCublasLtAndTheFp32OnesDoNot) {
  EXPECT_TRUE(RunsOnLt(GemmPath::kHalfTensorCore));
  EXPECT_TRUE(RunsOnLt(GemmPath::kHalf));
  EXPECT_TRUE(RunsOnLt(GemmPath::kRoundedWeight));
  EXPECT_FALSE(RunsOnLt(GemmPath::kFp32));
  EXPECT_FALSE(RunsOnLt(GemmPath::kWidenedFp32));
}

TEST(LtGemmPlanTest, TheEpilogueAddsTheBiasThenTheRelu) {
  EXPECT_EQ(EpilogueOf(false, false), GemmEpilogue::kNone);
  EXPECT_EQ(EpilogueOf(true, false), GemmEpilogue::kBias);
  EXPECT_EQ(EpilogueOf(false, true), GemmEpilogue::kRelu);
  EXPECT_EQ(EpilogueOf(true, true), GemmEpilogue::kBiasRelu);
  EXPECT_STREQ(GemmEpilogueName(GemmEpilogue::kBiasRelu), "bias_relu");
}

void* Address(uintptr_t a) { return reinterpret_cast<void*>(a); }

TEST(LtGemmPlanTest, AlignmentIsTheLargestPowerOfTwoUpTo256) {
  EXPECT_EQ(AlignmentOf(nullptr), 256u);
  EXPECT_EQ(AlignmentOf(Address(0x7f0000001000)), 256u);
  EXPECT_EQ(AlignmentOf(Address(0x7f0000001080)), 128u);
  EXPECT_EQ(AlignmentOf(Address(0x7f0000001010)), 16u);
  EXPECT_EQ(AlignmentOf(Address(0x7f0000001002)), 2u);
  EXPECT_EQ(AlignmentOf(Address(0x7f0000001001)), 1u);
}

// A key holds the shape, the types, the epilogue and each operand's alignment: a change in any
// one of them is another key (another plan); the same GEMM on other aligned buffers is the same.
TEST(LtGemmPlanTest, AKeyIsItsShapeTypesEpilogueAndAlignments) {
  const GemmOperands base{Address(0x1000), Address(0x2000), nullptr, Address(0x3000)};
  const LtGemmKey key = LtGemmKeyOf(8, 512, 64, SpanType::kF16, SpanType::kF16, false, base);
  EXPECT_EQ(key.m, 8);
  EXPECT_EQ(key.n, 512);
  EXPECT_EQ(key.k, 64);
  EXPECT_EQ(key.epilogue, GemmEpilogue::kNone);
  EXPECT_EQ(key.x_alignment, 256u);
  const GemmOperands moved{Address(0x9000), Address(0xa000), nullptr, Address(0xb000)};
  EXPECT_EQ(LtGemmKeyOf(8, 512, 64, SpanType::kF16, SpanType::kF16, false, moved), key);
  EXPECT_EQ(LtGemmKeyHash{}(LtGemmKeyOf(8, 512, 64, SpanType::kF16, SpanType::kF16, false, moved)),
            LtGemmKeyHash{}(key));

  GemmOperands with_bias = base;
  with_bias.bias = Address(0x4008);
  GemmOperands shifted_x = base;
  shifted_x.x = Address(0x1002);
  GemmOperands shifted_y = base;
  shifted_y.y = Address(0x3040);
  const LtGemmKey others[] = {
      LtGemmKeyOf(9, 512, 64, SpanType::kF16, SpanType::kF16, false, base),
      LtGemmKeyOf(8, 513, 64, SpanType::kF16, SpanType::kF16, false, base),
      LtGemmKeyOf(8, 512, 65, SpanType::kF16, SpanType::kF16, false, base),
      LtGemmKeyOf(8, 512, 64, SpanType::kBF16, SpanType::kBF16, false, base),
      LtGemmKeyOf(8, 512, 64, SpanType::kF16, SpanType::kF32, false, base),
      LtGemmKeyOf(8, 512, 64, SpanType::kF16, SpanType::kF16, true, base),
      LtGemmKeyOf(8, 512, 64, SpanType::kF16, SpanType::kF16, false, with_bias),
      LtGemmKeyOf(8, 512, 64, SpanType::kF16, SpanType::kF16, false, shifted_x),
      LtGemmKeyOf(8, 512, 64, SpanType::kF16, SpanType::kF16, false, shifted_y),
  };
  std::unordered_set<LtGemmKey, LtGemmKeyHash> keys = {key};
  for (const LtGemmKey& other : others) {
    EXPECT_FALSE(other == key);
    keys.insert(other);
  }
  EXPECT_EQ(keys.size(), 1 + std::size(others));
  EXPECT_EQ(others[6].epilogue, GemmEpilogue::kBias);
  EXPECT_EQ(others[6].bias_alignment, 8u);
  EXPECT_EQ(others[7].x_alignment, 2u);
  EXPECT_EQ(others[8].y_alignment, 64u);
}

TEST(LtGemmPlanDeathTest, Fp32InputsOrAnOutputOfAThirdTypeIsABug) {
  const GemmOperands o{Address(0x1000), Address(0x2000), nullptr, Address(0x3000)};
  EXPECT_DEATH(LtGemmKeyOf(8, 64, 64, SpanType::kF32, SpanType::kF32, false, o),
               "inputs are not fp16 or bf16");
  EXPECT_DEATH(LtGemmKeyOf(8, 64, 64, SpanType::kF16, SpanType::kBF16, false, o),
               "neither fp32 nor of its inputs' type");
}

// ---- CUDA errors as Status ----

CudaFailure Failure(CudaOperation op, int error, const char* name) {
  CudaFailure f;
  f.operation = op;
  f.error = error;
  f.error_name = name;
  f.driver_version = 13000;
  f.runtime_version = 13000;
  return f;
}

bool Has(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(CudaStatusTest, NoDeviceSaysToUseTheCpu) {
  const Status s = CudaFailureStatus(
      Failure(CudaOperation::kFindDevice, cuda_error::kNoDevice, "cudaErrorNoDevice"));
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(Has(s, "no CUDA device is visible")) << s.message();
  EXPECT_TRUE(Has(s, "cudaErrorNoDevice")) << s.message();
  EXPECT_TRUE(Has(s, "--device cpu")) << s.message();
}

TEST(CudaStatusTest, NoDriverIsNoDevice) {
  CudaFailure f =
      Failure(CudaOperation::kFindDevice, cuda_error::kStubLibrary, "cudaErrorStubLibrary");
  f.driver_version = 0;
  const Status s = CudaFailureStatus(f);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(Has(s, "no NVIDIA driver")) << s.message();
  EXPECT_TRUE(Has(s, "--device cpu")) << s.message();
}

// What the runtime says on a machine with no driver at all (CI's): an "insufficient" driver of
// version 0, which is no driver, not an old one.
TEST(CudaStatusTest, AnInsufficientDriverOfVersionZeroIsNoDriver) {
  CudaFailure f = Failure(CudaOperation::kFindDevice, cuda_error::kInsufficientDriver,
                          "cudaErrorInsufficientDriver");
  f.driver_version = 0;
  const Status s = CudaFailureStatus(f);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(Has(s, "no CUDA device is visible")) << s.message();
  EXPECT_TRUE(Has(s, "no NVIDIA driver")) << s.message();
  EXPECT_FALSE(Has(s, "older than")) << s.message();
}

TEST(CudaStatusTest, AnOldDriverNamesBothVersions) {
  CudaFailure f = Failure(CudaOperation::kFindDevice, cuda_error::kInsufficientDriver,
                          "cudaErrorInsufficientDriver");
  f.driver_version = 12040;
  const Status s = CudaFailureStatus(f);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(Has(s, "older than the CUDA runtime")) << s.message();
  EXPECT_TRUE(Has(s, "(12.4 < 13.0")) << s.message();
  EXPECT_TRUE(Has(s, "update the driver or use --device cpu")) << s.message();
  EXPECT_EQ(CudaVersionText(12040), "12.4");
  EXPECT_EQ(CudaVersionText(13010), "13.1");
}

TEST(CudaStatusTest, AFullDeviceNamesTheBytesAndWhatToLower) {
  CudaFailure f = Failure(CudaOperation::kAllocateDeviceTier, cuda_error::kMemoryAllocation,
                          "cudaErrorMemoryAllocation");
  f.bytes = uint64_t{70} << 30;
  f.free_bytes = uint64_t{7} << 29;
  f.total_bytes = uint64_t{80} << 30;
  const Status tier = CudaFailureStatus(f);
  EXPECT_EQ(tier.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Has(tier, "the GPU tier's 70.00 GiB")) << tier.message();
  EXPECT_TRUE(Has(tier, "3.50 GiB of 80.00 GiB free")) << tier.message();
  EXPECT_TRUE(Has(tier, "--gpu-memory")) << tier.message();
  EXPECT_TRUE(Has(tier, "--gpu-memory")) << tier.message();

  f.operation = CudaOperation::kAllocateScratch;
  f.bytes = uint64_t{48} << 20;
  const Status scratch = CudaFailureStatus(f);
  EXPECT_EQ(scratch.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Has(scratch, "scratch of 48.0 MiB")) << scratch.message();
  EXPECT_TRUE(Has(scratch, "--gpu-batch-size")) << scratch.message();
}

TEST(CudaStatusTest, APinRefusedNamesTheLockedMemoryLimit) {
  CudaFailure f = Failure(CudaOperation::kPinHostMemory, 1, "cudaErrorInvalidValue");
  f.bytes = uint64_t{3} << 30;
  const Status s = CudaFailureStatus(f);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Has(s, "cannot pin 3.00 GiB")) << s.message();
  EXPECT_TRUE(Has(s, "ulimit -l")) << s.message();
}

TEST(CudaStatusTest, AnythingElseNamesTheCudaError) {
  const Status s =
      CudaFailureStatus(Failure(CudaOperation::kAllocateScratch, 999, "cudaErrorUnknown"));
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_TRUE(Has(s, "cudaErrorUnknown")) << s.message();
  // Out of memory while looking for a device is no allocation of strata's: not "lower the batch".
  const Status find = CudaFailureStatus(Failure(
      CudaOperation::kFindDevice, cuda_error::kMemoryAllocation, "cudaErrorMemoryAllocation"));
  EXPECT_EQ(find.code(), StatusCode::kIoError);
  EXPECT_FALSE(Has(find, "--gpu-batch-size")) << find.message();
  // Even a success passed by mistake is an error, never an ok Status.
  EXPECT_FALSE(CudaFailureStatus(Failure(CudaOperation::kFindDevice, 0, "cudaSuccess")).ok());
}

// ---- arena offsets on a fake device ----

constexpr char kFake[] = "fake";
constexpr char kOther[] = "other";

// A device arena with no memory: its spans' offsets are what a real backend turns into addresses.
class FakeArena final : public DeviceArena {
 public:
  explicit FakeArena(uint64_t capacity, const char* backend = kFake)
      : DeviceArena(capacity, backend) {}
  static uint64_t Offset(const DeviceSpan& span) {
    ArenaOf(span, kFake);
    return OffsetOf(span);
  }
};

TEST(FakeArenaTest, SpansKeepTheirOffsets) {
  FakeArena arena(1 << 20);
  const DeviceSpan a = arena.Span(4096, 1024, SpanType::kF32);
  EXPECT_EQ(FakeArena::Offset(a), 4096u);
  EXPECT_EQ(a.bytes(), 1024u);
  EXPECT_EQ(a.type(), SpanType::kF32);
  const DeviceSpan b = a.Sub(256, 512, SpanType::kF16);
  EXPECT_EQ(FakeArena::Offset(b), 4096u + 256);
  EXPECT_EQ(b.type(), SpanType::kF16);
  EXPECT_TRUE(b.StartsAt(a, 256));
  EXPECT_FALSE(b.StartsAt(a, 0));
  EXPECT_TRUE(a.Overlaps(b));
  EXPECT_FALSE(a.Overlaps(arena.Span(4096 + 1024, 16)));
  EXPECT_TRUE(arena.Holds(b));
  FakeArena other(1 << 20);
  EXPECT_FALSE(other.Holds(b));
  EXPECT_FALSE(other.Span(4096, 1024).Overlaps(a));
}

TEST(FakeArenaDeathTest, ASpanOfAnotherBackendIsABug) {
  FakeArena foreign(1 << 10, kOther);
  const DeviceSpan s = foreign.Span(0, 16);
  EXPECT_DEATH(FakeArena::Offset(s), "did not make its arena");
}

// The scratch layout as spans of one arena: no two buffers overlap.
TEST(FakeArenaTest, TheScratchBuffersDoNotOverlap) {
  auto model = Load("llama-gqa");
  ASSERT_NE(model, nullptr);
  OpLimits l = OpLimitsOf(*model, CachePlan(true, CacheKeys::kChannel), {4, 1, 8, 2048});
  l.half_weights = true;
  const CudaScratchLayout s = CudaScratchLayoutFor(l, false, 4000);
  FakeArena arena(s.total_bytes);
  std::vector<DeviceSpan> spans;
  for (int i = 0; i < kCudaScratchBuffers; ++i) {
    if (s.bytes[i] > 0) spans.push_back(arena.Span(s.offset[i], s.bytes[i]));
  }
  ASSERT_GE(spans.size(), 10u);
  for (size_t i = 0; i < spans.size(); ++i) {
    for (size_t j = i + 1; j < spans.size(); ++j) EXPECT_FALSE(spans[i].Overlaps(spans[j]));
  }
}

}  // namespace
}  // namespace strata
