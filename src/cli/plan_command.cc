#include "src/cli/plan_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "policy/fit_check.h"
#include "policy/search.h"
#include "src/cli/device_flags.h"
#include "src/cli/exit_codes.h"
#include "src/cli/policy_flags.h"
#include "src/memory/model_spec_of.h"
#include "src/model/model.h"

namespace strata {
namespace {

struct Inputs {
  ModelSpec model;
  HardwareSpec hardware;
  Workload workload;
};

// A preset (name or YAML), or the description of a model on disk: a GGUF file, a Hugging Face
// directory or a strata store, loaded (memory-mapped; quantized GGUF tensors are left as stored:
// only their shapes are read) and described with activations of `activation_bytes`.
Result<ModelSpec> LoadModelSpec(const std::string& name, int activation_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool yaml = name.ends_with(".yaml") || name.ends_with(".yml");
  if (fs::exists(name, ec) && !yaml) {
    LoadOptions load;
    load.expand_gguf = false;
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModel(name, load));
    return ModelSpecOf(*model, activation_bytes);
  }
  if (!yaml && (name.find('/') != std::string::npos || name.ends_with(".gguf"))) {
    return Status::NotFound("model '" + name + "' does not exist; --model takes a preset name "
                            "(configs/models), a preset YAML, a GGUF file, a Hugging Face "
                            "directory or a strata store");
  }
  STRATA_ASSIGN_OR_RETURN(std::string path, ResolveConfigFile("models", name));
  return LoadModelSpecYaml(path);
}

Result<Inputs> LoadInputs(const PlanOptions& o) {
  Inputs in;
  std::string hw_path = DefaultHardwareProfilePath();
  std::error_code ec;
  if (!o.hardware.empty()) {
    STRATA_ASSIGN_OR_RETURN(hw_path, ResolveConfigFile("hardware", o.hardware));
  } else if (!std::filesystem::exists(hw_path, ec)) {
    return Status::NotFound("no --hardware and no profile of this machine at " + hw_path +
                            "; pass --hardware (a name from configs/hardware or a YAML file) or "
                            "run `strata profile` to write it");
  }
  STRATA_ASSIGN_OR_RETURN(in.hardware, LoadHardwareSpecYaml(hw_path));
  if (o.gpu_memory_bytes > 0) in.hardware.gpu_capacity_bytes = o.gpu_memory_bytes;
  // A model on disk runs as the profile's device keeps activations: fp32 on the CPU standing in
  // for a GPU, fp16 or bf16 on a GPU (Backend::ActivationType).
  STRATA_ASSIGN_OR_RETURN(in.model, LoadModelSpec(o.model, in.hardware.gpu_emulated ? 4 : 2));
  in.workload = {o.prompt_len, o.gen_len, o.num_prompts};
  STRATA_RETURN_IF_ERROR(in.workload.Validate(in.model));
  return in;
}

// The plan the user gave, if any. Errors: the cache format flags' (ApplyCacheFormatFlags), the
// plan's Validate.
Result<Plan> GivenPlan(const PlanOptions& o) {
  Plan plan;
  if (!o.percent.empty()) {
    STRATA_ASSIGN_OR_RETURN(plan,
                            PlanFromFlexGenPercent(o.percent, o.gpu_batch_size, o.num_gpu_batches));
    plan.cpu_attention = o.cpu_attention;
    plan.compress_weight = o.compress_weight;
    plan.compress_cache = o.compress_cache;
    STRATA_RETURN_IF_ERROR(ApplyCacheFormatFlags(o.cache, &plan));
    plan.overlap = !o.no_overlap;
    STRATA_RETURN_IF_ERROR(plan.Validate());
    return plan;
  }
  return LoadPlanYaml(o.policy);
}

std::string Seconds(double s) {
  char text[32];
  if (s == 0) return "-";
  if (s >= 3600)
    std::snprintf(text, sizeof(text), "%.1f h", s / 3600);
  else if (s >= 60)
    std::snprintf(text, sizeof(text), "%.1f min", s / 60);
  else if (s >= 1)
    std::snprintf(text, sizeof(text), "%.2f s", s);
  else
    std::snprintf(text, sizeof(text), "%.2f ms", s * 1e3);
  return text;
}

void PrintMemory(std::ostream& out, const PlanEvaluation& e, const HardwareSpec& hw) {
  const MemoryPlan& m = e.memory;
  char line[160];
  std::snprintf(line, sizeof(line), "  %-13s %12s %12s %12s\n", "", "GPU", "CPU", "disk");
  out << line;
  auto row = [&](const char* name, const TierBytes& t) {
    std::snprintf(line, sizeof(line), "  %-13s %12s %12s %12s\n", name,
                  FormatBytes(t.gpu_bytes).c_str(), FormatBytes(t.cpu_bytes).c_str(),
                  FormatBytes(t.disk_bytes).c_str());
    out << line;
  };
  row("weights", m.weight_bytes);
  row("KV cache", m.kv_cache_bytes);
  row("activations", m.activation_bytes);
  row("staging", m.staging_bytes);
  row("workspace", m.workspace_bytes);
  row("alignment", m.alignment_bytes);
  row("total", m.total_bytes);
  const TierBytes capacity{hw.gpu_capacity_bytes, hw.cpu_capacity_bytes, hw.disk_capacity_bytes};
  row("capacity", capacity);
  std::snprintf(line, sizeof(line), "  %-13s %11.0f%% %11.0f%% %11.0f%%\n", "used",
                100.0 * m.total_bytes.gpu_bytes / capacity.gpu_bytes,
                100.0 * m.total_bytes.cpu_bytes / capacity.cpu_bytes,
                100.0 * m.total_bytes.disk_bytes / capacity.disk_bytes);
  out << line;
}

void PrintTimes(std::ostream& out, const PlanEvaluation& e) {
  const LayerTimes& p = e.cost.prefill.layer;
  const LayerTimes& d = e.cost.decode.layer;
  char line[160];
  auto row = [&](const char* name, double a, double b) {
    std::snprintf(line, sizeof(line), "  %-16s %24s %24s\n", name, Seconds(a).c_str(),
                  Seconds(b).c_str());
    out << line;
  };
  std::snprintf(line, sizeof(line), "  %-16s %24s %24s\n", "", "prefill", "decode");
  out << line;
  row("disk -> CPU", p.disk_read_s, d.disk_read_s);
  row("CPU -> disk", p.disk_write_s, d.disk_write_s);
  row("  write waits", p.disk_write_wait_s, d.disk_write_wait_s);
  row("CPU -> GPU", p.h2d_s, d.h2d_s);
  row("GPU -> GPU", p.d2d_s, d.d2d_s);
  row("GPU -> CPU", p.d2h_s, d.d2h_s);
  row("GPU GEMM", p.gpu_gemm_s, d.gpu_gemm_s);
  row("GPU attention", p.gpu_attention_s, d.gpu_attention_s);
  row("CPU attention", p.cpu_attention_s, d.cpu_attention_s);
  row("4-bit expansion", p.gpu_dequant_s, d.gpu_dequant_s);
  if (e.plan.overlap) row("weight slots", p.slot_chain_s, d.slot_chain_s);
  row("layer step", p.step_s(e.plan.overlap), d.step_s(e.plan.overlap));
  std::snprintf(line, sizeof(line), "  %-16s %24s %24s\n", "bottleneck", p.Bottleneck().c_str(),
                d.Bottleneck().c_str());
  out << line;
  const PhaseCost& pc = e.cost.prefill;
  const PhaseCost& dc = e.cost.decode;
  row("input step", pc.input.step_s(e.plan.overlap), dc.input.step_s(e.plan.overlap));
  row("output step", pc.output.step_s(e.plan.overlap), dc.output.step_s(e.plan.overlap));
  row("token step", pc.token_step_s, dc.token_step_s);
}

void PrintReport(const Inputs& in, const PlanEvaluation& e, const SearchResult* search) {
  std::ostream& out = std::cout;
  const Workload& w = in.workload;
  out << "strata plan: " << in.model.name << " on " << in.hardware.name << ", prompt "
      << w.prompt_len << ", generate " << w.gen_len << ", "
      << (w.num_prompts ? std::to_string(w.num_prompts) + " prompts" : "open-ended job") << "\n";
  if (!in.hardware.description.empty()) out << "  hardware: " << in.hardware.description << "\n";
  out << "\nPolicy ("
      << (search ? "searched: " + std::to_string(search->lps_solved) + " LPs in " +
                       Seconds(search->elapsed_s)
                 : std::string("given"))
      << ")\n"
      << PlanToString(e.plan);
  if (e.plan.compress_weight) {
    out << "  4-bit groups " << in.model.q4_group << " weights along a row"
        << (in.model.q4_group == 32 ? " (the GGUF file's own Q4 blocks)" : "") << "\n";
  }
  out << "  as flags     " << PlanToFlexGenFlags(e.plan) << "\n";
  out << "\nMemory per tier\n";
  PrintMemory(out, e, in.hardware);
  out << "\nPredicted time per layer step (one transformer layer, all micro-batches), and of the\n"
         "input embedding's and output layer's steps and a whole token step\n";
  PrintTimes(out, e);
  const CostEstimate& c = e.cost;
  char line[256];
  std::snprintf(line, sizeof(line),
                "\nPredicted throughput: %.3f tokens/s (prefill %.1f tokens/s, decode %.3f "
                "tokens/s); %lld block(s) of %lld in %s\n",
                c.throughput_tokens_per_s, c.prefill_tokens_per_s, c.decode_tokens_per_s,
                static_cast<long long>(c.num_blocks), static_cast<long long>(e.plan.block_size()),
                Seconds(c.total_s).c_str());
  out << line;
  if (search && !search->alternatives.empty()) {
    out << "\nNext best\n";
    for (const PlanEvaluation& alt : search->alternatives) {
      std::snprintf(line, sizeof(line), "  %9.3f tokens/s  %s\n", alt.cost.throughput_tokens_per_s,
                    PlanToFlexGenFlags(alt.plan).c_str());
      out << line;
    }
  }
  if (!e.fits.ok()) out << "\nDOES NOT FIT: " << e.fits.message() << "\n";
}

nlohmann::ordered_json LayerJson(const LayerTimes& t, bool overlap) {
  return {{"disk_read_s", t.disk_read_s},
          {"disk_write_s", t.disk_write_s},
          {"disk_write_wait_s", t.disk_write_wait_s},
          {"h2d_s", t.h2d_s},
          {"d2d_s", t.d2d_s},
          {"d2h_s", t.d2h_s},
          {"gpu_gemm_s", t.gpu_gemm_s},
          {"gpu_attention_s", t.gpu_attention_s},
          {"cpu_attention_s", t.cpu_attention_s},
          {"gpu_dequant_s", t.gpu_dequant_s},
          {"slot_chain_s", t.slot_chain_s},
          {"step_s", t.step_s(overlap)},
          {"bottleneck", t.Bottleneck()}};
}

nlohmann::ordered_json PlanJson(const Plan& p) {
  return {{"gpu_batch_size", p.gpu_batch_size},
          {"num_gpu_batches", p.num_gpu_batches},
          {"weight_gpu_percent", p.weight_gpu_percent},
          {"weight_cpu_percent", p.weight_cpu_percent},
          {"cache_gpu_percent", p.cache_gpu_percent},
          {"cache_cpu_percent", p.cache_cpu_percent},
          {"activation_gpu_percent", p.activation_gpu_percent},
          {"activation_cpu_percent", p.activation_cpu_percent},
          {"cpu_attention", p.cpu_attention},
          {"compress_weight", p.compress_weight},
          {"compress_cache", p.compress_cache},
          {"cache_keys", p.compress_cache ? nlohmann::ordered_json(CacheKeysName(p.cache_keys))
                                          : nlohmann::ordered_json()},
          // 0 without the 4-bit cache, as cache_keys is null: no token is kept apart then.
          {"cache_sink", p.compress_cache ? p.cache_sink : 0},
          {"cache_window", p.compress_cache ? p.cache_window : 0},
          {"overlap", p.overlap},
          {"flexgen_flags", PlanToFlexGenFlags(p)}};
}

nlohmann::ordered_json ReportJson(const Inputs& in, const PlanEvaluation& e,
                                  const SearchResult* search) {
  using json = nlohmann::ordered_json;
  const MemoryPlan& m = e.memory;
  const HardwareSpec& hw = in.hardware;
  json memory;
  for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
    memory[TierName(t)] = {
        {"weights_bytes", m.weight_bytes.at(t)},         {"kv_cache_bytes", m.kv_cache_bytes.at(t)},
        {"activations_bytes", m.activation_bytes.at(t)}, {"staging_bytes", m.staging_bytes.at(t)},
        {"workspace_bytes", m.workspace_bytes.at(t)},    {"alignment_bytes", m.alignment_bytes.at(t)},
        {"total_bytes", m.total_bytes.at(t)}};
  }
  memory["GPU"]["capacity_bytes"] = hw.gpu_capacity_bytes;
  memory["CPU"]["capacity_bytes"] = hw.cpu_capacity_bytes;
  memory["disk"]["capacity_bytes"] = hw.disk_capacity_bytes;
  json buffers = json::array();
  for (const NamedBuffer& b : m.buffers) {
    buffers.push_back({{"name", b.name},
                       {"tier", TierName(b.tier)},
                       {"bytes", b.bytes},
                       {"count", b.count},
                       {"staging", b.staging}});
  }
  const CostEstimate& c = e.cost;
  json report = {{"model", in.model.name},
                 {"hardware", hw.name},
                 {"workload",
                  {{"prompt_len", in.workload.prompt_len},
                   {"gen_len", in.workload.gen_len},
                   {"num_prompts", in.workload.num_prompts}}},
                 {"plan", PlanJson(e.plan)},
                 {"fits", e.fits.ok()},
                 {"memory", memory},
                 {"buffers", buffers},
                 {"time",
                  {{"prefill",
                    {{"input", LayerJson(c.prefill.input, e.plan.overlap)},
                     {"layer", LayerJson(c.prefill.layer, e.plan.overlap)},
                     {"output", LayerJson(c.prefill.output, e.plan.overlap)},
                     {"token_step_s", c.prefill.token_step_s},
                     {"total_s", c.prefill.total_s}}},
                   {"decode",
                    {{"input", LayerJson(c.decode.input, e.plan.overlap)},
                     {"layer", LayerJson(c.decode.layer, e.plan.overlap)},
                     {"output", LayerJson(c.decode.output, e.plan.overlap)},
                     {"token_step_s", c.decode.token_step_s},
                     {"total_s", c.decode.total_s}}},
                   {"block_s", c.block_s},
                   {"num_blocks", c.num_blocks},
                   {"total_s", c.total_s}}},
                 {"throughput_tokens_per_s", c.throughput_tokens_per_s},
                 {"prefill_tokens_per_s", c.prefill_tokens_per_s},
                 {"decode_tokens_per_s", c.decode_tokens_per_s}};
  if (!e.fits.ok()) report["fit_error"] = e.fits.message();
  if (search) {
    report["search"] = {{"lps_solved", search->lps_solved}, {"elapsed_s", search->elapsed_s}};
    json alternatives = json::array();
    for (const PlanEvaluation& alt : search->alternatives) {
      alternatives.push_back({{"plan", PlanJson(alt.plan)},
                              {"throughput_tokens_per_s", alt.cost.throughput_tokens_per_s}});
    }
    report["alternatives"] = alternatives;
  }
  return report;
}

