#include "src/runtime/offload_generator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "policy/fit_check.h"
#include "policy/memory_accounting.h"
#include "src/core/check.h"
#include "src/core/host_memory.h"
#include "src/core/log.h"
#include "src/memory/model_spec_of.h"
#include "src/memory/placement.h"
#include "src/memory/weight_homes.h"
#include "src/runtime/executor_sequences.h"
#include "src/runtime/q4_weights.h"

namespace strata {

struct OffloadGenerator::Engine {
  Placement placement;
  std::unique_ptr<MemoryTiers> tiers;
  std::unique_ptr<BlockExecutor> executor;
  TierBytes planned;  // the plan's accounting for this size; -1 where it cannot describe it
};

OffloadGenerator::OffloadGenerator(const Model& model, Backend& backend, Backend& cpu_backend,
                                   const Tokenizer& tokenizer,
                                   std::vector<int32_t> eog_ids, OffloadOptions options)
    : model_(model),
      backend_(backend),
      cpu_backend_(cpu_backend),
      tokenizer_(tokenizer),
      eog_ids_(std::move(eog_ids)),
      options_(std::move(options)) {}

OffloadGenerator::~OffloadGenerator() = default;

Status OffloadGenerator::Prepare(int prompt_len, int max_len) {
  if (engine_ == nullptr) return Place(prompt_len, max_len);
  const BlockShape& s = engine_->placement.shape;
  if (prompt_len <= s.prompt_len && max_len <= s.max_len) return Status::Ok();
  // Never smaller than before; and since placing again copies every weight home again, at least
  // double (within the model's context), so that a job whose blocks grow as it goes (`run` sorts
  // them by prompt length) places a few times, not once a block. Where doubled sizes do not fit,
  // the sizes needed.
  const int needed_prompt = std::max(prompt_len, s.prompt_len);
  const int needed_max = std::max(max_len, s.max_len);
  const int context = model_.config().max_position_embeddings;
  const int grown_prompt =
      std::max(needed_prompt, context > 1 ? std::min(2 * s.prompt_len, context - 1) : 0);
  const int grown_max = std::max(needed_max, context > 1 ? std::min(2 * s.max_len, context) : 0);
  engine_.reset();
  LogInfo("re-placing for prompts of " + std::to_string(grown_prompt) + " tokens and " +
          std::to_string(grown_max) + " cache slots");
  const Status grown = Place(grown_prompt, grown_max);
  if (grown.ok() || (grown_prompt == needed_prompt && grown_max == needed_max)) return grown;
  LogInfo("re-placing for prompts of " + std::to_string(needed_prompt) + " tokens and " +
          std::to_string(needed_max) + " cache slots instead: " + grown.message());
  return Place(needed_prompt, needed_max);
}

Status OffloadGenerator::Place(int prompt_len, int max_len) {
  const auto start = std::chrono::steady_clock::now();
  const Plan& plan = options_.plan;
  const BlockShape shape{plan.gpu_batch_size, plan.num_gpu_batches, prompt_len, max_len};
  auto engine = std::make_unique<Engine>();
  const SpanType activations = backend_.ActivationType(WeightDTypeOf(model_));
  STRATA_ASSIGN_OR_RETURN(engine->placement, PlaceBlock(model_, plan, shape, activations));
  const OpLimits& limits = engine->placement.op_limits;
  if (limits.kv_q4) {
    STRATA_RETURN_IF_ERROR(backend_.SupportsKvQ4(limits.kv_q4_format, limits.head_dim)
                               .WithContext(std::string("the 4-bit KV cache on the ") +
                                            backend_.name() + " backend"));
  }
  STRATA_RETURN_IF_ERROR(CheckHostMemoryFor(engine->placement, prompt_len, max_len,
                                            &engine->planned));
  // The device tier holds the arena and the backend's own scratch for this block's largest op,
  // reserved before the token loop.
  STRATA_ASSIGN_OR_RETURN(engine->tiers,
                          MemoryTiers::Create(engine->placement.layout, options_.tiers, backend_,
                                              engine->placement.weights.weight_file,
                                              &engine->placement.op_limits));
  if (plan.compress_weight) {
    const Q4Weights q4(model_);
    STRATA_RETURN_IF_ERROR(
        CopyWeightsHome(model_, engine->placement.weights, *engine->tiers, backend_,
                        q4.PlanesOf()));
  } else {
    STRATA_RETURN_IF_ERROR(
        CopyWeightsHome(model_, engine->placement.weights, *engine->tiers, backend_));
  }
  engine->executor = std::make_unique<BlockExecutor>(model_, backend_, cpu_backend_,
                                                     engine->placement, *engine->tiers);
  engine_ = std::move(engine);
  ++placements_;
  placement_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

Status OffloadGenerator::CheckHostMemoryFor(const Placement& placement, int prompt_len,
                                            int max_len, TierBytes* planned) const {
  const int64_t available = options_.host_memory_bytes >= 0 ? options_.host_memory_bytes
                                                            : AvailableHostBytes();
  *planned = {-1, -1, -1};
  const int activation_bytes = static_cast<int>(SpanElementBytes(placement.activation_type));
  if (Result<ModelSpec> spec = ModelSpecOf(model_, activation_bytes); spec.ok()) {
    const Workload workload{prompt_len, max_len - prompt_len, 0};
    if (Result<MemoryPlan> mem = AccountMemory(*spec, workload, options_.plan); mem.ok()) {
      *planned = mem->total_bytes;
      return CheckHostMemory(*mem, *spec, workload, options_.plan, available);
    }
  }
  // A model the accounting cannot describe: the layout's arenas are what will be allocated.
  const TierLayout& layout = placement.layout;
  const int64_t device = static_cast<int64_t>(layout.tier_bytes(Tier::kGpu));
  const int64_t cpu = static_cast<int64_t>(layout.tier_bytes(Tier::kCpu));
  if (device + cpu + kHostMemoryReserveBytes <= available) return Status::Ok();
  return Status::ResourceExhausted(
      "host memory: the placement needs " + FormatBytes(device + cpu) + " of host memory (device "
      "tier " + FormatBytes(device) + ", which this engine keeps in host memory; CPU tier " +
      FormatBytes(cpu) + ") but " + FormatBytes(available) + " is available (MemAvailable), of "
      "which " + FormatBytes(kHostMemoryReserveBytes) + " is kept for the rest of the process; "
      "lower the GPU and CPU percents to put weights or the KV cache on disk, or the batch");
}

ScheduleShape OffloadGenerator::ShapeFor(int micro_batches, int tokens) const {
  const Placement& p = engine_->placement;
  ScheduleShape s;
  s.blocks = model_.config().num_layers;
  s.num_micro_batches = micro_batches;
  s.num_tokens = tokens;
  s.load_input_weights = p.weights.input().slot_bytes() > 0;
  s.load_output_weights = p.weights.output().slot_bytes() > 0;
  for (int b = 0; b < s.blocks; ++b) s.load_block_weights |= p.weights.block(b).slot_bytes() > 0;
  s.move_activations = p.activations.rows.off_gpu() > 0;
  const TierRows& kv = p.cache.rows;
  s.store_cache_prefill = kv.off_gpu() > 0;
  s.load_cache_decode = s.store_cache_decode =
      p.plan.cpu_attention ? kv.disk > 0 : kv.off_gpu() > 0;
  s.cpu_attention_decode = p.plan.cpu_attention && kv.off_gpu() > 0;
  return s;
}

Result<BlockSchedule> OffloadGenerator::ScheduleFor(int sequences, int prompt_len, int gen_len) {
  if (sequences < 1 || prompt_len < 1 || gen_len < 1) {
    return Status::InvalidArgument("a schedule needs at least one sequence, prompt token and "
                                   "generated token");
  }
  STRATA_RETURN_IF_ERROR(Prepare(prompt_len, prompt_len + gen_len));
  const int gbs = options_.plan.gpu_batch_size;
  const int nb = std::min(options_.plan.num_gpu_batches, (sequences + gbs - 1) / gbs);
  return BuildBlockSchedule(ShapeFor(nb, gen_len));
}

Result<std::vector<GenerationResult>> OffloadGenerator::RunBlock(
    const std::vector<GenerationRequest>& block) {
  int prompt_len = 0, tokens = 0;
  for (const GenerationRequest& r : block) {
    STRATA_CHECK(!r.prompt.empty() && TokensToGenerate(r) >= 1);
    prompt_len = std::max(prompt_len, static_cast<int>(r.prompt.size()));
    tokens = std::max(tokens, TokensToGenerate(r));
  }
  STRATA_RETURN_IF_ERROR(Prepare(prompt_len, prompt_len + tokens));
  BlockSequences sequences(block, tokenizer_, eog_ids_);
  BlockRun run;
  run.requests = &block;
  run.sequences = &sequences;
  run.gpu_batch_size = options_.plan.gpu_batch_size;
  run.num_micro_batches = (static_cast<int>(block.size()) + run.gpu_batch_size - 1) /
                          run.gpu_batch_size;
  run.prompt_len = prompt_len;
  run.inputs.resize(static_cast<size_t>(run.num_micro_batches));
  const BlockSchedule schedule = BuildBlockSchedule(ShapeFor(run.num_micro_batches, tokens));

  std::vector<LaneRecord> records;
  ExecutorMetrics m;
  ExecutorOptions executor_options = options_.executor;
  executor_options.cancel = cancel_;
  STRATA_RETURN_IF_ERROR(
      engine_->executor->Run(schedule, run, executor_options, records, m));
  for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
    m.peak_bytes.at(t) = static_cast<int64_t>(engine_->tiers->peak_bytes(t));
  }
  // Disk weights read in place from the store live on disk as much as the scratch file does.
  m.peak_bytes.disk_bytes += static_cast<int64_t>(engine_->placement.weights.store_disk_bytes);
  m.planned_bytes = engine_->planned;
  // The device backend's own scratch lies beside the arena, planned with it (MemoryTiers::Create).
  const int64_t scratch = static_cast<int64_t>(engine_->tiers->backend_scratch_bytes());
  m.peak_bytes.gpu_bytes += scratch;
  if (m.planned_bytes.gpu_bytes >= 0) m.planned_bytes.gpu_bytes += scratch;
  if (options_.keep_trace) {
    const double offset_us = metrics_.wall_s * 1e6;
    for (const LaneRecord& r : records) {
      for (TraceSpan s : r.spans()) {
        s.start_us += offset_us;
        trace_.push_back(std::move(s));
      }
    }
  }
  metrics_.Accumulate(m);
  // Only a cancel leaves a sequence running: every one ends at max_new_tokens at the latest.
  const bool cut = !sequences.all_done();
  std::vector<GenerationResult> results = sequences.TakeResults();
  if (cut) {
    STRATA_CHECK(Cancelled());
    for (GenerationResult& r : results) r.reason = StopReason::kCancelled;
  }
  return results;
}

bool OffloadGenerator::Cancelled() const {
  return cancel_ != nullptr && cancel_->load(std::memory_order_relaxed);
}

Result<std::vector<GenerationResult>> OffloadGenerator::TryGenerate(
    const std::vector<GenerationRequest>& block) {
  const size_t size = static_cast<size_t>(options_.plan.block_size());
  std::vector<GenerationResult> results;
  for (size_t first = 0; first < block.size(); first += size) {
    if (Cancelled()) {
      // The blocks not started: nothing generated, every result cancelled.
      results.resize(block.size());
      for (size_t i = first; i < block.size(); ++i) results[i].reason = StopReason::kCancelled;
      break;
    }
    const std::vector<GenerationRequest> part(
        block.begin() + static_cast<long>(first),
        block.begin() + static_cast<long>(std::min(block.size(), first + size)));
    STRATA_ASSIGN_OR_RETURN(std::vector<GenerationResult> out, RunBlock(part));
    for (GenerationResult& r : out) results.push_back(std::move(r));
  }
  return results;
}

std::vector<GenerationResult> OffloadGenerator::Generate(
    const std::vector<GenerationRequest>& block) {
  Result<std::vector<GenerationResult>> out = TryGenerate(block);
  if (!out.ok()) {
    std::fprintf(stderr, "strata: offloaded generation failed: %s\n",
                 out.status().ToString().c_str());
    std::abort();
  }
  return std::move(out).value();
}

Status OffloadGenerator::WriteTrace(const std::string& path) const {
  STRATA_CHECK(options_.keep_trace);
  return WriteChromeTrace(path, trace_);
}

}  // namespace strata
