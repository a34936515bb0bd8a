// Q4Weights: a store written by `strata convert --compress-weight` gives its 4-bit planes as
// stored (views into tensors.bin, not quantized again); a model from any other source is
// quantized by kernels/cpu/weight_q4.h; either way RoundTripped() is the expansion of those planes.
// And rows expanded a chunk at a time, as the engine expands them, are the whole expansion's.
#include "src/runtime/q4_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "kernels/cpu/weight_q4.h"
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

// The engine expands a 4-bit matrix a chunk of rows at a time (its rows on each tier, or the rows
// of a step's tokens gathered from an embedding), each chunk its codes then its params: every
// chunking gives the rows of the whole matrix's expansion, bit for bit.
TEST(Q4WeightsTest, RowsExpandedInChunksAreTheWholeExpansions) {
  const long rows = 300, cols = 192;  // rows not a multiple of anything the kernel blocks by
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37 * static_cast<double>(i)) * 0.5f;
  for (const int group : {64, 32}) {
    std::vector<uint8_t> codes(cpu::WeightQ4CodeBytes(rows, cols));
    std::vector<uint16_t> params(cpu::WeightQ4ParamHalves(rows, cols, group));
    cpu::QuantizeWeightQ4(cpu::WeightQ4Source::kF32, w.data(), rows, cols, group, codes.data(),
                          params.data());
    std::vector<float> whole(w.size());
    cpu::ExpandWeightQ4(codes.data(), params.data(), rows, cols, group, whole.data());
    for (const std::vector<long>& chunks :
         {std::vector<long>{300}, {1, 299}, {100, 0, 200}, {17, 17, 150, 116}}) {
      std::vector<float> got(w.size(), NAN);
      long first = 0;
      for (const long n : chunks) {
        // The chunk as the engine lays it out: its rows' codes, then their params.
        std::vector<uint8_t> chunk(cpu::WeightQ4CodeBytes(n, cols));
        std::vector<uint16_t> chunk_params(cpu::WeightQ4ParamHalves(n, cols, group));
        std::memcpy(chunk.data(), codes.data() + cpu::WeightQ4CodeBytes(first, cols),
                    chunk.size());
        std::memcpy(chunk_params.data(),
                    params.data() + cpu::WeightQ4ParamHalves(first, cols, group),
                    chunk_params.size() * 2);
        cpu::ExpandWeightQ4(chunk.data(), chunk_params.data(), n, cols, group,
                            got.data() + first * cols);
        first += n;
      }
      ASSERT_EQ(first, rows);
      EXPECT_EQ(std::memcmp(got.data(), whole.data(), got.size() * 4), 0)
          << group << " in " << chunks.size() << " chunks";
    }
  }
}

}  // namespace
}  // namespace strata
