#include "src/cli/perplexity_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <span>
#include <sstream>

#include "policy/plan.h"
#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/cli/exit_codes.h"
#include "src/cli/model_path.h"
#include "src/cli/policy_flags.h"
#include "src/core/log.h"
#include "src/model/model.h"
#include "src/runtime/kv_cache.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/q4_weights.h"
#include "src/runtime/transformer.h"

namespace strata {
namespace {

int Fail(const Status& s) {
  Log(LogLevel::kError, s.message());
  return kExitUnusable;
}

// Sum of -log p(token) over every token after the first `prompt` of each of `windows`, run as
// one block: one prefill step over their first `prompt` tokens, whose last row predicts the first
// scored token, then one step per token. *scored counts the scored tokens, windows.size() x
// (length - prompt). REQUIRES: windows non-empty, all of one length > prompt (no padding: a
// window's score does not depend on the others').
double WindowsNll(Transformer& transformer, std::span<const std::vector<int32_t>> windows,
                  const KvCacheOptions& cache_options, int prompt, size_t* scored) {
  const ModelConfig& c = transformer.config();
  const int batch = static_cast<int>(windows.size());
  const int len = static_cast<int>(windows[0].size());
  KvCache cache(c.num_layers, batch, c.num_kv_heads, len, c.head_dim, cache_options);
  StepInput in;
  in.batch = batch;
  in.start.assign(static_cast<size_t>(batch), 0);
  const size_t hidden_size = static_cast<size_t>(c.hidden_size);
  std::vector<float> hidden(static_cast<size_t>(batch) * prompt * hidden_size);
  std::vector<float> last(static_cast<size_t>(batch) * hidden_size);
  std::vector<float> logits(static_cast<size_t>(batch) * c.vocab_size);
  double nll = 0;
  *scored = 0;
  for (int fed = 0; fed + 1 < len;) {
    in.new_tokens = fed == 0 ? prompt : 1;
    in.cache_len = fed + in.new_tokens;
    in.tokens.clear();
    in.positions.clear();
    for (int b = 0; b < batch; ++b) {
      for (int pos = fed; pos < in.cache_len; ++pos) {
        in.tokens.push_back(windows[static_cast<size_t>(b)][static_cast<size_t>(pos)]);
        in.positions.push_back(pos);
      }
    }
    transformer.Embed(in, hidden.data());
    for (int layer = 0; layer < c.num_layers; ++layer) {
      transformer.AttentionLayer(layer, in, cache, hidden.data());
      transformer.MlpLayer(layer, batch * in.new_tokens, hidden.data());
    }
    fed = in.cache_len;
    for (int b = 0; b < batch; ++b) {  // each window's newest row predicts its token `fed`
      const size_t row = static_cast<size_t>(b) * in.new_tokens + in.new_tokens - 1;
      std::copy_n(hidden.data() + row * hidden_size, hidden_size,
                  last.data() + static_cast<size_t>(b) * hidden_size);
    }
    transformer.Logits(last.data(), batch, logits.data());
    for (int b = 0; b < batch; ++b) {
      const float* l = logits.data() + static_cast<size_t>(b) * c.vocab_size;
      const float max = *std::max_element(l, l + c.vocab_size);
      double sum = 0;
      for (int i = 0; i < c.vocab_size; ++i) sum += std::exp(static_cast<double>(l[i] - max));
      const int32_t next = windows[static_cast<size_t>(b)][static_cast<size_t>(fed)];
      nll += max + std::log(sum) - l[next];
      ++*scored;
    }
    if (fed % 128 == 0) {
      LogInfo("step " + std::to_string(fed) + " of " + std::to_string(len - 1));
    }
  }
  return nll;
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
  cmd->add_flag("--compress-cache", o->compress_cache, "4-bit KV cache");
  AddCacheFormatFlags(cmd, &o->cache);
  cmd->add_flag("--compress-weight", o->compress_weight, "4-bit weights");
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
  KvCacheOptions cache_options;
  cache_options.compress = format.compress_cache;
  cache_options.rotate_keys = format.rotate_keys();
  cache_options.smooth_keys = format.smooth_keys();
  cache_options.channel_keys = format.channel_keys();
  cache_options.exact_sink = sink;
  cache_options.exact_window = recent;
  if (Status s = KvCache::Supports(cache_options, config.head_dim); !s.ok()) return Fail(s);

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

  // The arithmetic a run with --compress-weight does: quantize once, expand to fp32.
  std::unique_ptr<Q4Weights> q4_weights;
  // A 4-bit store's weights are 4-bit already; the backend expands them a matrix at a time.
  if (o.compress_weight && !(*model)->has_q4_weights()) {
    q4_weights = std::make_unique<Q4Weights>(**model);
  }
  auto backend = MakeCpuBackend();
  Transformer transformer(**model, *backend, q4_weights ? &q4_weights->RoundTripped() : nullptr);
  LogInfo("model " + *model_path + ": " + config.Summary() + "; " + std::to_string(ids.size()) +
          " tokens in " + std::to_string(windows.size()) + " windows of up to " +
          std::to_string(o.window) + " tokens");
  // Windows of one length run as one block; a shorter last window runs alone after them.
  double nll = 0;
  size_t scored = 0;
  for (size_t first = 0; first < windows.size();) {
    size_t end = first + 1;
    while (end < windows.size() && windows[end].size() == windows[first].size()) ++end;
    size_t block_scored = 0;
    nll += WindowsNll(transformer, std::span(windows).subspan(first, end - first), cache_options,
                      o.prompt, &block_scored);
    scored += block_scored;
    first = end;
  }
  std::printf("perplexity %.4f over %zu tokens\n", std::exp(nll / static_cast<double>(scored)),
              scored);
  return kExitOk;
}

}  // namespace strata
