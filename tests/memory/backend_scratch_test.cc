// The device backend's own scratch (Backend::ScratchBytes, ReserveScratch) in the device tier:
// the largest op of a block (OpLimitsOf), the capacity that holds the arena and the scratch, and
// the reservation made right after the arena, its failure ending the run. The CPU backend's
// scratch is 0 bytes; a forwarding backend that claims some stands in for a GPU's.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "policy/plan.h"
#include "src/backend/cpu/cpu_backend.h"
#include "tests/backend/forwarding_backend.h"
#include "src/memory/memory_tiers.h"
#include "src/memory/placement.h"
#include "src/model/model.h"
#include "src/model/synthetic_model.h"

namespace strata {
namespace {

// The CPU backend with `scratch_bytes` of scratch of its own: it records each reservation (and
// whether an arena existed then) and fails it with `reserve_status`.
class ScratchBackend final : public ForwardingBackend {
 public:
  explicit ScratchBackend(uint64_t scratch_bytes) : scratch_bytes_(scratch_bytes) {}

  uint64_t ScratchBytes(const OpLimits& limits) const override {
    ++sized;
    last_sized = limits;
    return scratch_bytes_;
  }
  Status ReserveScratch(const OpLimits& limits) override {
    reserved.push_back(limits);
    arenas_at_reserve.push_back(arenas);
    return reserve_status;
  }
  const char* name() const override { return "scratchy"; }
  Result<std::unique_ptr<DeviceArena>> AllocateDeviceArena(uint64_t bytes) override {
    ++arenas;
    return ForwardingBackend::AllocateDeviceArena(bytes);
  }

  mutable int sized = 0;
  mutable OpLimits last_sized;
  int arenas = 0;
  std::vector<OpLimits> reserved;
  std::vector<int> arenas_at_reserve;
  Status reserve_status;

