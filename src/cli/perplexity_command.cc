#include "src/cli/perplexity_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "policy/plan.h"
#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/cli/device_flags.h"
#include "src/cli/exit_codes.h"
#include "src/cli/model_path.h"
#include "src/cli/policy_flags.h"
#include "src/core/log.h"
#include "src/model/model.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"

namespace strata {
namespace {

int Fail(const Status& s) {
  Log(LogLevel::kError, s.message());
  return kExitUnusable;
}

}  // namespace

CLI::App* AddPerplexityCommand(CLI::App& app, PerplexityOptions* o) {
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity of a model on a text file");
  cmd->add_option("--model,-m", o->model,
                  "Hugging Face model directory or GGUF file (default: the model fetched by "
                  "scripts/setup.sh)");
  cmd->add_option("--input,-i", o->input, "UTF-8 text file")->required();
  cmd->add_option("--window", o->window, "Tokens per window (at most the model's context)")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prompt", o->prompt,
                  "Tokens at the start of each window fed as one prefill step: context only, "
                  "not scored")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--batch-size", o->batch_size, "Windows scored together")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--compress-cache", o->compress_cache, "4-bit KV cache");
  AddCacheFormatFlags(cmd, &o->cache);
  cmd->add_flag("--compress-weight", o->compress_weight, "4-bit weights");
  AddDeviceFlag(cmd, &o->device);
  AddActivationsFlag(cmd, &o->activations);
  AddGpuMemoryFlag(cmd, &o->gpu_memory_bytes);
  return cmd;
}

int PerplexityCommand(const PerplexityOptions& o) {
  SetCpuThreads(o.threads);
  // The cache format a run with these flags has: the plan's defaults, then the flags.
  Plan format;
  format.compress_cache = o.compress_cache;
  if (Status s = ApplyCacheFormatFlags(o.cache, &format); !s.ok()) return Fail(s);
  if (Status s = format.Validate(); !s.ok()) return Fail(s);
  const int sink = format.compress_cache ? format.cache_sink : 0;
  const int recent = format.compress_cache ? format.cache_window : 0;
  if (sink + recent > o.window) {
    return Fail(Status::InvalidArgument(
        "--cache-sink " + std::to_string(sink) + " + --cache-window " + std::to_string(recent) +
        " exceed --window " + std::to_string(o.window) +
        ", so every token would be kept exact: give a longer --window, fewer exact tokens or no "
        "--compress-cache"));
  }
  if (o.window < o.prompt + 1) {
    return Fail(Status::InvalidArgument("--window " + std::to_string(o.window) +
                                        " leaves nothing to score after --prompt " +
                                        std::to_string(o.prompt) +
                                        "; give a window of at least prompt + 1 tokens"));
  }
  Result<Backends> backends = MakeBackends(o.device, o.gpu_memory_bytes, o.activations);
  if (!backends.ok()) return Fail(backends.status());
  LogInfo("device " + backends->description);
  std::ifstream file(o.input, std::ios::binary);
  if (!file) return Fail(Status::NotFound("cannot open --input " + o.input));
  std::stringstream text;
  text << file.rdbuf();

  Result<std::string> model_path = ResolveModelPath(o.model);
  if (!model_path.ok()) return Fail(model_path.status());
  Result<std::unique_ptr<Model>> model = LoadModel(*model_path);
  if (!model.ok()) return Fail(model.status());
  Result<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizerForModel(**model);
  if (!tokenizer.ok()) return Fail(tokenizer.status());
  const ModelConfig& config = (*model)->config();
  if (o.window > config.max_position_embeddings) {
    return Fail(Status::InvalidArgument("--window " + std::to_string(o.window) +
                                        " exceeds the model's context of " +
                                        std::to_string(config.max_position_embeddings)));
  }
  const Tokenizer& tok = **tokenizer;
  const std::vector<int32_t> ids = tok.Encode(text.str(), /*add_bos=*/false);
  const bool bos = tok.add_bos_by_default() && tok.bos_id() >= 0;
  const size_t per_window = static_cast<size_t>(o.window - (bos ? 1 : 0));
  std::vector<std::vector<int32_t>> windows;
  for (size_t i = 0; i < ids.size(); i += per_window) {
    std::vector<int32_t> w;
    if (bos) w.push_back(tok.bos_id());
    w.insert(w.end(), ids.begin() + i, ids.begin() + std::min(ids.size(), i + per_window));
    if (w.size() > static_cast<size_t>(o.prompt)) windows.push_back(std::move(w));
  }
  if (windows.empty()) {
    return Fail(Status::InvalidArgument("--input has fewer than --prompt + 1 = " +
                                        std::to_string(o.prompt + 1) + " tokens"));
  }

  // One engine for every command: everything in device memory, windows of one length
  // batch_size at a time, the shorter last one in a block of its own (no padding).
  Plan plan = format;
  plan.gpu_batch_size = std::min(o.batch_size, static_cast<int>(windows.size()));
  // A 4-bit store's weights are 4-bit already: the engine expands them a layer at a time.
  plan.compress_weight = o.compress_weight || (*model)->has_q4_weights();
  OffloadOptions options;
  options.plan = plan;
  options.tiers.device_capacity_bytes = static_cast<uint64_t>(o.gpu_memory_bytes);
  OffloadGenerator engine(**model, *backends->device, *backends->cpu, tok, {}, options);
  LogInfo("model " + *model_path + ": " + config.Summary() + "; " + std::to_string(ids.size()) +
          " tokens in " + std::to_string(windows.size()) + " windows of up to " +
          std::to_string(o.window) + " tokens, " + std::to_string(plan.gpu_batch_size) +
          " at a time, on " + backends->description);
  std::vector<GenerationRequest> requests;
  for (const std::vector<int32_t>& w : windows) {
    GenerationRequest r;
    r.prompt.assign(w.begin(), w.begin() + o.prompt);
    r.forced.assign(w.begin() + o.prompt, w.end());
    requests.push_back(std::move(r));
  }
  double nll = 0;
  size_t scored = 0;
  for (size_t first = 0; first < requests.size();) {
    size_t end = first + 1;
    while (end < requests.size() && end - first < static_cast<size_t>(plan.gpu_batch_size) &&
           requests[end].forced.size() == requests[first].forced.size()) {
      ++end;
    }
    Result<std::vector<GenerationResult>> results = engine.TryGenerate(
        std::vector<GenerationRequest>(requests.begin() + static_cast<long>(first),
                                       requests.begin() + static_cast<long>(end)));
    if (!results.ok()) return Fail(results.status());
    for (const GenerationResult& r : *results) {
      for (const double logprob : r.logprobs) nll -= logprob;
      scored += r.logprobs.size();
    }
    LogInfo("scored " + std::to_string(end) + " of " + std::to_string(requests.size()) +
            " windows");
    first = end;
  }
  std::printf("perplexity %.4f over %zu tokens\n", std::exp(nll / static_cast<double>(scored)),
              scored);
  return kExitOk;
}

}  // namespace strata