int Fail(const Status& status) {
  std::cerr << "strata plan: " << status.message() << "\n";
  return kExitUnusable;
}

}  // namespace

CLI::App* AddPlanCommand(CLI::App& app, PlanOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "plan", "Show the memory plan and predicted throughput of a policy (a dry run)");
  cmd->add_option("--model,-m", o->model,
                  "Model preset (configs/models), preset YAML, or a model: GGUF file, Hugging Face "
                  "directory or strata store")
      ->required();
  cmd->add_option("--hardware", o->hardware,
                  "Hardware profile (configs/hardware) or YAML (default: " +
                      DefaultHardwareProfilePath() + ", written by strata profile)");
  cmd->add_option("--prompt-len", o->prompt_len, "Tokens per prompt")->required();
  cmd->add_option("--gen-len", o->gen_len, "Tokens generated per prompt")->required();
  cmd->add_option("--num-prompts", o->num_prompts, "Prompts in the job (0: open-ended)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON instead of tables");
  CLI::Option* policy = cmd->add_option("--policy", o->policy, "auto (search) or a plan YAML file")
                            ->capture_default_str();
  CLI::Option* percent =
      cmd->add_option("--percent", o->percent,
                      "Evaluate this placement: WG WC CG CC AG AC (percent of weights, KV cache, "
                      "activations on GPU and CPU; disk gets the rest)")
          ->expected(6);
  percent->excludes(policy);
  cmd->add_option("--gpu-batch-size", o->gpu_batch_size, "With --percent")->needs(percent);
  cmd->add_option("--num-gpu-batches", o->num_gpu_batches, "With --percent")->needs(percent);
  cmd->add_flag("--cpu-attention", o->cpu_attention, "With --percent")->needs(percent);
  cmd->add_flag("--compress-weight", o->compress_weight, "With --percent")->needs(percent);
  cmd->add_flag("--compress-cache", o->compress_cache, "With --percent")->needs(percent);
  AddCacheFormatFlags(cmd, &o->cache);
  cmd->add_flag("--no-overlap", o->no_overlap, "With --percent")->needs(percent);
  cmd->add_flag("--no-compression", o->no_compression,
                "Search: never compress (a 4-bit store's weights stay 4-bit)")
      ->excludes(percent);
  cmd->add_flag("--no-cpu-attention", o->no_cpu_attention, "Search: keep attention on the GPU")
      ->excludes(percent);
  AddGpuMemoryFlag(cmd, &o->gpu_memory_bytes);
  return cmd;
}

