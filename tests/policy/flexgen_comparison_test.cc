// strata's cost model on FlexGen's own machine model (configs/hardware/t4-flexgen.yaml) against
// FlexGen's published runs (../shared/docs/ANCHORS.md). Prints the table that
// docs/PERFORMANCE.md records. Two cases do not land within 30% for reasons the
// DocumentedGap tests state and check; they are not hidden by looser bounds.
#include <gtest/gtest.h>

#include <cstdio>

#include "policy/search.h"
#include "tests/policy/flexgen_cases.h"

namespace strata {
namespace {

using testing::FlexGenCase;
using testing::FlexGenCases;

HardwareSpec FlexGenT4() {
  Result<HardwareSpec> hw =
      LoadHardwareSpecYaml(STRATA_SOURCE_DIR "/configs/hardware/t4-flexgen.yaml");
  EXPECT_TRUE(hw.ok()) << hw.status().ToString();
  return *hw;
}

ModelSpec Preset(const std::string& name) {
  Result<std::string> path = ResolveConfigFile("models", name);
  EXPECT_TRUE(path.ok()) << path.status().ToString();
  Result<ModelSpec> model = LoadModelSpecYaml(*path);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return *model;
}

// FlexGen's throughput is per block: one block of the hand policy's size.
Workload SameJob(const FlexGenCase& c) { return {512, 32, c.hand.block_size()}; }

CostEstimate HandPrediction(const FlexGenCase& c) {
  return EstimateCost(Preset(c.model), SameJob(c), c.hand, FlexGenT4());
}

double Ratio(const FlexGenCase& c) {
  return HandPrediction(c).throughput_tokens_per_s / c.published_tokens_per_s;
}

const FlexGenCase& Case(const std::string& model, bool compressed) {
  static const std::vector<FlexGenCase> cases = FlexGenCases();
  for (const FlexGenCase& c : cases) {
    if (c.model == model && c.compressed == compressed) return c;
  }
  ADD_FAILURE() << "no case " << model;
  return cases.front();
}

TEST(FlexGenComparison, SearchedPlanIsAtLeastTheHandPolicy) {
  const HardwareSpec hw = FlexGenT4();
  std::printf("%-9s %-5s | %-42s %8s %8s %6s | %8s %-58s %7s | %8s\n", "model", "4-bit",
              "hand policy (FlexGen flags)", "publ.", "pred.", "ratio", "search", "searched plan",
              "time", "open");
  for (const FlexGenCase& c : FlexGenCases()) {
    const ModelSpec model = Preset(c.model);
    Result<PlanEvaluation> hand = EvaluatePlan(model, SameJob(c), c.hand, hw);
    ASSERT_TRUE(hand.ok()) << hand.status().ToString();
    SearchOptions options;
    options.allow_compress_weight = options.allow_compress_cache = c.compressed;
    options.cache_keys = c.hand.cache_keys;  // FlexGen's 4-bit cache, as the hand plan's
    options.cache_sink = c.hand.cache_sink;
    options.cache_window = c.hand.cache_window;
    Result<SearchResult> searched = SearchPlan(model, SameJob(c), hw, options);
    ASSERT_TRUE(searched.ok()) << searched.status().ToString();
    Result<SearchResult> open = SearchPlan(model, {512, 32, 0}, hw, options);
    ASSERT_TRUE(open.ok()) << open.status().ToString();

    const double hand_tps = hand->cost.throughput_tokens_per_s;
    const double search_tps = searched->best.cost.throughput_tokens_per_s;
    std::printf("%-9s %-5s | %-42s %8.2f %8.3f %6.2f | %8.3f %-58s %6.3fs | %8.3f\n",
                c.model.c_str(), c.compressed ? "yes" : "no",
                PlanToFlexGenFlags(c.hand).substr(10).c_str(), c.published_tokens_per_s, hand_tps,
                hand_tps / c.published_tokens_per_s, search_tps,
                PlanToFlexGenFlags(searched->best.plan).substr(10).c_str(), searched->elapsed_s,
                open->best.cost.throughput_tokens_per_s);
    if (!hand->fits.ok()) std::printf("          hand policy: %s\n", hand->fits.message().c_str());
    EXPECT_TRUE(searched->best.fits.ok());
    EXPECT_GE(search_tps, hand_tps * (1 - 1e-9)) << c.model << (c.compressed ? " 4-bit" : "");
  }
}

TEST(FlexGenComparison, HandPolicyPredictionWithin30PercentOfPublished) {
  for (const auto& [model, compressed] : std::vector<std::pair<std::string, bool>>{
           {"opt-6.7b", false}, {"opt-30b", false}, {"opt-6.7b", true}, {"opt-30b", true}}) {
    const double ratio = Ratio(Case(model, compressed));
    EXPECT_GE(ratio, 0.7) << model << (compressed ? " 4-bit" : "");
    EXPECT_LE(ratio, 1.3) << model << (compressed ? " 4-bit" : "");
  }
}

// OPT-175B keeps all of the KV cache and half the weights on disk. At FlexGen's own fitted disk
// read rate (0.473 GB/s) one decode layer step reads 1.8 GB of weights and 6.6 GB of cache, far
// longer than the published 0.69 tokens/s allows even if prefill took no time at all. The model
// is not bent to fit: the published projection and the fitted disk rate disagree.
TEST(FlexGenComparison, DocumentedGapOpt175bCacheOnDisk) {
  const FlexGenCase& c = Case("opt-175b", false);
  const CostEstimate e = HandPrediction(c);
  const double published_block_s = c.hand.block_size() * 32 / c.published_tokens_per_s;
  const double budget_per_layer_step_s = published_block_s / (31 * 96);
  std::printf(
      "OPT-175B: disk lane %.1f s per decode layer step; the published figure allows at "
      "most %.1f s\n",
      e.decode.layer.disk_lane_s(), budget_per_layer_step_s);
  EXPECT_GT(e.decode.layer.disk_lane_s(), 4 * budget_per_layer_step_s);
  EXPECT_LT(Ratio(c), 0.7) << "the gap closed: update docs/PERFORMANCE.md";
}

// OPT-175B 4-bit: FlexGen expands 4-bit weights once per micro-batch (3 times per layer step
// here); strata's executor once per layer step. Charging the model FlexGen's 2 extra expansions
// per layer step brings the prediction within 30%.
TEST(FlexGenComparison, DocumentedGapOpt175b4BitWeightExpansion) {
  const FlexGenCase& c = Case("opt-175b", true);
  const CostEstimate e = HandPrediction(c);
  const ModelSpec model = Preset(c.model);
  // gpu_dequant_s is the weights' expansion plus the new tokens' cache quantization (< 1%).
  const double extra = (c.hand.num_gpu_batches - 1) * e.decode.layer.gpu_dequant_s;
  auto step = [&](LayerTimes t, double add) {
    t.gpu_dequant_s += add;
    return t.step_s(c.hand.overlap);
  };
  const double flexgen_like_s =
      e.prefill.input.step_s(true) + model.num_layers * step(e.prefill.layer, extra) +
      e.prefill.output.step_s(true) +
      31 * (e.decode.input.step_s(true) + model.num_layers * step(e.decode.layer, extra) +
            e.decode.output.step_s(true));
  const double flexgen_like_tps = c.hand.block_size() * 32 / flexgen_like_s;
  std::printf(
      "OPT-175B 4-bit: strata-style %.3f tokens/s; with FlexGen's per-micro-batch "
      "expansion %.3f (published %.2f)\n",
      e.throughput_tokens_per_s, flexgen_like_tps, c.published_tokens_per_s);
  EXPECT_GT(Ratio(c), 1.3) << "the gap closed: update docs/PERFORMANCE.md";
  EXPECT_NEAR(flexgen_like_tps / c.published_tokens_per_s, 1.0, 0.3);
}

}  // namespace
}  // namespace strata
