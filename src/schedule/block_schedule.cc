#include "src/schedule/block_schedule.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>

#include "src/core/check.h"

namespace strata {
namespace {

// The input embedding's rows are gathered last: they wait for the tokens the output layer
// samples, and the next layer's weights need not wait behind them.
int LoadRank(const Step& load) {
  switch (load.kind) {
    case StepKind::kLoadCache:
      return 0;
    case StepKind::kLoadActivations:
      return 1;
    default:
      return load.layer == 0 ? 3 : 2;
  }
}

// Steps are first collected per iteration (one (scheduling layer, micro-batch) compute each) and
// flattened as: stores, then loads, then the compute, then the compute deferred to it (CPU
// delegation's parts after the CPU). Bucket 0 precedes the first iteration and the last bucket
// follows the last one.
struct Bucket {
  std::vector<Step> stores, loads, compute, deferred;
};

constexpr BufferId kTokens{BufferKind::kTokens, 0};

class Builder {
 public:
  explicit Builder(const ScheduleShape& s)
      : s_(s),
        layers_(NumSchedulingLayers(s.blocks)),
        iterations_(static_cast<int64_t>(s.num_tokens) * layers_ * s.num_micro_batches),
        buckets_(static_cast<size_t>(iterations_ + 2)),
        home_free_at_(static_cast<size_t>(s.num_micro_batches), -1) {}

  BlockSchedule Build() {
    for (int64_t t = 0; t < iterations_; ++t) AddIteration(t);
    BlockSchedule out;
    out.shape = s_;
    for (Bucket& b : buckets_) {
      // Inside an iteration: the next micro-batch's cache, then its hidden states, then the next
      // layer's weights, then the input embedding's rows. FlexGen puts the weights first, which
      // holds a layer's later micro-batches behind the next layer's weights (policy/cost_model.h,
      // the weight slots).
      std::stable_sort(b.loads.begin(), b.loads.end(),
                       [](const Step& x, const Step& y) { return LoadRank(x) < LoadRank(y); });
      for (auto* part : {&b.stores, &b.loads, &b.compute, &b.deferred}) {
        for (Step& step : *part) out.steps.push_back(std::move(step));
      }
    }
    for (size_t i = 0; i < out.steps.size(); ++i) out.steps[i].id = static_cast<int>(i);
    DeriveWaits(out.steps);
    return out;
  }

 private:
  int64_t IterationOf(int64_t g, int k) const { return g * s_.num_micro_batches + k; }
  Bucket& BucketOf(int64_t iteration) { return buckets_[static_cast<size_t>(iteration + 1)]; }

  // The slot a load or store moves, or a compute-like step's slots: where free_at_ keeps track.
  static std::vector<BufferId> SlotsOf(const Step& step) {
    std::vector<BufferId> slots;
    for (const BufferAccess& a : step.accesses) {
      const BufferKind k = a.buffer.kind;
      if (k == BufferKind::kWeightSlot || k == BufferKind::kCacheSlot ||
          k == BufferKind::kActivationSlot) {
        slots.push_back(a.buffer);
      }
    }
    return slots;
  }
  // Records that `step`, in bucket `iteration` (BucketOf's index), uses its slots: a load in a
  // later bucket comes after it in the list; a load in the same bucket comes after a store there.
  void Use(const Step& step, int64_t iteration) {
    const int64_t free = step.lane == Lane::kStore ? iteration : iteration + 1;
    for (const BufferId& id : SlotsOf(step)) {
      int64_t& at = free_at_[id];
      at = std::max(at, free);
    }
  }
  void Compute(int64_t iteration, Step step, bool deferred = false) {
    Use(step, iteration);
    Bucket& b = BucketOf(iteration);
    (deferred ? b.deferred : b.compute).push_back(std::move(step));
  }
  void Store(int64_t iteration, Step step) {
    Use(step, iteration);
    BucketOf(iteration).stores.push_back(std::move(step));
  }
  // A load into a slot goes in bucket `iteration`, or later when a step that uses the slot's
  // previous contents comes later in the list (only with CPU delegation, whose parts after the
  // CPU and hidden-state stores move one iteration later).
  void Load(int64_t iteration, Step step) {
    for (const BufferId& id : SlotsOf(step)) {
      const auto it = free_at_.find(id);
      if (it != free_at_.end()) iteration = std::max(iteration, it->second);
    }
    BucketOf(iteration).loads.push_back(std::move(step));
  }

  bool LoadsWeights(LayerRole role) const {
    switch (role) {
      case LayerRole::kInputEmbedding: return s_.load_input_weights;
      case LayerRole::kAttention:
      case LayerRole::kMlp: return s_.load_block_weights;
      case LayerRole::kOutput: return s_.load_output_weights;
    }
    return false;
  }
  bool UsesCacheSlot(int token) const {
    return token == 0 ? s_.store_cache_prefill : s_.load_cache_decode || s_.store_cache_decode;
  }

