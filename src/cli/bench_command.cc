#include "src/cli/bench_command.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "policy/model_spec.h"
#include "policy/plan.h"
#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/cli/device_flags.h"
#include "src/cli/exit_codes.h"
#include "src/cli/lane_report.h"
#include "src/core/log.h"
#include "src/memory/model_spec_of.h"
#include "src/model/model.h"
#include "src/model/synthetic_model.h"
#include "src/runtime/offload_generator.h"
#include "src/schedule/schedule_dump.h"
#include "src/tokenizer/silent_tokenizer.h"

namespace strata {
namespace {

int Fail(const Status& s) {
  Log(LogLevel::kError, s.message());
  return kExitUnusable;
}

// The forward pass's config for a preset: OPT-like presets (learned positions, LayerNorm with
// bias) or Llama-like ones (RoPE, RMSNorm, gated MLP).
ModelConfig ConfigOf(const ModelSpec& s, int num_layers) {
  ModelConfig c;
  const bool opt = s.position_embedding_rows > 0;
  c.arch = opt ? Architecture::kOpt : Architecture::kLlama;
  c.vocab_size = s.vocab_size;
  c.hidden_size = s.hidden_size;
  c.intermediate_size = s.intermediate_size;
  c.num_layers = num_layers > 0 ? num_layers : s.num_layers;
  c.num_heads = s.num_heads;
  c.num_kv_heads = s.num_kv_heads;
  c.head_dim = s.head_dim;
  c.max_position_embeddings = s.max_position_embeddings;
  c.norm = s.norm_bias ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  c.activation = s.gated_mlp ? Activation::kSilu : Activation::kRelu;
  c.gated_mlp = s.gated_mlp;
  c.attention_bias = s.linear_bias || s.qkv_bias;
  c.attention_output_bias = c.mlp_bias = s.linear_bias;
  c.qk_norm = s.qk_norm;
  c.tie_word_embeddings = s.tie_word_embeddings;
  c.use_rope = !opt;
  c.position_offset = opt ? s.position_embedding_rows - s.max_position_embeddings : 0;
  return c;
}

Result<DType> WeightDType(const std::string& name) {
  if (name == "f16") return DType::kF16;
  if (name == "bf16") return DType::kBF16;
  if (name == "f32") return DType::kF32;
  return Status::InvalidArgument("--weight-dtype must be f16, bf16 or f32, got " + name);
}

// What bench runs: the model and the name its report gives it.
struct BenchModel {
  std::unique_ptr<Model> model;
  std::string name;  // the path, or the preset and how many of its layers, e.g.
                     // "llama-2-7b, 2 of its 32 layers (--num-layers 2)"
};

// A preset's name and, when --num-layers changes them, the layers bench builds of it.
std::string PresetName(const ModelSpec& spec, int num_layers) {
  const std::string n = std::to_string(num_layers), all = std::to_string(spec.num_layers);
  if (num_layers == 0 || num_layers == spec.num_layers) return spec.name;
  if (num_layers < spec.num_layers) {
    return spec.name + ", " + n + " of its " + all + " layers (--num-layers " + n + ")";
  }
  return spec.name + " with " + n + " layers (--num-layers " + n + "; the preset has " + all + ")";
}

// A model file or directory as loaded; a preset with synthetic weights otherwise, made on demand
// (src/model/synthetic_model.h): nothing is allocated for them until the engine places them, and
// then only their homes.
Result<BenchModel> MakeBenchModel(const BenchOptions& o) {
  std::error_code ec;
  if (std::filesystem::exists(o.model, ec) && !o.model.ends_with(".yaml")) {
    if (o.num_layers > 0) {
      return Status::InvalidArgument("--num-layers applies to presets, not to " + o.model);
    }
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModel(o.model));
    LogInfo("model " + o.model + ": " + model->config().Summary());
    return BenchModel{std::move(model), o.model};
  }
  STRATA_ASSIGN_OR_RETURN(std::string preset, ResolveConfigFile("models", o.model));
  STRATA_ASSIGN_OR_RETURN(ModelSpec spec, LoadModelSpecYaml(preset));
  STRATA_ASSIGN_OR_RETURN(DType dtype, WeightDType(o.weight_dtype));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                          MakeSyntheticModel(ConfigOf(spec, o.num_layers), dtype, /*seed=*/1,
                                             SyntheticWeights::kOnDemand));
  const std::string name = PresetName(spec, o.num_layers);
  LogInfo("synthetic " + name + ": " + model->config().Summary() + ", " +
          FormatBytes(static_cast<int64_t>(model->weight_bytes())) + " of " + o.weight_dtype +
          " weights, made as they go to their homes");
  return BenchModel{std::move(model), name};
}

}  // namespace

