// Placement against the plan's accounting (policy/memory_accounting.h): weights, KV cache and
// hidden states are placed byte for byte as the plan counts them, the weights' homes add up to
// the model's bytes, and no tier holds more than the plan says (docs/DESIGN.md, rule 2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "policy/memory_accounting.h"
#include "src/backend/q4_sizes.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/memory/memory_tiers.h"
#include "src/memory/model_spec_of.h"
#include "src/memory/placement.h"
#include "src/memory/weight_homes.h"
#include "src/model/model.h"
#include "src/model/store_writer.h"
#include "src/model/synthetic_model.h"

namespace strata {
namespace {

const char* const kFixtures[] = {"opt", "llama-gqa", "llama3-rope", "llama-bias", "qwen2", "qwen3"};

std::unique_ptr<Model> Load(const std::string& name) {
  auto m = LoadModel(std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/" + name);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

Plan MakePlan(std::vector<int> percent, int gbs, int nb, bool cpu_attention) {
  Result<Plan> p = PlanFromFlexGenPercent(percent, gbs, nb);
  EXPECT_TRUE(p.ok());
  Plan plan = *p;
  plan.cpu_attention = cpu_attention;
  return plan;
}

// Each policy with the fp32 cache and again with the 4-bit one, and all of those again with
// 4-bit weights.
std::vector<Plan> Plans() {
  std::vector<Plan> plans = {MakePlan({100, 0, 100, 0, 100, 0}, 4, 1, false),
                             MakePlan({0, 100, 0, 100, 0, 100}, 2, 2, false),
                             MakePlan({0, 0, 0, 0, 0, 0}, 1, 3, false),
                             MakePlan({30, 40, 20, 50, 40, 30}, 2, 3, false),
                             MakePlan({30, 40, 20, 50, 40, 30}, 2, 3, true),
                             MakePlan({55, 25, 33, 33, 10, 60}, 3, 2, false),
                             MakePlan({20, 80, 0, 100, 0, 100}, 8, 2, true),
                             MakePlan({0, 50, 0, 0, 0, 100}, 4, 4, true)};
  const size_t fp32 = plans.size();
  for (size_t i = 0; i < fp32; ++i) {
    plans.push_back(plans[i]);
    plans.back().compress_cache = true;
  }
  const size_t raw = plans.size();
  for (size_t i = 0; i < raw; ++i) {
    plans.push_back(plans[i]);
    plans.back().compress_weight = true;
  }
  return plans;
}

// The model's weight bytes as stored under `plan`, from the model's own tensors: with
// compress_weight each matrix whose rows are whole groups of 64 takes 32 bytes of codes and 4 of
// fp16 scale and minimum per group (kernels/cpu/weight_q4.h), everything else its own bytes.
uint64_t StoredWeightBytes(const Model& model, const Plan& plan) {
  uint64_t bytes = model.weight_bytes();
  if (!plan.compress_weight) return bytes;
  const ModelWeights& w = model.weights();
  std::vector<const TensorView*> matrices = {&w.token_embedding, &w.position_embedding};
  if (w.lm_head.data != w.token_embedding.data) matrices.push_back(&w.lm_head);
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      matrices.push_back(t);
    }
  }
  for (const TensorView* t : matrices) {
    if (!t->present() || t->dim(1) % 64 != 0) continue;
    bytes -= t->bytes();
    bytes += static_cast<uint64_t>(t->dim(0) * (t->dim(1) / 64) * 36);
  }
  return bytes;
}

TEST(PlacementTest, SplitRowsIsCumulativeAndExact) {
  for (int64_t rows : {1, 7, 48, 1000}) {
    for (int g = 0; g <= 100; g += 7) {
      for (int c = 0; c + g <= 100; c += 11) {
        const TierRows r = SplitRows(rows, g, c);
        EXPECT_EQ(r.gpu + r.cpu + r.disk, rows);
        EXPECT_LE(std::abs(r.gpu * 100 - rows * g), 100);
        EXPECT_LE(std::abs((r.gpu + r.cpu) * 100 - rows * (g + c)), 100);
      }
    }
  }
}

TEST(PlacementTest, WeightHomesAddUpToTheModel) {
  for (const char* name : kFixtures) {
    auto model = Load(name);
    ASSERT_NE(model, nullptr);
    for (const Plan& plan : Plans()) {
      TierLayout layout;
      const WeightPlacement w = PlaceWeights(*model, plan, layout);
      EXPECT_EQ(static_cast<uint64_t>(w.home_bytes.sum()), StoredWeightBytes(*model, plan))
          << name << "\n" << PlanToString(plan);
      if (plan.compress_weight) {
        EXPECT_LT(static_cast<uint64_t>(w.home_bytes.sum()), model->weight_bytes()) << name;
      }
      for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
        EXPECT_EQ(static_cast<int64_t>(layout.use_bytes(t, MemoryUse::kWeights)),
                  w.home_bytes.at(t))
            << name << " " << TierName(t);
      }
    }
  }
}

// The activation types a backend keeps (Backend::ActivationType): fp32 on the CPU, two bytes on
// a GPU.
constexpr SpanType kActivationTypes[] = {SpanType::kF32, SpanType::kF16, SpanType::kBF16};

// The homes of weights, KV cache and activations are the plan's figures exactly, for
// activations of every type the plan's accounting is given.
TEST(PlacementTest, HomesEqualThePlansFigures) {
  for (const char* name : kFixtures) {
    auto model = Load(name);
    ASSERT_NE(model, nullptr);
    for (const SpanType activations : kActivationTypes) {
      const int bytes = static_cast<int>(SpanElementBytes(activations));
      Result<ModelSpec> spec = ModelSpecOf(*model, bytes);
      ASSERT_TRUE(spec.ok()) << spec.status().ToString();
      for (const Plan& plan : Plans()) {
        const Workload workload{24, 16, 0};
        const BlockShape shape{plan.gpu_batch_size, plan.num_gpu_batches, 24, 40};
        Result<Placement> p = PlaceBlock(*model, plan, shape, activations);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        Result<MemoryPlan> mem = AccountMemory(*spec, workload, plan);
        ASSERT_TRUE(mem.ok()) << mem.status().ToString();
        for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
          SCOPED_TRACE(std::string(name) + " " + SpanTypeName(activations) + " " + TierName(t) +
                       "\n" + PlanToString(plan));
          EXPECT_EQ(static_cast<int64_t>(p->layout.use_bytes(t, MemoryUse::kWeights)),
                    mem->weight_bytes.at(t));
          EXPECT_EQ(static_cast<int64_t>(p->layout.use_bytes(t, MemoryUse::kKvCache)),
                    mem->kv_cache_bytes.at(t));
          EXPECT_EQ(static_cast<int64_t>(p->layout.use_bytes(t, MemoryUse::kActivations)),
                    mem->activation_bytes.at(t));
        }
      }
    }
  }
}