  void AddIteration(int64_t t) {
    const int nb = s_.num_micro_batches;
    const int64_t g = t / nb;
    const int k = static_cast<int>(t % nb);
    const int token = static_cast<int>(g / layers_);
    const int layer = static_cast<int>(g % layers_);
    const LayerRole role = RoleOfLayer(layer, s_.blocks);
    const int block = role == LayerRole::kAttention ? BlockOfLayer(layer) : -1;
    const int wslot = static_cast<int>(g % 2);
    const int aslot = static_cast<int>(t % 2);
    // Attention steps alternate cache slots: (token, block, k) counted in schedule order.
    const int cslot =
        static_cast<int>(((static_cast<int64_t>(token) * s_.blocks + block) * nb + k) % 2);
    const BufferId cache_home{BufferKind::kCacheHome, block * nb + k};
    const BufferId act_home{BufferKind::kActivationHome, k};
    // CPU delegation: this iteration's compute is the part before the CPU, `cpu` the CPU lane's
    // attention and `after` the part after, deferred behind micro-batch k + 1's part before.
    const bool split = role == LayerRole::kAttention && token > 0 && s_.cpu_attention_decode;
    // The bucket of the iteration's last compute-lane step, after which its hidden states go home.
    const int64_t done = split && k + 1 < nb ? t + 1 : t;

    auto make = [&](Lane lane, StepKind kind) {
      Step s;
      s.lane = lane;
      s.kind = kind;
      s.token = token;
      s.layer = layer;
      s.micro_batch = kind == StepKind::kLoadWeights ? -1 : k;
      return s;
    };

    Step compute = make(Lane::kCompute, split ? StepKind::kComputeToCpu : StepKind::kCompute);
    Step cpu = make(Lane::kCpu, StepKind::kCpuAttention);
    Step after = make(Lane::kCompute, StepKind::kComputeFromCpu);
    if (LoadsWeights(role)) {
      compute.weight_slot = after.weight_slot = wslot;
      compute.accesses.push_back({{BufferKind::kWeightSlot, wslot}, false});
      after.accesses.push_back({{BufferKind::kWeightSlot, wslot}, false});
      if (k == 0) {
        Step load = make(Lane::kLoad, StepKind::kLoadWeights);
        load.weight_slot = wslot;
        load.accesses.push_back({{BufferKind::kWeightSlot, wslot}, true});
        if (role == LayerRole::kInputEmbedding) {
          // The rows of the tokens the previous token step sampled, once all are sampled.
          if (token > 0) load.accesses.push_back({kTokens, false});
          Load(g == 0 ? -1 : t, std::move(load));
        } else {
          Load(g == 0 ? -1 : IterationOf(g - 1, 0), std::move(load));
        }
      }
    }
    if (role == LayerRole::kOutput && s_.load_input_weights) {
      compute.accesses.push_back({kTokens, true});
    }
    // The part before only reads the hidden states; the part after adds to them.
    const BufferId act =
        s_.move_activations ? BufferId{BufferKind::kActivationSlot, aslot} : act_home;
    if (s_.move_activations) compute.activation_slot = after.activation_slot = aslot;
    // The input layer only writes its slot and the output layer only reads it.
    compute.accesses.push_back(
        {act, split ? false : !s_.move_activations || role != LayerRole::kOutput});
    after.accesses.push_back({act, true});
    if (s_.move_activations) {
      const BufferId slot{BufferKind::kActivationSlot, aslot};
      if (role != LayerRole::kInputEmbedding) {
        Step load = make(Lane::kLoad, StepKind::kLoadActivations);
        load.activation_slot = aslot;
        load.accesses = {{act_home, false}, {slot, true}};
        // Normally while micro-batch k - 1 computes; with one micro-batch, only once the
        // previous layer's hidden states have gone home.
        Load(std::max(t - 1, home_free_at_[static_cast<size_t>(k)]), std::move(load));
      }
      if (role != LayerRole::kOutput) {
        Step store = make(Lane::kStore, StepKind::kStoreActivations);
        store.activation_slot = aslot;
        store.accesses = {{slot, false}, {act_home, true}};
        home_free_at_[static_cast<size_t>(k)] = done + 1;
        Store(done + 1, std::move(store));
      }
    }
    if (role == LayerRole::kAttention) {
      const BufferId slot{BufferKind::kCacheSlot, cslot};
      // With delegation the CPU writes the off-GPU rows (and the disk rows' slot).
      Step& writer = split ? cpu : compute;
      if (UsesCacheSlot(token)) {
        writer.cache_slot = cslot;
        writer.accesses.push_back({slot, true});
      }
      compute.accesses.push_back({cache_home, true});
      if (split) {
        const BufferId workspace{BufferKind::kCpuWorkspace, k % 2};
        compute.accesses.push_back({workspace, true});
        cpu.accesses.push_back({cache_home, true});
        cpu.accesses.push_back({workspace, true});
        after.accesses.push_back({workspace, false});
      }
      if (token > 0 && s_.load_cache_decode) {
        Step load = make(Lane::kLoad, StepKind::kLoadCache);
        load.cache_slot = cslot;
        load.accesses = {{cache_home, false}, {slot, true}};
        Load(t - 1, std::move(load));
      }
      if (token == 0 ? s_.store_cache_prefill : s_.store_cache_decode) {
        Step store = make(Lane::kStore, StepKind::kStoreCache);
        store.cache_slot = cslot;
        store.accesses = {{slot, false}, {cache_home, true}};
        Store(t + 1, std::move(store));
      }
    }
    Compute(t, std::move(compute));
    if (split) {
      Compute(t, std::move(cpu));
      Compute(done, std::move(after), /*deferred=*/true);
    }
  }

