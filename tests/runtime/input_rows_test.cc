// The input embedding's load (src/runtime/input_rows.h): the rows a token step reads, and
// BlockTransfers::GatherInputRows bringing exactly those rows — from whichever tier holds each —
// into the weight slot, checked against the model's own tensors (and the 4-bit planes
// Q4Weights makes of them), with only their bytes crossing the links.
#include "src/backend/cpu/cpu_backend.h"
#include "src/runtime/input_rows.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <set>
#include <vector>

#include "kernels/cpu/weight_q4.h"
#include "src/memory/memory_tiers.h"
#include "src/memory/placement.h"
#include "src/memory/weight_homes.h"
#include "src/model/model.h"
#include "src/runtime/executor_transfers.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/q4_weights.h"
#include "tests/runtime/sample_on_cpu.h"

namespace strata {
namespace {

// The prefill reads every prompt token and the padded positions; a decode step each sequence's
// newest token at its own position (OPT's offset 2 added).
TEST(InputRowsTest, PrefillReadsThePromptsAndDecodeTheNewestTokens) {
  auto model = LoadModel(std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/opt");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto tokenizer = LoadTokenizerForModel(**model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  std::vector<GenerationRequest> block(3);
  block[0].prompt = {9, 3, 9, 12};
  block[1].prompt = {7, 3};
  block[2].prompt = {12};
  for (GenerationRequest& r : block) {
    r.sampling.temperature = 0;
    r.max_new_tokens = 4;
    r.ignore_eos = true;
  }
  const std::vector<int32_t> eog;
  BlockSequences sequences(block, **tokenizer, eog);
  const InputRows prefill = BlockInputRows(block, sequences, 4, 0, 2);
  EXPECT_EQ(prefill.tokens, (std::vector<int32_t>{3, 7, 9, 12}));
  EXPECT_EQ(prefill.positions, (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(RowIndex(prefill.tokens, 3), 0);
  EXPECT_EQ(RowIndex(prefill.tokens, 12), 3);
  EXPECT_EQ(RowIndex(prefill.positions, 4), 2);

  // Greedy picks: 20, 11, 20 at the prefill's step, then 11, 11, 30.
  const int vocab = (**model).config().vocab_size;
  std::vector<float> logits(static_cast<size_t>(3 * vocab), 0.0f);
  auto pick = [&](std::vector<int32_t> ids, int step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    for (int s = 0; s < 3; ++s) logits[static_cast<size_t>(s * vocab + ids[s])] = 1.0f;
    SampleOnCpu(sequences, 0, 3, logits.data(), vocab, step);
  };
  pick({20, 11, 20}, 0);
  const InputRows first = BlockInputRows(block, sequences, 4, 1, 2);
  EXPECT_EQ(first.tokens, (std::vector<int32_t>{11, 20}));
  // Positions: prompt length + token - 1, plus the offset: 4 + 2, 2 + 2, 1 + 2.
  EXPECT_EQ(first.positions, (std::vector<int32_t>{3, 4, 6}));
  pick({11, 11, 30}, 1);
  const InputRows second = BlockInputRows(block, sequences, 4, 2, 2);
  EXPECT_EQ(second.tokens, (std::vector<int32_t>{11, 30}));
  EXPECT_EQ(second.positions, (std::vector<int32_t>{4, 5, 7}));
}

// The rows at the edges of each tier's share of `t`, and a few between them.
std::vector<int32_t> EdgeRows(const PlacedTensor& t) {
  std::set<int32_t> ids;
  for (int64_t edge : {int64_t{0}, t.gpu_rows, t.gpu_rows + t.cpu_rows, t.rows()}) {
    for (int64_t r : {edge - 2, edge - 1, edge, edge + 1, edge + 5}) {
      if (r >= 0 && r < t.rows()) ids.insert(static_cast<int32_t>(r));
    }
  }
  return {ids.begin(), ids.end()};
}

class GatherInputRowsTest : public ::testing::TestWithParam<bool> {};  // 4-bit weights

TEST_P(GatherInputRowsTest, SlotHoldsExactlyTheRowsAskedForFromEveryTier) {
  const bool q4 = GetParam();
  auto model = LoadModel(std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/opt");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Result<Plan> plan = PlanFromFlexGenPercent({30, 30, 100, 0, 100, 0}, 2, 1);
  ASSERT_TRUE(plan.ok());
  plan->compress_weight = q4;
  Result<Placement> p = PlaceBlock(**model, *plan, {2, 1, 4, 8});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto backend = MakeCpuBackend();
  MemoryTiersOptions o;
  o.offload_dir = ::testing::TempDir();
  Result<std::unique_ptr<MemoryTiers>> tiers = MemoryTiers::Create(p->layout, o, *backend);
  ASSERT_TRUE(tiers.ok()) << tiers.status().ToString();
  const Q4Weights planes(**model);
  ASSERT_TRUE(CopyWeightsHome(**model, p->weights, **tiers, *backend,
                              q4 ? planes.PlanesOf() : WeightQ4PlanesOf())
                  .ok());

  // Rows of both tables in every tier the placement put them in.
  InputRows rows;
  uint64_t want_bytes = 0;
  int tables = 0;
  for (const PlacedTensor& t : p->weights.input().tensors) {
    ASSERT_GE(t.slot_offset, 0) << t.name;
    const bool positions = t.name == "embed_positions";
    (positions ? rows.positions : rows.tokens) = EdgeRows(t);
    want_bytes += (positions ? rows.positions : rows.tokens).size() * t.row_bytes;
    ++tables;
  }
  ASSERT_EQ(tables, 2);
  const PlacedTensor& tokens = p->weights.input().tensors.front();
  EXPECT_GT(tokens.gpu_rows, 0);
  EXPECT_GT(tokens.cpu_rows + tokens.disk_rows, 0);

  const BlockTransfers transfers(*p, **tiers);
  LaneRecord record(std::chrono::steady_clock::now());
  auto stream = backend->MakeStream();
  ASSERT_TRUE(transfers.GatherInputRows(rows, 1, *stream, record).ok());

  uint64_t moved = 0;
  for (const TraceSpan& span : record.spans()) moved += span.bytes;
  EXPECT_EQ(moved, want_bytes);
  // The slot read back through the stream (after the gather's copies on it).
  std::vector<uint8_t> slot_bytes(p->weight_slots[1].bytes);
  stream->CopyToHost(slot_bytes, (*tiers)->Device(p->weight_slots[1]));
  stream->Synchronize();
  const uint8_t* slot = slot_bytes.data();
  for (const PlacedTensor& t : p->weights.input().tensors) {
    const std::vector<int32_t>& ids = t.name == "embed_positions" ? rows.positions : rows.tokens;
    const uint8_t* at = slot + t.slot_offset;
    const long cols = static_cast<long>(t.source.dim(1));
    for (size_t i = 0; i < ids.size(); ++i) {
      const size_t id = static_cast<size_t>(ids[i]);
      if (!t.q4) {
        const size_t row = static_cast<size_t>(t.row_bytes);
        EXPECT_EQ(
            std::memcmp(at + i * row, static_cast<const uint8_t*>(t.source.data) + id * row, row),
            0)
            << t.name << " row " << id;
        continue;
      }
      const Q4Planes want = planes.Planes(t.source);
      const size_t code_row = kernels::cpu::WeightQ4CodeBytes(1, cols);
      const size_t param_row = kernels::cpu::WeightQ4ParamHalves(1, cols, want.group);
      const uint8_t* params =
          at + kernels::cpu::WeightQ4CodeBytes(static_cast<long>(ids.size()), cols);
      EXPECT_EQ(std::memcmp(at + i * code_row, want.codes + id * code_row, code_row), 0)
          << t.name << " codes of row " << id;
      EXPECT_EQ(
          std::memcmp(params + i * param_row * 2, want.params + id * param_row, param_row * 2), 0)
          << t.name << " params of row " << id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Weights, GatherInputRowsTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "FourBit" : "Plain"; });

}  // namespace
}  // namespace strata