// Two-byte activations halve what is sized by them (hidden states, the Transformer's buffers, a
// dense cache, the prefill's keys and values, expanded 4-bit weights) and nothing else (logits,
// weights, the 4-bit cache and its exact rows stay as they are).
TEST(PlacementTest, HalfActivationsHalveWhatActivationsSize) {
  auto model = Load("llama-gqa");
  ASSERT_NE(model, nullptr);
  Plan plan = *PlanFromFlexGenPercent({40, 30, 50, 30, 60, 20}, 2, 2);
  plan.cpu_attention = true;
  for (const bool q4 : {false, true}) {
    plan.compress_cache = q4;
    plan.compress_weight = q4;
    SCOPED_TRACE(q4 ? "4-bit cache and weights" : "dense cache");
    const BlockShape shape{2, 2, 24, 40};
    const Placement full = *PlaceBlock(*model, plan, shape, SpanType::kF32);
    const Placement half = *PlaceBlock(*model, plan, shape, SpanType::kF16);
    EXPECT_EQ(half.activation_type, SpanType::kF16);
    EXPECT_EQ(half.op_limits.activations, SpanType::kF16);
    EXPECT_EQ(2 * half.transformer_workspace.bytes, full.transformer_workspace.bytes);
    EXPECT_EQ(2 * half.activations.row_bytes, full.activations.row_bytes);
    EXPECT_EQ(2 * half.weights.expanded_bytes, full.weights.expanded_bytes);
    EXPECT_EQ(2 * half.cache.prefill.bytes, full.cache.prefill.bytes);
    EXPECT_EQ(half.logits.bytes, full.logits.bytes);
    EXPECT_EQ(half.cache.exact.bytes, full.cache.exact.bytes);
    EXPECT_EQ(half.layout.use_bytes(Tier::kGpu, MemoryUse::kWeights),
              full.layout.use_bytes(Tier::kGpu, MemoryUse::kWeights));
    if (q4) {
      EXPECT_EQ(half.cache.row_bytes, full.cache.row_bytes);
    } else {
      EXPECT_EQ(half.cache.format.element, SpanType::kF16);
      EXPECT_EQ(2 * half.cache.row_bytes, full.cache.row_bytes);
      EXPECT_EQ(2 * half.cache.cpu_workspace[0].bytes, full.cache.cpu_workspace[0].bytes);
    }
  }
}

