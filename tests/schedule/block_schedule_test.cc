// The zig-zag schedule's order properties, checked against an independent model of what every
// buffer must hold when a step runs: every compute finds its inputs loaded, loads of the next
// micro-batch and next layer can run while the current one computes, and no buffer is
// overwritten while another step uses it, in any interleaving the waits allow.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <tuple>

#include "src/schedule/block_schedule.h"
#include "src/schedule/schedule_dump.h"

namespace strata {
namespace {

std::vector<ScheduleShape> Shapes() {
  std::vector<ScheduleShape> shapes;
  for (int blocks : {1, 2}) {
    for (int nb : {1, 2, 3}) {
      for (int tokens : {1, 3}) {
        for (int flags = 0; flags < 64; ++flags) {
          ScheduleShape s;
          s.blocks = blocks;
          s.num_micro_batches = nb;
          s.num_tokens = tokens;
          s.load_input_weights = flags & 1;
          s.load_block_weights = flags & 2;
          s.load_output_weights = flags & 1;
          s.move_activations = flags & 4;
          s.store_cache_prefill = flags & 8;
          s.load_cache_decode = s.store_cache_decode = flags & 16;
          s.cpu_attention_decode = flags & 32;
          shapes.push_back(s);
        }
      }
    }
  }
  return shapes;
}

std::string Name(const ScheduleShape& s) {
  return "blocks " + std::to_string(s.blocks) + " nb " + std::to_string(s.num_micro_batches) +
         " tokens " + std::to_string(s.num_tokens) + " flags w" +
         std::to_string(s.load_block_weights) + std::to_string(s.load_input_weights) + " a" +
         std::to_string(s.move_activations) + " c" + std::to_string(s.store_cache_prefill) +
         std::to_string(s.load_cache_decode) + (s.cpu_attention_decode ? " cpu attention" : "");
}

// The compute-lane and CPU-lane steps: the compute of an iteration, or CPU delegation's parts.
bool ComputeLike(const Step& step) {
  return step.lane == Lane::kCompute || step.lane == Lane::kCpu;
}

// The compute step, or with CPU delegation the part before the CPU, of each (token, layer, k).
std::map<std::tuple<int, int, int>, int> FirstComputes(const BlockSchedule& s) {
  std::map<std::tuple<int, int, int>, int> compute;
  for (const Step& step : s.steps) {
    if (step.kind == StepKind::kCompute || step.kind == StepKind::kComputeToCpu) {
      compute[{step.token, step.layer, step.micro_batch}] = step.id;
    }
  }
  return compute;
}

// Happens-before: the waits plus each lane's own order.
class Order {
 public:
  explicit Order(const BlockSchedule& s) : preds_(s.steps.size()) {
    std::vector<int> last(kNumLanes, -1);
    for (const Step& step : s.steps) {
      auto& p = preds_[static_cast<size_t>(step.id)];
      p = step.waits;
      int& l = last[static_cast<int>(step.lane)];
      if (l >= 0) p.push_back(l);
      l = step.id;
    }
  }
  // True when `before` must finish before `after` starts.
  bool Precedes(int before, int after) const {
    std::vector<bool> seen(preds_.size());
    std::vector<int> stack = {after};
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      for (int p : preds_[static_cast<size_t>(x)]) {
        if (p == before) return true;
        if (!seen[static_cast<size_t>(p)]) {
          seen[static_cast<size_t>(p)] = true;
          stack.push_back(p);
        }
      }
    }
    return false;
  }