  static void DeriveWaits(std::vector<Step>& steps) {
    struct State {
      int last_writer = -1;
      std::vector<int> readers;  // since last_writer
    };
    std::map<BufferId, State> state;
    for (Step& step : steps) {
      std::array<int, kNumLanes> latest;
      latest.fill(-1);
      auto depend = [&](int id) {
        const Lane lane = steps[static_cast<size_t>(id)].lane;
        if (lane != step.lane) latest[static_cast<int>(lane)] = std::max(latest[static_cast<int>(lane)], id);
      };
      for (const BufferAccess& a : step.accesses) {
        const State& st = state[a.buffer];
        if (st.last_writer >= 0) depend(st.last_writer);
        if (a.write) {
          for (int r : st.readers) depend(r);
        }
      }
      for (const BufferAccess& a : step.accesses) {
        State& st = state[a.buffer];
        if (a.write) {
          st.last_writer = step.id;
          st.readers.clear();
        } else {
          st.readers.push_back(step.id);
        }
      }
      for (int id : latest) {
        if (id >= 0) step.waits.push_back(id);
      }
      std::sort(step.waits.begin(), step.waits.end());
    }
  }

  const ScheduleShape& s_;
  const int layers_;
  const int64_t iterations_;
  std::vector<Bucket> buckets_;
  // Per slot: the first bucket whose loads may overwrite it (Use).
  std::map<BufferId, int64_t> free_at_;
  // Per micro-batch: the bucket of its latest hidden-state store, after which its next layer's
  // hidden states may load from home.
  std::vector<int64_t> home_free_at_;
};

}  // namespace

const char* LaneName(Lane lane) {
  switch (lane) {
    case Lane::kLoad: return "load";
    case Lane::kCompute: return "compute";
    case Lane::kStore: return "store";
    case Lane::kCpu: return "cpu";
  }
  return "?";
}

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kLoadWeights: return "load_weights";
    case StepKind::kLoadCache: return "load_cache";
    case StepKind::kLoadActivations: return "load_activations";
    case StepKind::kCompute: return "compute";
    case StepKind::kStoreCache: return "store_cache";
    case StepKind::kStoreActivations: return "store_activations";
    case StepKind::kComputeToCpu: return "compute_to_cpu";
    case StepKind::kCpuAttention: return "cpu_attention";
    case StepKind::kComputeFromCpu: return "compute_from_cpu";
  }
  return "?";
}

const char* LayerRoleName(LayerRole role) {
  switch (role) {
    case LayerRole::kInputEmbedding: return "input";
    case LayerRole::kAttention: return "attention";
    case LayerRole::kMlp: return "mlp";
    case LayerRole::kOutput: return "output";
  }
  return "?";
}

const char* BufferKindName(BufferKind kind) {
  switch (kind) {
    case BufferKind::kWeightSlot: return "weight_slot";
    case BufferKind::kCacheSlot: return "cache_slot";
    case BufferKind::kActivationSlot: return "activation_slot";
    case BufferKind::kCacheHome: return "cache_home";
    case BufferKind::kActivationHome: return "activation_home";
    case BufferKind::kTokens: return "tokens";
    case BufferKind::kCpuWorkspace: return "cpu_workspace";
  }
  return "?";
}

LayerRole RoleOfLayer(int layer, int blocks) {
  STRATA_CHECK(layer >= 0 && layer < NumSchedulingLayers(blocks));
  if (layer == 0) return LayerRole::kInputEmbedding;
  if (layer == NumSchedulingLayers(blocks) - 1) return LayerRole::kOutput;
  return layer % 2 == 1 ? LayerRole::kAttention : LayerRole::kMlp;
}

Status ScheduleShape::Validate() const {
  auto positive = [](const char* name, int v) {
    return v >= 1 ? Status::Ok()
                  : Status::InvalidArgument(std::string(name) + " must be at least 1, got " +
                                            std::to_string(v));
  };
  STRATA_RETURN_IF_ERROR(positive("blocks", blocks));
  STRATA_RETURN_IF_ERROR(positive("num_micro_batches", num_micro_batches));
  return positive("num_tokens", num_tokens);
}

BlockSchedule BuildBlockSchedule(const ScheduleShape& shape) {
  STRATA_CHECK(shape.Validate().ok());
  return Builder(shape).Build();
}

}  // namespace strata