// Prints the layout next to the plan's accounting, family by family.
std::string Compare(const Placement& p, const MemoryPlan& mem) {
  std::string out;
  char line[200];
  const TierBytes* plan_rows[] = {&mem.weight_bytes, &mem.kv_cache_bytes, &mem.activation_bytes,
                                  &mem.staging_bytes, &mem.workspace_bytes};
  for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
    for (int u = 0; u < kNumMemoryUses; ++u) {
      std::snprintf(line, sizeof(line), "  %-5s %-12s layout %10llu  plan %10lld\n", TierName(t),
                    MemoryUseName(static_cast<MemoryUse>(u)),
                    static_cast<unsigned long long>(p.layout.use_bytes(t, static_cast<MemoryUse>(u))),
                    static_cast<long long>(plan_rows[u]->at(t)));
      out += line;
    }
    std::snprintf(line, sizeof(line), "  %-5s total        layout %10llu  plan %10lld\n",
                  TierName(t), static_cast<unsigned long long>(p.layout.tier_bytes(t)),
                  static_cast<long long>(mem.total_bytes.at(t)));
    out += line;
  }
  return out;
}

TEST(PlacementTest, TiersHoldNoMoreThanThePlan) {
  for (const char* name : kFixtures) {
    auto model = Load(name);
    ASSERT_NE(model, nullptr);
    for (const SpanType activations : kActivationTypes) {
      const ModelSpec spec =
          *ModelSpecOf(*model, static_cast<int>(SpanElementBytes(activations)));
      for (const Plan& plan : Plans()) {
        const BlockShape shape{plan.gpu_batch_size, plan.num_gpu_batches, 24, 40};
        Result<Placement> p = PlaceBlock(*model, plan, shape, activations);
        ASSERT_TRUE(p.ok());
        const MemoryPlan mem = *AccountMemory(spec, Workload{24, 16, 0}, plan);
        for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
          EXPECT_LE(static_cast<int64_t>(p->layout.tier_bytes(t)), mem.total_bytes.at(t))
              << name << " " << SpanTypeName(activations) << " " << TierName(t) << "\n"
              << PlanToString(plan) << Compare(*p, mem);
        }
      }
    }
  }
}

