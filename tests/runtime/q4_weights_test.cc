// Q4Weights: a store written by `strata convert --compress-weight` gives its 4-bit planes as
// stored (views into tensors.bin, not quantized again); a model from any other source is
// quantized by kernels/cpu/weight_q4.h; either way RoundTripped() is the expansion of those planes.
// And the CPU backend on such planes (kQ4 views) computes what it computes on their expansion.
#include "src/backend/cpu/cpu_backend.h"
#include "src/runtime/q4_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "kernels/cpu/weight_q4.h"
#include "src/backend/backend.h"
#include "src/model/store.h"
#include "src/model/store_writer.h"
#include "tests/model/model_files.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
namespace cpu = kernels::cpu;

std::unique_ptr<Model> LoadFixture() {
  const fs::path path = fs::path(STRATA_SOURCE_DIR) / "tests" / "data" / "fixtures" / "llama-gqa";
  Result<std::unique_ptr<Model>> m = LoadModel(path.string());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(Q4WeightsTest, StorePlanesAreUsedAsStored) {
  std::unique_ptr<Model> source = LoadFixture();
  ASSERT_NE(source, nullptr);
  const fs::path dir = testing_files::FreshDir() / "store";
  StoreWriteOptions options;
  options.quantize_q4 = QuantizeWeight;
  ASSERT_TRUE(WriteStore(*source, dir.string(), options).ok());
  Result<std::unique_ptr<Store>> store = Store::Open(dir.string());
  Result<std::unique_ptr<Model>> model = LoadStore(dir.string());
  ASSERT_TRUE(store.ok() && model.ok()) << model.status().ToString();

  Q4Weights q4(**model);
  const ModelWeights& expanded = q4.RoundTripped();
  ModelWeights loaded = (*model)->weights(), round = expanded;
  const std::vector<WeightSlot> a = WeightSlots((*model)->config(), &loaded);
  const std::vector<WeightSlot> b = WeightSlots((*model)->config(), &round);
  int stored = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const StoreTensor* t = (*store)->Find(a[i].name);
    ASSERT_NE(t, nullptr);
    if (t->encoding != StoreEncoding::kQ4) continue;
    ++stored;
    const Q4Planes p = q4.Planes(*a[i].view);
    EXPECT_EQ((*model)->StoreOffsetOf(p.codes), static_cast<int64_t>(t->data.offset)) << a[i].name;
    EXPECT_EQ((*model)->StoreOffsetOf(p.params), static_cast<int64_t>(t->q4_params.offset))
        << a[i].name;
    EXPECT_EQ(a[i].view->dtype, DType::kQ4);
    const TensorView& x = *b[i].view;
    ASSERT_EQ(x.dtype, DType::kF32) << a[i].name;
    std::vector<float> want(static_cast<size_t>(x.numel()));
    EXPECT_EQ(p.group, 64);
    cpu::ExpandWeightQ4(p.codes, p.params, x.dim(0), x.dim(1), p.group, want.data());
    EXPECT_EQ(std::memcmp(want.data(), x.data, x.bytes()), 0) << a[i].name;
  }
  EXPECT_GT(stored, 0);
}

TEST(Q4WeightsTest, OtherModelsAreQuantizedByTheKernel) {
  std::unique_ptr<Model> model = LoadFixture();
  ASSERT_NE(model, nullptr);
  Q4Weights q4(*model);
  const TensorView& wq = model->weights().layers[0].wq;
  ASSERT_TRUE(cpu::WeightQ4Supports(wq.dim(1), 64));
  const Q4Planes p = q4.Planes(wq);
  EXPECT_EQ(p.group, 64);  // FlexGen's groups: the fixture holds no GGUF blocks
  EXPECT_EQ(model->StoreOffsetOf(p.codes), -1);
  std::vector<uint8_t> codes(cpu::WeightQ4CodeBytes(wq.dim(0), wq.dim(1)));
  std::vector<uint16_t> params(cpu::WeightQ4ParamHalves(wq.dim(0), wq.dim(1), 64));
  ASSERT_EQ(wq.dtype, DType::kBF16);  // the fixture's dtype
  cpu::QuantizeWeightQ4(cpu::WeightQ4Source::kBF16, wq.data, wq.dim(0), wq.dim(1), 64, codes.data(),
                        params.data());
  EXPECT_EQ(std::memcmp(p.codes, codes.data(), codes.size()), 0);
  EXPECT_EQ(std::memcmp(p.params, params.data(), params.size() * 2), 0);
}

// A 4-bit (kQ4) weight through the CPU backend gives exactly the bits of its fp32 expansion, the
// weights the offloading engine computes on: Linear expands the whole matrix (the same GEMM), an
// embedding the rows it looks up.
TEST(Q4WeightsTest, CpuBackendComputesOnPlanesAsOnTheirExpansion) {
  const long rows = 300, cols = 192;  // rows not a multiple of anything the backend blocks by
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37 * static_cast<double>(i)) * 0.5f;
  for (const int group : {64, 32}) {
    std::vector<uint8_t> codes(cpu::WeightQ4CodeBytes(rows, cols));
    std::vector<uint16_t> params(cpu::WeightQ4ParamHalves(rows, cols, group));
    cpu::QuantizeWeightQ4(cpu::WeightQ4Source::kF32, w.data(), rows, cols, group, codes.data(),
                          params.data());
    std::vector<float> expanded(w.size());
    cpu::ExpandWeightQ4(codes.data(), params.data(), rows, cols, group, expanded.data());
    const Q4Planes planes{codes.data(), params.data(), group};
    const TensorView q4{DType::kQ4, {rows, cols}, &planes};
    const TensorView f32{DType::kF32, {rows, cols}, expanded.data()};
    EXPECT_EQ(q4.bytes(), codes.size() + params.size() * 2);

    auto backend = MakeCpuBackend();
    const int m = 5;
    std::vector<float> x(static_cast<size_t>(m * cols));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11 * static_cast<double>(i));
    std::vector<float> got(static_cast<size_t>(m * rows)), want(got.size());
    backend->Linear(x.data(), m, q4, TensorView{}, got.data());
    backend->Linear(x.data(), m, f32, TensorView{}, want.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << group;

    const std::vector<int32_t> ids = {0, 299, 17, 17, 150};
    std::vector<float> rows_got(ids.size() * cols), rows_want(rows_got.size());
    backend->Embed(q4, ids.data(), static_cast<int>(ids.size()), rows_got.data());
    backend->Embed(f32, ids.data(), static_cast<int>(ids.size()), rows_want.data());
    EXPECT_EQ(std::memcmp(rows_got.data(), rows_want.data(), rows_got.size() * 4), 0) << group;
    backend->AddPositionEmbedding(q4, ids.data(), static_cast<int>(ids.size()), rows_got.data());
    backend->AddPositionEmbedding(f32, ids.data(), static_cast<int>(ids.size()), rows_want.data());
    EXPECT_EQ(std::memcmp(rows_got.data(), rows_want.data(), rows_got.size() * 4), 0) << group;
  }
}

}  // namespace
}  // namespace strata