 private:
  std::vector<std::vector<int>> preds_;
};

TEST(BlockScheduleTest, WaitsPointBackwardAcrossLanes) {
  for (const ScheduleShape& shape : Shapes()) {
    const BlockSchedule s = BuildBlockSchedule(shape);
    std::set<Lane> seen;
    for (const Step& step : s.steps) {
      seen.clear();
      for (int w : step.waits) {
        ASSERT_LT(w, step.id) << Name(shape);
        const Lane lane = s.steps[static_cast<size_t>(w)].lane;
        EXPECT_NE(lane, step.lane) << Name(shape);
        EXPECT_TRUE(seen.insert(lane).second) << "two waits on one lane; " << Name(shape);
      }
    }
  }
}

TEST(BlockScheduleTest, StepCountsFollowTheShape) {
  ScheduleShape shape;
  shape.blocks = 2;
  shape.num_micro_batches = 3;
  shape.num_tokens = 4;
  shape.load_block_weights = true;
  shape.move_activations = true;
  shape.store_cache_prefill = shape.load_cache_decode = shape.store_cache_decode = true;
  const BlockSchedule s = BuildBlockSchedule(shape);
  std::map<StepKind, int> count;
  for (const Step& step : s.steps) ++count[step.kind];
  const int layers = NumSchedulingLayers(2);
  EXPECT_EQ(count[StepKind::kCompute], 4 * layers * 3);
  EXPECT_EQ(count[StepKind::kLoadWeights], 4 * 2 * 2);  // attention and MLP of each block
  EXPECT_EQ(count[StepKind::kLoadActivations], 4 * (layers - 1) * 3);
  EXPECT_EQ(count[StepKind::kStoreActivations], 4 * (layers - 1) * 3);
  EXPECT_EQ(count[StepKind::kLoadCache], 3 * 2 * 3);  // decode steps only
  EXPECT_EQ(count[StepKind::kStoreCache], 4 * 2 * 3);
  EXPECT_NE(DumpSchedule(s).find("load_cache"), std::string::npos);
}

// Every step that uses a slot a load fills (the compute, or CPU delegation's parts) waits for
// that load.
TEST(BlockScheduleTest, EveryComputeWaitsForItsLoads) {
  for (const ScheduleShape& shape : Shapes()) {
    const BlockSchedule s = BuildBlockSchedule(shape);
    const Order order(s);
    for (const Step& load : s.steps) {
      if (load.lane != Lane::kLoad) continue;
      BufferId filled;
      for (const BufferAccess& a : load.accesses) {
        if (a.write) filled = a.buffer;
      }
      int users = 0;
      for (const Step& step : s.steps) {
        if (!ComputeLike(step) || step.token != load.token || step.layer != load.layer) continue;
        if (load.micro_batch >= 0 && step.micro_batch != load.micro_batch) continue;
        bool uses = false;
        for (const BufferAccess& a : step.accesses) uses = uses || a.buffer == filled;
        if (!uses) continue;
        ++users;
        EXPECT_TRUE(order.Precedes(load.id, step.id))
            << StepKindName(load.kind) << " #" << load.id << " before " << StepKindName(step.kind)
            << " #" << step.id << "; " << Name(shape);
      }
      EXPECT_GT(users, 0) << StepKindName(load.kind) << " #" << load.id << "; " << Name(shape);
    }
  }
}

// While micro-batch k of layer j computes, the loads of micro-batch k + 1 (and of layer j + 1's
// weights) are already issued and nothing makes them wait for that compute.
TEST(BlockScheduleTest, NextLoadsOverlapTheCurrentCompute) {
  for (const ScheduleShape& shape : Shapes()) {
    const BlockSchedule s = BuildBlockSchedule(shape);
    const Order order(s);
    const int nb = shape.num_micro_batches;
    const std::map<std::tuple<int, int, int>, int> compute = FirstComputes(s);
    int checked = 0;
    for (const Step& load : s.steps) {
      if (load.lane != Lane::kLoad) continue;
      // The iteration that runs while this load should: the one before its own.
      const int64_t g = static_cast<int64_t>(load.token) * s.num_layers() + load.layer;
      int64_t t = g * nb + std::max(load.micro_batch, 0) - 1;
      if (load.kind == StepKind::kLoadWeights) t = (g - 1) * nb;  // micro-batch 0 of layer j - 1
      // The input embedding's rows wait for the tokens (InputRowsLoadOnceTheBlockIsSampled).
      if (load.kind == StepKind::kLoadWeights && load.layer == 0) continue;
      // With one micro-batch the next layer's hidden states exist only after this compute. With
      // CPU delegation micro-batch k + 2's hidden states take micro-batch k's slot after its part
      // after the CPU (CpuAttentionOverlapsOtherMicroBatchesOnTheComputeLane).
      if (load.kind == StepKind::kLoadActivations && (nb == 1 || shape.cpu_attention_decode)) {
        continue;
      }
      if (t < 0) continue;
      const int c = compute.at({static_cast<int>(t / nb / s.num_layers()),
                                static_cast<int>(t / nb % s.num_layers()), static_cast<int>(t % nb)});
      EXPECT_LT(load.id, c) << StepKindName(load.kind) << "; " << Name(shape);
      EXPECT_FALSE(order.Precedes(c, load.id))
          << StepKindName(load.kind) << " #" << load.id << " waits for compute #" << c << "; "
          << Name(shape);
      ++checked;
    }
    if (shape.load_block_weights) {
      EXPECT_GT(checked, 0);
    }
  }
}

// A layer's second micro-batch never waits for the next layer's weights: its inputs load before
// those weights (FlexGen loads the weights first, so it does wait there).
TEST(BlockScheduleTest, SecondMicroBatchDoesNotWaitForTheNextLayersWeights) {
  int checked = 0;
  for (const ScheduleShape& shape : Shapes()) {
    if (shape.num_micro_batches < 2 || !shape.load_block_weights) continue;
    const BlockSchedule s = BuildBlockSchedule(shape);
    const Order order(s);
    std::map<std::pair<int, int>, int> weights;  // (token, layer) -> its load_weights step
    for (const Step& step : s.steps) {
      if (step.kind == StepKind::kLoadWeights) weights[{step.token, step.layer}] = step.id;
    }
    for (const Step& step : s.steps) {
      if (step.kind != StepKind::kCompute || step.micro_batch != 1) continue;
      // The input embedding's rows load after the first attention layer's weights, by design
      // (InputRowsLoadOnceTheBlockIsSampled).
      if (shape.load_input_weights && step.layer == 0) continue;
      const auto next = weights.find({step.token, step.layer + 1});
      if (next == weights.end()) continue;
      EXPECT_FALSE(order.Precedes(next->second, step.id))
          << "compute #" << step.id << " waits for load_weights #" << next->second << "; "
          << Name(shape);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// The input embedding's load brings the rows of the tokens the previous token step sampled: it
// waits for the output layer's last micro-batch, and the first attention layer's weights are
// not queued behind it.
TEST(BlockScheduleTest, InputRowsLoadOnceTheBlockIsSampled) {
  int checked = 0;
  for (const ScheduleShape& shape : Shapes()) {
    if (!shape.load_input_weights || shape.num_tokens < 2) continue;
    const BlockSchedule s = BuildBlockSchedule(shape);
    const Order order(s);
    const int output = s.num_layers() - 1;
    std::map<std::tuple<int, int, int>, int> compute;
    std::map<std::pair<int, int>, int> weights;  // (token, layer) -> its load_weights step
    for (const Step& step : s.steps) {
      if (step.kind == StepKind::kCompute) {
        compute[{step.token, step.layer, step.micro_batch}] = step.id;
      }
      if (step.kind == StepKind::kLoadWeights) weights[{step.token, step.layer}] = step.id;
    }
    for (int token = 1; token < shape.num_tokens; ++token) {
      const int rows = weights.at({token, 0});
      const int sampled = compute.at({token - 1, output, shape.num_micro_batches - 1});
      EXPECT_TRUE(order.Precedes(sampled, rows)) << Name(shape);
      const auto first = weights.find({token, 1});
      if (first != weights.end()) {
        EXPECT_LT(first->second, rows) << Name(shape);
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// An independent model of the data each buffer holds. A tag says which value a buffer has:
// weights of (token, layer), hidden states after (token, layer, k), or the cache of (block, k)
// after token i (complete, or with only the rows the compute writes itself).
using Tag = std::tuple<char, int, int, int>;

struct Expect {
  std::vector<std::pair<BufferId, Tag>> reads;   // buffer must hold tag when the step starts
  std::vector<std::pair<BufferId, Tag>> writes;  // buffer holds tag when the step finishes
};

Expect Semantics(const ScheduleShape& sh, const Step& st) {
  Expect e;
  const LayerRole role = RoleOfLayer(st.layer, sh.blocks);
  const int k = st.micro_batch;
  const int b = role == LayerRole::kAttention ? BlockOfLayer(st.layer) : 0;
  const BufferId act_home{BufferKind::kActivationHome, k};
  const BufferId tokens{BufferKind::kTokens, 0};
  const BufferId cache_home{BufferKind::kCacheHome, b * sh.num_micro_batches + k};
  const Tag hidden_in{'h', st.token, st.layer - 1, k};
  const Tag hidden_out{'h', st.token, st.layer, k};
  const bool stores = st.token == 0 ? sh.store_cache_prefill : sh.store_cache_decode;
  const Tag cache_before{'c', st.token - 1, b, k};
  const Tag cache_after{'c', st.token, b, k};
  const Tag cache_partial{'p', st.token, b, k};
  // CPU delegation's workspace: the queries, keys and values, then the attention output.
  const BufferId workspace{BufferKind::kCpuWorkspace, k % 2};
  const Tag to_cpu{'q', st.token, st.layer, k};
  const Tag from_cpu{'o', st.token, st.layer, k};
  const Tag weights{'w', st.token, st.layer, 0};
  const BufferId act = sh.move_activations
                           ? BufferId{BufferKind::kActivationSlot, st.activation_slot}
                           : act_home;
  switch (st.kind) {
    case StepKind::kLoadWeights:
      if (role == LayerRole::kInputEmbedding && st.token > 0) {
        e.reads.push_back({tokens, {'t', st.token - 1, 0, 0}});
      }
      e.writes.push_back({{BufferKind::kWeightSlot, st.weight_slot}, {'w', st.token, st.layer, 0}});
      break;
    case StepKind::kLoadActivations:
      e.reads.push_back({act_home, hidden_in});
      e.writes.push_back({{BufferKind::kActivationSlot, st.activation_slot}, hidden_in});
      break;
    case StepKind::kStoreActivations:
      e.reads.push_back({{BufferKind::kActivationSlot, st.activation_slot}, hidden_out});
      e.writes.push_back({act_home, hidden_out});
      break;
    case StepKind::kLoadCache:
      e.reads.push_back({cache_home, cache_before});
      e.writes.push_back({{BufferKind::kCacheSlot, st.cache_slot}, cache_before});
      break;
    case StepKind::kStoreCache:
      e.reads.push_back({{BufferKind::kCacheSlot, st.cache_slot}, cache_after});
      e.reads.push_back({cache_home, cache_partial});
      e.writes.push_back({cache_home, cache_after});
      break;
    case StepKind::kComputeToCpu:
    case StepKind::kComputeFromCpu:
      if (st.weight_slot >= 0) {
        e.reads.push_back({{BufferKind::kWeightSlot, st.weight_slot}, weights});
      }
      e.reads.push_back({act, hidden_in});
      if (st.kind == StepKind::kComputeToCpu) {
        e.reads.push_back({cache_home, cache_before});
        e.writes.push_back({workspace, to_cpu});
      } else {
        e.reads.push_back({workspace, from_cpu});
        e.writes.push_back({act, hidden_out});
      }
      break;
    case StepKind::kCpuAttention:
      e.reads.push_back({workspace, to_cpu});
      e.reads.push_back({cache_home, cache_before});
      if (st.cache_slot >= 0) {
        if (sh.load_cache_decode) {
          e.reads.push_back({{BufferKind::kCacheSlot, st.cache_slot}, cache_before});
        }
        e.writes.push_back({{BufferKind::kCacheSlot, st.cache_slot}, cache_after});
      }
      e.writes.push_back({workspace, from_cpu});
      e.writes.push_back({cache_home, stores ? cache_partial : cache_after});
      break;
    case StepKind::kCompute: {
      if (st.weight_slot >= 0) {
        e.reads.push_back({{BufferKind::kWeightSlot, st.weight_slot}, weights});
      }
      if (role != LayerRole::kInputEmbedding) e.reads.push_back({act, hidden_in});
      if (role != LayerRole::kOutput) e.writes.push_back({act, hidden_out});
      if (role == LayerRole::kAttention) {
        if (st.token > 0) e.reads.push_back({cache_home, cache_before});
        if (st.cache_slot >= 0) {
          if (st.token > 0 && sh.load_cache_decode) {
            e.reads.push_back({{BufferKind::kCacheSlot, st.cache_slot}, cache_before});
          }
          e.writes.push_back({{BufferKind::kCacheSlot, st.cache_slot}, cache_after});
        }
        e.writes.push_back({cache_home, stores ? cache_partial : cache_after});
      }
      if (role == LayerRole::kOutput && sh.load_input_weights) {
        e.writes.push_back({tokens, {'t', st.token, 0, 0}});
      }
      break;
    }
  }
  return e;
}

// Replays the schedule in random legal interleavings: a step starts once its lane is idle and its
// waits have finished; several steps are in flight at once and finish in random order. Returns
// the first violation, or "" when there is none.
std::string Simulate(const BlockSchedule& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int>> lanes(kNumLanes);
  for (const Step& step : s.steps) lanes[static_cast<int>(step.lane)].push_back(step.id);
  std::vector<size_t> next(kNumLanes, 0);
  std::vector<int> running(kNumLanes, -1);
  std::vector<bool> done(s.steps.size());
  std::map<BufferId, Tag> tags;
  std::map<BufferId, int> writers, readers;  // in-flight use
  size_t finished = 0;
  while (finished < s.steps.size()) {
    std::vector<int> choices;  // lane * 2 + (0 start, 1 finish)
    for (int l = 0; l < kNumLanes; ++l) {
      if (running[l] >= 0) {
        choices.push_back(l * 2 + 1);
      } else if (next[l] < lanes[l].size()) {
        const Step& st = s.steps[static_cast<size_t>(lanes[l][next[l]])];
        bool ready = true;
        for (int w : st.waits) ready = ready && done[static_cast<size_t>(w)];
        if (ready) choices.push_back(l * 2);
      }
    }
    if (choices.empty()) return "deadlock after " + std::to_string(finished) + " steps";
    const int c = choices[rng() % choices.size()];
    const int l = c / 2;
    if (c % 2 == 0) {
      const Step& st = s.steps[static_cast<size_t>(lanes[l][next[l]++])];
      const std::string what = "step #" + std::to_string(st.id) + " " + StepKindName(st.kind);
      for (const auto& [buf, tag] : Semantics(s.shape, st).reads) {
        if (tags[buf] != tag) {
          return what + " reads " + BufferKindName(buf.kind) + " " + std::to_string(buf.index) +
                 " before it holds its input";
        }
      }
      for (const BufferAccess& a : st.accesses) {
        if (writers[a.buffer] > 0) return what + " uses a buffer being written";
        if (a.write && readers[a.buffer] > 0) return what + " overwrites a buffer in use";
      }
      for (const BufferAccess& a : st.accesses) ++(a.write ? writers : readers)[a.buffer];
      running[l] = st.id;
    } else {
      const Step& st = s.steps[static_cast<size_t>(running[l])];
      for (const BufferAccess& a : st.accesses) --(a.write ? writers : readers)[a.buffer];
      for (const auto& [buf, tag] : Semantics(s.shape, st).writes) tags[buf] = tag;
      done[static_cast<size_t>(st.id)] = true;
      running[l] = -1;
      ++finished;
    }
  }
  return "";
}

TEST(BlockScheduleTest, NoBufferIsUsedBeforeItIsReadyOrOverwrittenWhileInUse) {
  for (const ScheduleShape& shape : Shapes()) {
    const BlockSchedule s = BuildBlockSchedule(shape);
    for (uint32_t seed = 0; seed < 8; ++seed) {
      ASSERT_EQ(Simulate(s, seed), "") << Name(shape) << " seed " << seed;
    }
  }
}

// The checker above is real: without the waits of one kind of step, some interleaving breaks.
// (With every family moving, some waits are also implied by others; the shape without moving
// activations exposes the cache steps.)
TEST(BlockScheduleTest, TheCheckerCatchesMissingWaits) {
  ScheduleShape all;
  all.blocks = 2;
  all.num_micro_batches = 2;
  all.num_tokens = 3;
  all.load_block_weights = all.move_activations = true;
  all.store_cache_prefill = all.load_cache_decode = all.store_cache_decode = true;
  ScheduleShape cache_only = all;
  cache_only.move_activations = false;
  ScheduleShape cpu = all, cpu_cache_only = cache_only;
  cpu.cpu_attention_decode = cpu_cache_only.cpu_attention_decode = true;
  for (StepKind kind : {StepKind::kLoadWeights, StepKind::kLoadCache, StepKind::kLoadActivations,
                        StepKind::kCompute, StepKind::kStoreCache, StepKind::kStoreActivations,
                        StepKind::kComputeToCpu, StepKind::kCpuAttention,
                        StepKind::kComputeFromCpu}) {
    bool caught = false;
    for (const ScheduleShape& shape : {all, cache_only, cpu, cpu_cache_only}) {
      BlockSchedule s = BuildBlockSchedule(shape);
      for (Step& step : s.steps) {
        if (step.kind == kind) step.waits.clear();
      }
      for (uint32_t seed = 0; seed < 64 && !caught; ++seed) caught = !Simulate(s, seed).empty();
    }
    EXPECT_TRUE(caught) << StepKindName(kind);
  }
}

// CPU delegation: while micro-batch k's attention runs on the CPU lane, the compute lane has
// other micro-batches' work queued — micro-batch k + 1's part before the CPU runs between k's
// parts before and after, and nothing orders it against k's CPU attention, so the two can run
// at once. A schedule that makes the compute lane wait for the CPU before going on fails this.
TEST(BlockScheduleTest, CpuAttentionOverlapsOtherMicroBatchesOnTheComputeLane) {
  int checked = 0;
  for (const ScheduleShape& shape : Shapes()) {
    if (!shape.cpu_attention_decode) continue;
    const BlockSchedule s = BuildBlockSchedule(shape);
    const Order order(s);
    std::map<std::tuple<StepKind, int, int, int>, int> id;  // (kind, token, layer, k)
    for (const Step& step : s.steps) {
      id[{step.kind, step.token, step.layer, step.micro_batch}] = step.id;
    }
    for (const Step& cpu : s.steps) {
      if (cpu.kind != StepKind::kCpuAttention) continue;
      EXPECT_EQ(cpu.lane, Lane::kCpu);
      EXPECT_GT(cpu.token, 0) << "the prefill's attention stays on the device";
      const int k = cpu.micro_batch;
      const int before = id.at({StepKind::kComputeToCpu, cpu.token, cpu.layer, k});
      const int after = id.at({StepKind::kComputeFromCpu, cpu.token, cpu.layer, k});
      EXPECT_TRUE(order.Precedes(before, cpu.id)) << Name(shape);
      EXPECT_TRUE(order.Precedes(cpu.id, after)) << Name(shape);
      if (k + 1 >= shape.num_micro_batches) continue;
      const int next = id.at({StepKind::kComputeToCpu, cpu.token, cpu.layer, k + 1});
      EXPECT_LT(before, next) << Name(shape);
      EXPECT_LT(next, after) << "the compute lane waits for the CPU; " << Name(shape);
      EXPECT_FALSE(order.Precedes(cpu.id, next))
          << "#" << next << " waits for the CPU; " << Name(shape);
      EXPECT_FALSE(order.Precedes(next, cpu.id)) << Name(shape);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// The split is CPU delegation's alone: a shape without it has no CPU lane and the same steps as
// before the lane existed, and one with it has three steps where the others have one compute.
TEST(BlockScheduleTest, OnlyDecodeAttentionSplitsForTheCpu) {
  for (const ScheduleShape& shape : Shapes()) {
    if (shape.cpu_attention_decode) continue;
    ScheduleShape split = shape;
    split.cpu_attention_decode = true;
    const BlockSchedule plain = BuildBlockSchedule(shape), cpu = BuildBlockSchedule(split);
    std::map<StepKind, int> count;
    for (const Step& step : plain.steps) {
      EXPECT_NE(step.lane, Lane::kCpu) << Name(shape);
      ++count[step.kind];
    }
    std::map<StepKind, int> split_count;
    for (const Step& step : cpu.steps) ++split_count[step.kind];
    const int delegated = (shape.num_tokens - 1) * shape.blocks * shape.num_micro_batches;
    EXPECT_EQ(split_count[StepKind::kCompute], count[StepKind::kCompute] - delegated);
    for (StepKind kind : {StepKind::kComputeToCpu, StepKind::kCpuAttention,
                          StepKind::kComputeFromCpu}) {
      EXPECT_EQ(split_count[kind], delegated) << StepKindName(kind) << "; " << Name(shape);
    }
    for (StepKind kind : {StepKind::kLoadWeights, StepKind::kLoadCache,
                          StepKind::kLoadActivations, StepKind::kStoreCache,
                          StepKind::kStoreActivations}) {
      EXPECT_EQ(split_count[kind], count[kind]) << StepKindName(kind) << "; " << Name(shape);
    }
  }
}

}  // namespace
}  // namespace strata