// Places `plan` for prompts of 24 and 40 cache slots and accounts it the same way: the
// accounting's buffer `name` and the placed GPU cache extent `extent` both hold `want` bytes.
void ExpectCacheBufferAsAccounted(const Model& model, const ModelSpec& spec, const Plan& plan,
                                  const std::string& name, GpuExtent CachePlacement::*extent,
                                  int64_t want) {
  const BlockShape shape{plan.gpu_batch_size, plan.num_gpu_batches, 24, 40};
  Result<Placement> p = PlaceBlock(model, plan, shape);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const MemoryPlan mem = *AccountMemory(spec, Workload{24, 16, 0}, plan);
  int64_t accounted = 0;
  for (const NamedBuffer& b : mem.buffers) {
    if (b.name == name) accounted += b.bytes * b.count;
  }
  EXPECT_EQ(accounted, want);
  EXPECT_EQ(static_cast<int64_t>((p->cache.*extent).bytes), want);
}

// Smoothed 4-bit keys keep an fp32 mean and scale per (layer, sequence, KV head) on the GPU: the
// layout's extent is the accounting's kv_smoothing buffer byte for byte, and neither exists for
// plain, rotated or channel keys or the fp32 cache.
TEST(PlacementTest, KeySmoothingIsTheAccountingsBuffer) {
  for (const char* name : kFixtures) {
    auto model = Load(name);
    ASSERT_NE(model, nullptr);
    const ModelSpec spec = *ModelSpecOf(*model);
    const ModelConfig& c = model->config();
    for (Plan plan : Plans()) {
      for (CacheKeys keys :
           {CacheKeys::kPlain, CacheKeys::kRotated, CacheKeys::kSmoothed, CacheKeys::kChannel}) {
        plan.cache_keys = keys;
        SCOPED_TRACE(std::string(name) + " " + CacheKeysName(keys) + "\n" + PlanToString(plan));
        const int64_t want = plan.smooth_keys() ? 2 * int64_t{c.num_layers} * plan.block_size() *
                                                      c.num_kv_heads * c.head_dim * 4
                                                : 0;
        ExpectCacheBufferAsAccounted(*model, spec, plan, "kv_smoothing", &CachePlacement::smoothing,
                                     want);
      }
    }
  }
}

// Exact tokens of the 4-bit cache keep fp32 keys and values of sink + window rows per (layer,
// sequence, KV head) on the GPU: the layout's extent is the accounting's kv_exact buffer byte
// for byte, and neither exists without the option or without the 4-bit cache.
TEST(PlacementTest, ExactTokensAreTheAccountingsBuffer) {
  for (const char* name : kFixtures) {
    auto model = Load(name);
    ASSERT_NE(model, nullptr);
    const ModelSpec spec = *ModelSpecOf(*model);
    const ModelConfig& c = model->config();
    for (Plan plan : Plans()) {
      plan.cache_keys = CacheKeys::kPlain;  // channel keys need a window of a whole group
      for (int window : {0, 3}) {
        plan.cache_sink = plan.compress_cache ? 2 : 0;
        plan.cache_window = plan.compress_cache ? window : 0;
        SCOPED_TRACE(std::string(name) + "\n" + PlanToString(plan));
        const int64_t want = plan.compress_cache ? 2 * int64_t{c.num_layers} *
                                                       plan.block_size() * c.num_kv_heads *
                                                       (2 + window) * c.head_dim * 4
                                                 : 0;
        ExpectCacheBufferAsAccounted(*model, spec, plan, "kv_exact", &CachePlacement::exact, want);
      }
    }
  }
}

TEST(PlacementTest, DefaultModelTiersHoldNoMoreThanThePlan) {
  const char* home = std::getenv("HOME");
  const std::string path = std::string(home ? home : "") +
                           "/.cache/strata/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "default model not in the cache";
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok());
  const ModelSpec spec = *ModelSpecOf(**model);
  for (const Plan& plan : Plans()) {
    const BlockShape shape{plan.gpu_batch_size, plan.num_gpu_batches, 24, 40};
    Result<Placement> p = PlaceBlock(**model, plan, shape);
    ASSERT_TRUE(p.ok());
    const MemoryPlan mem = *AccountMemory(spec, Workload{24, 16, 0}, plan);
    for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
      EXPECT_LE(static_cast<int64_t>(p->layout.tier_bytes(t)), mem.total_bytes.at(t))
          << TierName(t) << "\n" << PlanToString(plan) << Compare(*p, mem);
    }
  }
}