int PlanCommand(const PlanOptions& o) {
  // The cache format flags' errors before the model loads (--compress-cache needs --percent, so
  // a search or plan file never takes them).
  Plan format;
  format.compress_cache = o.compress_cache;
  if (Status s = ApplyCacheFormatFlags(o.cache, &format); !s.ok()) return Fail(s);
  Result<Inputs> in = LoadInputs(o);
  if (!in.ok()) return Fail(in.status());
  std::optional<SearchResult> searched;
  PlanEvaluation evaluation;
  if (o.percent.empty() && o.policy == "auto") {
    SearchOptions options;
    options.allow_compress_weight = options.allow_compress_cache = !o.no_compression;
    options.allow_cpu_attention = !o.no_cpu_attention;
    Result<SearchResult> r = SearchPlan(in->model, in->workload, in->hardware, options);
    if (!r.ok()) return Fail(r.status());
    searched = std::move(r).value();
    evaluation = searched->best;
  } else {
    Result<Plan> plan = GivenPlan(o);
    if (!plan.ok()) return Fail(plan.status());
    plan->compress_weight = plan->compress_weight || in->model.q4_weights;
    Result<PlanEvaluation> e = EvaluatePlan(in->model, in->workload, *plan, in->hardware);
    if (!e.ok()) return Fail(e.status());
    evaluation = std::move(e).value();
  }
  const SearchResult* search = searched ? &*searched : nullptr;
  if (o.json) {
    std::cout << ReportJson(*in, evaluation, search).dump(2) << "\n";
  } else {
    PrintReport(*in, evaluation, search);
  }
  return evaluation.fits.ok() ? kExitOk : kExitUnusable;
}

}  // namespace strata