CLI::App* AddBenchCommand(CLI::App& app, BenchOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "bench", "Throughput of a preset with synthetic weights and prompts (FlexGen's metrics)");
  cmd->add_option("--model,-m", o->model,
                  "Preset name (configs/models) or preset YAML, run with synthetic weights; or a "
                  "model directory or GGUF file, run with its own")
      ->required();
  cmd->add_option("--num-layers", o->num_layers,
                  "Transformer blocks to build (0: the preset's); for machines too small for it")
      ->capture_default_str();
  cmd->add_option("--prompt-len", o->prompt_len, "Prompt tokens")->capture_default_str();
  cmd->add_option("--gen-len", o->gen_len, "Generated tokens")->capture_default_str();
  cmd->add_option("--num-blocks", o->num_blocks, "Blocks to run")->capture_default_str();
  cmd->add_option("--max-block-size", o->max_block_size,
                  "--policy auto: most sequences per block the search may choose")
      ->capture_default_str();
  AddPolicyFlags(cmd, &o->policy);
  AddDeviceFlag(cmd, &o->device);
  AddActivationsFlag(cmd, &o->activations);
  cmd->add_option("--weight-dtype", o->weight_dtype, "f16, bf16 or f32")->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")->capture_default_str();
  return cmd;
}

int BenchCommand(const BenchOptions& o) {
  if (o.prompt_len < 1 || o.gen_len < 1 || o.num_blocks < 1 || o.num_layers < 0) {
    return Fail(Status::InvalidArgument(
        "--prompt-len, --gen-len and --num-blocks must be at least 1, --num-layers at least 0"));
  }
  if (o.max_block_size < 1) return Fail(Status::InvalidArgument("--max-block-size must be >= 1"));
  SetCpuThreads(o.threads);
  Result<Backends> backends = MakeBackends(o.device, o.policy.gpu_memory_bytes, o.activations);
  if (!backends.ok()) return Fail(backends.status());
  std::string hardware_origin;
  Result<std::optional<HardwareSpec>> hardware = HardwareFromFlags(o.policy, &hardware_origin);
  if (!hardware.ok()) return Fail(hardware.status());
  FitProfileToDevice(*backends, hardware_origin, *hardware);
  if (o.policy.explicit_plan()) {  // a plan by hand and its offload directory, before the model
    Result<Plan> given = PlanFromFlags(o.policy);
    if (!given.ok()) return Fail(given.status());
    if (Status s = PrepareOffloadDir(o.policy, *given); !s.ok()) return Fail(s);
  }
  Result<BenchModel> bench_model = MakeBenchModel(o);
  if (!bench_model.ok()) return Fail(bench_model.status());
  const Model& model = *bench_model->model;
  const ModelConfig& config = model.config();
  if (o.prompt_len + o.gen_len > config.max_position_embeddings) {
    return Fail(Status::OutOfRange("prompt + generation exceeds the model's context of " +
                                   std::to_string(config.max_position_embeddings) + " tokens"));
  }
  std::optional<ModelSpec> spec;
  if (Result<ModelSpec> s = ModelSpecOf(model, ActivationBytesOn(*backends->device, model));
      s.ok()) {
    spec = std::move(s).value();
  }
  LogInfo("device " + backends->description + "; hardware profile: " + hardware_origin);
  const Workload workload{o.prompt_len, o.gen_len, 0};
  Result<ChosenPlan> chosen = ChoosePlan(o.policy, spec, workload, *hardware, o.max_block_size,
                                         DeviceScratchOf(*backends->device, model, workload));
  if (!chosen.ok()) return Fail(chosen.status());
  const Plan* plan = &chosen->plan;
  LogInfo("plan " + chosen->how + ": " + PlanToFlexGenFlags(*plan));
  if (!o.policy.explicit_plan()) {  // a plan by hand had its offload directory checked above
    if (Status s = PrepareOffloadDir(o.policy, *plan); !s.ok()) return Fail(s);
  }

  OffloadOptions oo = OffloadOptionsFromFlags(o.policy, *chosen);
  oo.prompt_len = o.prompt_len;
  oo.gen_len = o.gen_len;
  SilentTokenizer tokenizer(config.vocab_size);
  OffloadGenerator generator(model, *backends->device, *backends->cpu, tokenizer, {}, oo);
  const int block = static_cast<int>(plan->block_size());
  if (!o.policy.dump_schedule.empty()) {
    Result<BlockSchedule> schedule = generator.ScheduleFor(block, o.prompt_len, o.gen_len);
    if (!schedule.ok()) return Fail(schedule.status());
    Status s = WriteTextFile(o.policy.dump_schedule, DumpSchedule(*schedule));
    return s.ok() ? kExitOk : Fail(s);
  }

  std::vector<GenerationRequest> requests(static_cast<size_t>(block) * o.num_blocks);
  uint64_t state = 12345;
  for (GenerationRequest& r : requests) {
    for (int i = 0; i < o.prompt_len; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      r.prompt.push_back(static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(config.vocab_size)));
    }
    r.max_new_tokens = o.gen_len;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
  }
  // Placement and the weights' trip to their homes happen before the clock starts.
  const auto setup_start = std::chrono::steady_clock::now();
  if (Result<BlockSchedule> s = generator.ScheduleFor(block, o.prompt_len, o.gen_len); !s.ok()) {
    return Fail(s.status());
  }
  char setup[96];
  std::snprintf(setup, sizeof(setup), "tiers allocated and weights home in %.1f s",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start)
                    .count());
  LogInfo(setup);
  Result<std::vector<GenerationResult>> out = generator.TryGenerate(requests);
  if (!out.ok()) return Fail(out.status());
  const ExecutorMetrics& m = generator.metrics();
  const double sequences = static_cast<double>(requests.size());
  const double decode_s = m.wall_s - m.prefill_s;
  std::printf("model      %s: %s (%s of weights)\n", bench_model->name.c_str(),
              config.Summary().c_str(),
              FormatBytes(static_cast<int64_t>(model.weight_bytes())).c_str());
  std::printf("workload   prompt %d, generate %d, %d block(s) of %d\n", o.prompt_len, o.gen_len,
              o.num_blocks, block);
  std::printf("device     %s\n", backends->description.c_str());
  std::printf("plan       %s (%s)\n", PlanToFlexGenFlags(*plan).c_str(), chosen->how.c_str());
  std::printf("prefill    %.2f tokens/s (%.3f s)\n", sequences * o.prompt_len / m.prefill_s,
              m.prefill_s);
  std::printf("decode     %.2f tokens/s (%.3f s)\n",
              decode_s > 0 ? sequences * (o.gen_len - 1) / decode_s : 0.0, decode_s);
  std::printf("total      %.2f tokens/s (%.3f s for %.0f generated tokens)\n",
              sequences * o.gen_len / m.wall_s, m.wall_s, sequences * o.gen_len);
  std::printf("%s", m.ToString().c_str());
  if (hardware->has_value() && m.link_busy_s[static_cast<int>(Link::kCpuToGpu)] > 0) {
    const int h2d = static_cast<int>(Link::kCpuToGpu);
    const double gbps = m.link_bytes[h2d] / m.link_busy_s[h2d] / 1e9;
    std::printf("h2d        %.2f GB/s while streaming = %.3f of the profile's pinned %.2f GB/s\n",
                gbps, gbps / (*hardware)->h2d_gbps, (*hardware)->h2d_gbps);
  }
  if (backends->kind == DeviceKind::kCuda) {
    // Nothing on the device is freed during a run, so what is in use at its end is its peak.
    const int64_t used = backends->device_free_bytes - GpuFreeBytes();
    const int64_t planned = m.planned_bytes.gpu_bytes;
    std::printf("device mem %s in use at the end (cudaMemGetInfo less the free at start-up); "
                "plan %s: %s\n",
                FormatBytes(used).c_str(), planned < 0 ? "n/a" : FormatBytes(planned).c_str(),
                planned < 0 ? "not checked" : used <= planned ? "within" : "OVER");
  }
  std::printf("%s", LaneReportText(BuildLaneReport(m, *plan, spec, *hardware)).c_str());
  if (!o.policy.trace.empty()) {
    if (Status s = generator.WriteTrace(o.policy.trace); !s.ok()) return Fail(s);
    LogInfo("trace written to " + o.policy.trace);
  }
  return kExitOk;
}

}  // namespace strata