TEST(PlacementTest, TiersRefuseALayoutOverTheDeviceCapacity) {
  auto model = Load("opt");
  ASSERT_NE(model, nullptr);
  const Plan plan = MakePlan({100, 0, 100, 0, 100, 0}, 4, 1, false);
  Result<Placement> p = PlaceBlock(*model, plan, {4, 1, 24, 40});
  ASSERT_TRUE(p.ok());
  auto backend = MakeCpuBackend();
  MemoryTiersOptions o;
  o.device_capacity_bytes = p->layout.tier_bytes(Tier::kGpu) - 1;
  Result<std::unique_ptr<MemoryTiers>> tiers = MemoryTiers::Create(p->layout, o, *backend);
  ASSERT_FALSE(tiers.ok());
  EXPECT_EQ(tiers.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(tiers.status().message().find("--gpu-memory"), std::string::npos);
}

// The bytes of GPU extent `e`, read back through a stream of `backend` (the tiers' device).
void ReadDevice(Backend& backend, const MemoryTiers& tiers, const GpuExtent& e, uint8_t* dst) {
  std::unique_ptr<Stream> stream = backend.MakeStream();
  stream->CopyToHost({dst, e.bytes}, tiers.Device(e));
  stream->Synchronize();
}

TEST(PlacementTest, WeightsRoundTripThroughEveryTier) {
  auto model = Load("llama-gqa");
  ASSERT_NE(model, nullptr);
  const Plan plan = MakePlan({30, 30, 100, 0, 100, 0}, 1, 1, false);
  Result<Placement> p = PlaceBlock(*model, plan, {1, 1, 4, 8});
  ASSERT_TRUE(p.ok());
  auto backend = MakeCpuBackend();
  MemoryTiersOptions o;
  o.offload_dir = ::testing::TempDir();
  Result<std::unique_ptr<MemoryTiers>> tiers = MemoryTiers::Create(p->layout, o, *backend);
  ASSERT_TRUE(tiers.ok()) << tiers.status().ToString();
  ASSERT_TRUE(CopyWeightsHome(*model, p->weights, **tiers, *backend).ok());
  Result<AlignedBuffer> allocated = AlignedBuffer::Allocate(8192);
  ASSERT_TRUE(allocated.ok());
  AlignedBuffer ring = std::move(allocated).value();
  for (const PlacedLayer& layer : p->weights.layers) {
    for (const PlacedTensor& t : layer.tensors) {
      std::vector<uint8_t> got(static_cast<size_t>(t.rows() * t.row_bytes));
      if (t.gpu_rows > 0) ReadDevice(*backend, **tiers, t.gpu_home, got.data());
      if (t.cpu_rows > 0) {
        std::memcpy(got.data() + t.gpu_rows * t.row_bytes, (*tiers)->At(t.cpu_home), t.cpu_home.bytes);
      }
      if (t.disk_rows > 0) {
        const DiskPiece piece{t.disk_home.offset,
                              got.data() + (t.gpu_rows + t.cpu_rows) * t.row_bytes,
                              t.disk_home.bytes};
        ASSERT_TRUE((*tiers)->ReadDisk({&piece, 1}, ring.span()).ok());
      }
      EXPECT_EQ(std::memcmp(got.data(), t.source.data, got.size()), 0) << t.name;
    }
  }
}

// Every tensor's bytes as the tiers hold them after CopyWeightsHome: GPU and CPU rows from
// their arenas, disk rows read back from the scratch file.
std::vector<std::vector<uint8_t>> HomeBytes(const Placement& p, const MemoryTiers& tiers,
                                           Backend& backend) {
  Result<AlignedBuffer> ring = AlignedBuffer::Allocate(size_t{1} << 20);
  EXPECT_TRUE(ring.ok());
  std::vector<std::vector<uint8_t>> out;
  for (const PlacedLayer& layer : p.weights.layers) {
    for (const PlacedTensor& t : layer.tensors) {
      std::vector<uint8_t>& got = out.emplace_back(static_cast<size_t>(t.rows() * t.row_bytes));
      if (t.gpu_rows > 0) ReadDevice(backend, tiers, t.gpu_home, got.data());
      if (t.cpu_rows > 0) {
        std::memcpy(got.data() + t.gpu_rows * t.row_bytes, tiers.At(t.cpu_home), t.cpu_home.bytes);
      }
      if (t.disk_rows > 0) {
        const DiskPiece piece{t.disk_home.offset,
                              got.data() + (t.gpu_rows + t.cpu_rows) * t.row_bytes,
                              t.disk_home.bytes};
        EXPECT_TRUE(tiers.ReadDisk({&piece, 1}, ring->span()).ok());
      }
    }
  }
  return out;
}

// Weights made on demand (a synthetic model, src/model/synthetic_model.h) are made straight into
// their homes, and every tier then holds the bytes of the same model made in memory: disk rows
// of a layer longer than the window they are written through (a 41 MB embedding) and split
// between layers included.
TEST(PlacementTest, WeightsMadeOnDemandGoHomeAsTheInMemoryOnes) {
  ModelConfig c;
  c.vocab_size = 40000;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 64;
  Result<std::unique_ptr<Model>> held =
      MakeSyntheticModel(c, DType::kF32, 3, SyntheticWeights::kInMemory);
  Result<std::unique_ptr<Model>> made =
      MakeSyntheticModel(c, DType::kF32, 3, SyntheticWeights::kOnDemand);
  ASSERT_TRUE(held.ok() && made.ok());
  for (const Plan& plan : {MakePlan({30, 30, 100, 0, 100, 0}, 1, 1, false),
                           MakePlan({0, 0, 100, 0, 100, 0}, 1, 1, false)}) {
    SCOPED_TRACE(PlanToFlexGenFlags(plan));
    std::vector<std::vector<uint8_t>> want;  // the in-memory model's tensors, as placed
    for (const Model* model : {held->get(), made->get()}) {
      Result<Placement> p = PlaceBlock(*model, plan, {1, 1, 4, 8});
      ASSERT_TRUE(p.ok());
      if (want.empty()) {
        for (const PlacedLayer& layer : p->weights.layers) {
          for (const PlacedTensor& t : layer.tensors) {
            const auto* data = static_cast<const uint8_t*>(t.source.data);
            want.emplace_back(data, data + t.rows() * t.row_bytes);
          }
        }
      }
      // Streams on worker threads with random delays: a window half made again before its copy
      // has run would show in the bytes.
      auto backend = MakeCpuBackend({.streams = {.threaded = true, .max_delay_us = 300}});
      MemoryTiersOptions o;
      o.offload_dir = ::testing::TempDir();
      Result<std::unique_ptr<MemoryTiers>> tiers = MemoryTiers::Create(p->layout, o, *backend);
      ASSERT_TRUE(tiers.ok()) << tiers.status().ToString();
      ASSERT_TRUE(CopyWeightsHome(*model, p->weights, **tiers, *backend).ok());
      const std::vector<std::vector<uint8_t>> got = HomeBytes(*p, **tiers, *backend);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_TRUE(got[i] == want[i]) << model->weights_on_demand() << " tensor " << i;
      }
    }
  }
}