 private:
  uint64_t scratch_bytes_;
};

std::unique_ptr<Model> Load(const std::string& name) {
  auto m = LoadModel(std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/" + name);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

TierLayout GpuLayout(uint64_t bytes) {
  TierLayout layout;
  layout.Reserve(Tier::kGpu, MemoryUse::kWeights, "weights", bytes);
  return layout;
}

bool Has(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// ---- the largest op of a block ----

TEST(OpLimitsTest, AreTheBlocksPrefillAndTheModelsWidestLinear) {
  auto model = Load("opt");  // vocab 512, hidden 64, ffn 192, 4 heads of 16, stored in F16
  ASSERT_NE(model, nullptr);
  Plan plan;
  plan.gpu_batch_size = 3;
  const OpLimits l = OpLimitsOf(*model, plan, {3, 2, 10, 25});
  EXPECT_EQ(l.rows, 30);
  EXPECT_EQ(l.linear_in, 192);
  EXPECT_EQ(l.linear_out, 512);
  EXPECT_EQ(l.linear_weight_elements, 512 * 64);
  EXPECT_TRUE(l.half_weights);
  EXPECT_EQ(l.batch, 3);
  EXPECT_EQ(l.vocab, 512);
  EXPECT_EQ(l.num_heads, 4);
  EXPECT_EQ(l.num_kv_heads, 4);
  EXPECT_EQ(l.head_dim, 16);
  EXPECT_EQ(l.step_tokens, 10);
  EXPECT_EQ(l.max_len, 25);
  EXPECT_FALSE(l.kv_q4);
}

TEST(OpLimitsTest, CarryThePlansCacheFormat) {
  auto model = Load("llama-gqa");
  ASSERT_NE(model, nullptr);
  Plan plan;
  plan.compress_cache = true;
  plan.cache_keys = CacheKeys::kChannel;
  plan.cache_sink = 2;
  plan.cache_window = 64;
  const OpLimits l = OpLimitsOf(*model, plan, {1, 1, 4, 8});
  EXPECT_TRUE(l.kv_q4);
  EXPECT_TRUE(l.kv_q4_format.keys_by_channel);
  EXPECT_FALSE(l.kv_q4_format.rotate_keys);
  EXPECT_EQ(l.kv_q4_format.sink, 2);
  EXPECT_EQ(l.kv_q4_format.window, 64);
  EXPECT_EQ(l.num_kv_heads, 2);
  plan.cache_keys = CacheKeys::kSmoothed;
  plan.cache_sink = 0;
  plan.cache_window = 0;
  const OpLimits smoothed = OpLimitsOf(*model, plan, {1, 1, 4, 8});
  EXPECT_TRUE(smoothed.kv_q4_format.rotate_keys);
  EXPECT_FALSE(smoothed.kv_q4_format.keys_by_channel);
  EXPECT_FALSE(smoothed.kv_q4_format.exact());
}

TEST(OpLimitsTest, SeeHalfWeights) {
  ModelConfig c;
  c.vocab_size = 300;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 64;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    Result<std::unique_ptr<Model>> model = MakeSyntheticModel(c, dtype);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    EXPECT_EQ(OpLimitsOf(**model, Plan{}, {1, 1, 4, 8}).half_weights, dtype != DType::kF32)
        << DTypeName(dtype);
  }
}

TEST(OpLimitsTest, ThePlacementCarriesThem) {
  auto model = Load("qwen3");
  ASSERT_NE(model, nullptr);
  Plan plan;
  plan.gpu_batch_size = 2;
  plan.num_gpu_batches = 2;
  const BlockShape shape{2, 2, 6, 14};
  Result<Placement> p = PlaceBlock(*model, plan, shape);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const OpLimits want = OpLimitsOf(*model, plan, shape);
  EXPECT_EQ(p->op_limits.rows, want.rows);
  EXPECT_EQ(p->op_limits.rows, 12);
  EXPECT_EQ(p->op_limits.head_dim, 32);
  EXPECT_EQ(p->op_limits.max_len, 14);
}

// ---- the device tier holds the backend's scratch ----

TEST(BackendScratchTest, TheCpuBackendHasNone) {
  auto cpu = MakeCpuBackend();
  OpLimits l;
  l.rows = 1000;
  l.vocab = 50000;
  l.batch = 8;
  EXPECT_EQ(cpu->ScratchBytes(l), 0u);
  EXPECT_TRUE(cpu->ReserveScratch(l).ok());
  const TierLayout layout = GpuLayout(4096);
  Result<std::unique_ptr<MemoryTiers>> tiers = MemoryTiers::Create(layout, {}, *cpu, "", &l);
  ASSERT_TRUE(tiers.ok()) << tiers.status().ToString();
  EXPECT_EQ((*tiers)->capacity_bytes(Tier::kGpu), layout.tier_bytes(Tier::kGpu));
  EXPECT_EQ((*tiers)->backend_scratch_bytes(), 0u);
}

TEST(BackendScratchTest, IsReservedRightAfterTheArenaAndCountedInTheCapacity) {
  ScratchBackend backend(uint64_t{3} << 20);
  const TierLayout layout = GpuLayout(1 << 20);
  const uint64_t gpu = layout.tier_bytes(Tier::kGpu);
  OpLimits l;
  l.rows = 77;
  MemoryTiersOptions exact;
  exact.device_capacity_bytes = gpu + (uint64_t{3} << 20);
  Result<std::unique_ptr<MemoryTiers>> tiers = MemoryTiers::Create(layout, exact, backend, "", &l);
  ASSERT_TRUE(tiers.ok()) << tiers.status().ToString();
  EXPECT_EQ((*tiers)->backend_scratch_bytes(), uint64_t{3} << 20);
  EXPECT_EQ((*tiers)->peak_bytes(Tier::kGpu), gpu);  // the layout's; the arena holds only it
  EXPECT_EQ(backend.last_sized.rows, 77);
  ASSERT_EQ(backend.reserved.size(), 1u);
  EXPECT_EQ(backend.reserved[0].rows, 77);
  EXPECT_EQ(backend.arenas_at_reserve[0], 1);  // after the arena

  // No capacity given: exactly the layout and the scratch.
  Result<std::unique_ptr<MemoryTiers>> fitted = MemoryTiers::Create(layout, {}, backend, "", &l);
  ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
  EXPECT_EQ((*fitted)->capacity_bytes(Tier::kGpu), gpu + (uint64_t{3} << 20));
}

TEST(BackendScratchTest, ACapacityWithoutRoomForItNamesIt) {
  ScratchBackend backend(uint64_t{3} << 20);
  const TierLayout layout = GpuLayout(1 << 20);
  MemoryTiersOptions tight;
  tight.device_capacity_bytes = layout.tier_bytes(Tier::kGpu) + (uint64_t{3} << 20) - 1;
  const OpLimits l;
  Result<std::unique_ptr<MemoryTiers>> tiers = MemoryTiers::Create(layout, tight, backend, "", &l);
  ASSERT_FALSE(tiers.ok());
  EXPECT_EQ(tiers.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Has(tiers.status(), "scratchy backend's scratch")) << tiers.status().message();
  EXPECT_TRUE(Has(tiers.status(), "--gpu-memory")) << tiers.status().message();
  EXPECT_TRUE(Has(tiers.status(), "--gpu-memory")) << tiers.status().message();
  EXPECT_EQ(backend.arenas, 0);  // refused before anything is allocated
  EXPECT_TRUE(backend.reserved.empty());
}

TEST(BackendScratchTest, AReservationRefusedEndsTheRunWithItsStatus) {
  ScratchBackend backend(4096);
  backend.reserve_status = Status::ResourceExhausted("no room for the scratch: lower the batch");
  const OpLimits l;
  Result<std::unique_ptr<MemoryTiers>> tiers =
      MemoryTiers::Create(GpuLayout(4096), {}, backend, "", &l);
  ASSERT_FALSE(tiers.ok());
  EXPECT_EQ(tiers.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Has(tiers.status(), "no room for the scratch")) << tiers.status().message();
}

TEST(BackendScratchTest, WithoutLimitsNothingIsSizedOrReserved) {
  ScratchBackend backend(4096);
  const TierLayout layout = GpuLayout(4096);
  Result<std::unique_ptr<MemoryTiers>> tiers = MemoryTiers::Create(layout, {}, backend);
  ASSERT_TRUE(tiers.ok()) << tiers.status().ToString();
  EXPECT_EQ(backend.sized, 0);
  EXPECT_TRUE(backend.reserved.empty());
  EXPECT_EQ((*tiers)->capacity_bytes(Tier::kGpu), layout.tier_bytes(Tier::kGpu));
}

}  // namespace
}  // namespace strata