std::string StoreDir(const std::string& name) {
  return ::testing::TempDir() + "/placement_store_" + name + "_" + std::to_string(::getpid());
}

// A fixture converted to a strata store in StoreDir(name) (raw tensors, as `strata convert`
// writes by default).
std::unique_ptr<Model> StoreOf(const std::string& name) {
  auto original = Load(name);
  if (original == nullptr) return nullptr;
  const std::string dir = StoreDir(name);
  std::filesystem::remove_all(dir);
  Result<StoreWriteSummary> written = WriteStore(*original, dir);
  EXPECT_TRUE(written.ok()) << written.status().ToString();
  auto m = LoadModel(dir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

// Disk weights of a store-loaded model stay in the store (4-bit ones excepted): the layout (so
// the scratch file) reserves nothing for them, while the placement still counts them as the plan's disk weights;
// KV cache and activations are placed as for the same model from any other source.
TEST(PlacementTest, StoreWeightsOnDiskTakeNoScratchSpace) {
  for (const char* name : kFixtures) {
    auto original = Load(name);
    auto stored = StoreOf(name);
    ASSERT_NE(original, nullptr);
    ASSERT_NE(stored, nullptr);
    EXPECT_FALSE(stored->store_data_path().empty());
    EXPECT_TRUE(original->store_data_path().empty());
    Result<ModelSpec> spec = ModelSpecOf(*stored);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    for (const Plan& plan : Plans()) {
      SCOPED_TRACE(std::string(name) + "\n" + PlanToString(plan));
      const BlockShape shape{plan.gpu_batch_size, plan.num_gpu_batches, 24, 40};
      Result<Placement> from_store = PlaceBlock(*stored, plan, shape);
      Result<Placement> from_source = PlaceBlock(*original, plan, shape);
      ASSERT_TRUE(from_store.ok() && from_source.ok());
      Result<MemoryPlan> mem = AccountMemory(*spec, {24, 16, 0}, plan);
      ASSERT_TRUE(mem.ok()) << mem.status().ToString();
      const int64_t disk_weights = mem->weight_bytes.at(Tier::kDisk);
      if (plan.compress_weight) {
        // 4-bit rows have no image in the store: they go to the scratch file, raw ones stay.
        EXPECT_EQ(static_cast<int64_t>(from_store->layout.use_bytes(Tier::kDisk,
                                                                    MemoryUse::kWeights) +
                                       from_store->weights.store_disk_bytes),
                  disk_weights);
        EXPECT_EQ(from_store->weights.home_bytes.at(Tier::kDisk), disk_weights);
        continue;
      }
      EXPECT_EQ(from_store->layout.use_bytes(Tier::kDisk, MemoryUse::kWeights), 0u);
      EXPECT_EQ(
          static_cast<int64_t>(from_source->layout.use_bytes(Tier::kDisk, MemoryUse::kWeights)),
          disk_weights);
      EXPECT_EQ(static_cast<int64_t>(from_store->weights.store_disk_bytes), disk_weights);
      EXPECT_EQ(from_store->weights.home_bytes.at(Tier::kDisk), disk_weights);
      EXPECT_EQ(from_store->weights.weight_file.empty(), disk_weights == 0);
      for (MemoryUse use : {MemoryUse::kKvCache, MemoryUse::kActivations}) {
        EXPECT_EQ(from_store->layout.use_bytes(Tier::kDisk, use),
                  from_source->layout.use_bytes(Tier::kDisk, use));
      }
      EXPECT_LE(from_store->layout.tier_bytes(Tier::kDisk) + static_cast<uint64_t>(disk_weights),
                from_source->layout.tier_bytes(Tier::kDisk));
      EXPECT_EQ(from_store->disk_ring.bytes, from_source->disk_ring.bytes);
    }
    std::filesystem::remove_all(StoreDir(name));
  }
}

// Read in place through the FileEnv (unaligned row ranges through the ring), a store tensor's
// disk rows are its bytes; CopyWeightsHome wrote none of them to a scratch file (there is none:
// nothing else lives on disk).
TEST(PlacementTest, StoreWeightsReadInPlaceRoundTrip) {
  auto stored = StoreOf("llama-gqa");
  ASSERT_NE(stored, nullptr);
  const Plan plan = MakePlan({30, 30, 100, 0, 100, 0}, 1, 1, false);
  Result<Placement> p = PlaceBlock(*stored, plan, {1, 1, 4, 8});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->weights.weight_file, stored->store_data_path());
  auto backend = MakeCpuBackend();
  MemoryTiersOptions o;
  o.offload_dir = ::testing::TempDir() + "/no/such/dir";  // never used: no scratch file
  Result<std::unique_ptr<MemoryTiers>> tiers =
      MemoryTiers::Create(p->layout, o, *backend, p->weights.weight_file);
  ASSERT_TRUE(tiers.ok()) << tiers.status().ToString();
  EXPECT_EQ((*tiers)->capacity_bytes(Tier::kDisk), 0u);
  ASSERT_TRUE(CopyWeightsHome(*stored, p->weights, **tiers, *backend).ok());
  Result<AlignedBuffer> allocated = AlignedBuffer::Allocate(8192);
  ASSERT_TRUE(allocated.ok());
  AlignedBuffer ring = std::move(allocated).value();
  int in_store = 0;
  for (const PlacedLayer& layer : p->weights.layers) {
    for (const PlacedTensor& t : layer.tensors) {
      if (t.disk_rows == 0) continue;
      ASSERT_TRUE(t.disk_in_store) << t.name;
      ++in_store;
      std::vector<uint8_t> got(static_cast<size_t>(t.disk_rows * t.row_bytes));
      const DiskPiece piece{t.disk_home.offset, got.data(), t.disk_home.bytes};
      ASSERT_TRUE((*tiers)->ReadWeights({&piece, 1}, ring.span()).ok());
      EXPECT_EQ(std::memcmp(got.data(),
                            static_cast<const uint8_t*>(t.source.data) +
                                (t.gpu_rows + t.cpu_rows) * t.row_bytes,
                            got.size()),
                0)
          << t.name;
    }
  }
  EXPECT_GT(in_store, 0);
  std::filesystem::remove_all(StoreDir("llama-gqa"));
}

// The 4-bit cache at every head size its format takes, 80 and 96 (a last group of 16 or 32)
// included: slots of the bytes the backends' figures say (src/backend/q4_sizes.h, which the
// executor checks them against); other head sizes are refused naming the sizes it takes.
TEST(PlacementTest, FourBitCacheTakesTheFormatsHeadSizes) {
  for (int d : {32, 40, 64, 80, 96, 128, 192, 256}) {
    for (CacheKeys keys : {CacheKeys::kChannel, CacheKeys::kPlain}) {
      Plan plan;
      plan.compress_cache = true;
      plan.cache_keys = keys;
      const KvFormat f = KvFormatOf(d, plan);
      const int key_halves =
          keys == CacheKeys::kChannel ? KvQ4ChannelParamHalves(d) : KvQ4ParamHalves(d);
      EXPECT_EQ(f.plane_bytes[0], KvQ4CodeBytes(d)) << d;
      EXPECT_EQ(f.plane_bytes[1], 2 * key_halves) << d << " " << CacheKeysName(keys);
      EXPECT_EQ(f.plane_bytes[2], KvQ4CodeBytes(d)) << d;
      EXPECT_EQ(f.plane_bytes[3], 2 * KvQ4ParamHalves(d)) << d;
    }
  }
  Plan plan;
  plan.compress_cache = true;
  for (int d : {80, 96, 112}) {
    ModelConfig c;
    c.vocab_size = 64;
    c.num_heads = 2;
    c.num_kv_heads = 1;
    c.head_dim = d;
    c.hidden_size = 2 * d;
    c.intermediate_size = 2 * c.hidden_size;
    c.num_layers = 1;
    c.max_position_embeddings = 64;
    auto model = MakeSyntheticModel(c, DType::kF32, 3);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const Result<Placement> p = PlaceBlock(**model, plan, {1, 1, 8, 48});
    if (d != 112) {
      EXPECT_TRUE(p.ok()) << d << ": " << p.status().ToString();
      continue;
    }
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(p.status().message().find(kKvQ4HeadDims), std::string::npos)
        << p.status().message();
    EXPECT_NE(p.status().message().find("has 112"), std::string::npos) << p.status().message();
  }
}

}  // namespace
}  // namespace strata
