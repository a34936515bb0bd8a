#include "src/cli/run_command.h"

#include <chrono>

#include "kernels/cpu/threads.h"
#include "src/backend/backend.h"
#include "src/cli/exit_codes.h"
#include "src/cli/model_path.h"
#include "src/core/log.h"
#include "src/job/block_reader.h"
#include "src/job/output_writer.h"
#include "src/model/model.h"
#include "src/runtime/generator.h"
#include "src/runtime/model_tokenizer.h"

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

int Fail(const Status& s) {
  Log(LogLevel::kError, s.message());
  return kExitUnusable;
}

// FNV-1a: a stable hash of a request's id, the same on every platform and build.
uint64_t StableHash(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

GenerationRequest ToGeneration(const TokenizedRequest& t) {
  const SamplingParams& s = t.request.sampling;
  GenerationRequest g;
  g.prompt = t.prompt_ids;
  g.max_new_tokens = s.max_tokens;
  g.sampling.temperature = s.temperature;
  g.sampling.top_p = s.top_p;
  g.sampling.top_k = s.top_k;
  // Unseeded requests still get a fixed seed derived from their id, so a rerun of a job
  // reproduces its text.
  g.sampling.seed = s.seed ? *s.seed : StableHash(t.request.custom_id);
  g.stop = s.stop;
  g.ignore_eos = s.ignore_eos;
  return g;
}

struct JobTotals {
  uint64_t completed = 0;
  uint64_t prompt_tokens = 0;
  uint64_t generated_tokens = 0;
};

// Runs one block and appends its lines, in input order, to the writer.
void RunBlock(const Block& block, Generator& generator, OutputWriter& writer, JobTotals& totals) {
  std::vector<GenerationRequest> batch;
  for (const BlockEntry& e : block.entries) {
    if (const auto* t = std::get_if<TokenizedRequest>(&e)) batch.push_back(ToGeneration(*t));
  }
  const std::vector<GenerationResult> results = generator.Generate(batch);
  size_t next = 0;
  for (const BlockEntry& e : block.entries) {
    if (const auto* err = std::get_if<RequestError>(&e)) {
      writer.Append(FormatErrorLine(*err));
      continue;
    }
    const auto& t = std::get<TokenizedRequest>(e);
    const GenerationResult& r = results[next++];
    Completion c;
    c.custom_id = t.request.custom_id;
    c.text = r.text;
    c.prompt_tokens = static_cast<int>(t.prompt_ids.size());
    c.completion_tokens = static_cast<int>(r.tokens.size());
    c.finish_reason = r.reason == StopReason::kLength ? FinishReason::kLength : FinishReason::kStop;
    writer.Append(FormatCompletionLine(c));
    ++totals.completed;
    totals.prompt_tokens += c.prompt_tokens;
    totals.generated_tokens += c.completion_tokens;
  }
}

}  // namespace

int RunCommand(const RunOptions& o) {
  if (o.batch_size < 1) return Fail(Status::InvalidArgument("--batch-size must be at least 1"));
  kernels::cpu::SetCpuThreads(o.threads);
  const auto start = Clock::now();

  Result<std::string> model_path = ResolveModelPath(o.model);
  if (!model_path.ok()) return Fail(model_path.status());
  Result<std::unique_ptr<Model>> model = LoadModel(*model_path);
  if (!model.ok()) return Fail(model.status());
  Result<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizerForModel(**model);
  if (!tokenizer.ok()) return Fail(tokenizer.status());
  const ModelConfig& config = (*model)->config();
  LogInfo("model " + *model_path + ": " + config.Summary());

  Result<OutputJournal> journal = RecoverOutputJournal(o.output);
  if (!journal.ok()) return Fail(journal.status().WithContext("output " + o.output));
  if (journal->lines > 0) {
    LogInfo("resuming: " + o.output + " already holds " + std::to_string(journal->lines) +
            " lines; those requests are skipped");
  }
  if (journal->dropped_bytes > 0) {
    LogWarn("cut a torn last line (" + std::to_string(journal->dropped_bytes) +
            " bytes) off " + o.output + "; its request runs again");
  }
  BlockReaderOptions ro;
  ro.block_size = o.batch_size;
  ro.context_length = config.max_position_embeddings;
  ro.add_bos = (*tokenizer)->add_bos_by_default();
  Result<std::unique_ptr<BlockReader>> reader =
      BlockReader::Open(o.input, **tokenizer, ro, std::move(*journal));
  if (!reader.ok()) return Fail(reader.status().WithContext("input"));
  Result<std::unique_ptr<OutputWriter>> writer = OutputWriter::Open(o.output);
  if (!writer.ok()) return Fail(writer.status().WithContext("output"));

  auto backend = MakeCpuBackend();
  Transformer transformer(**model, *backend);
  Generator generator(transformer, **tokenizer, EndOfGenerationIds(**tokenizer, config));
  LogInfo("loaded in " + std::to_string(Seconds(start)).substr(0, 5) + " s; " +
          std::to_string(kernels::cpu::CpuThreads()) + " CPU threads, blocks of " +
          std::to_string(o.batch_size));

  JobTotals totals;
  const auto gen_start = Clock::now();
  Block block;
  Status input_error;
  for (int index = 1;; ++index) {
    Result<bool> more = (*reader)->Next(&block);
    if (!more.ok()) {
      input_error = more.status();
      break;
    }
    if (!*more) break;
    RunBlock(block, generator, **writer, totals);
    if (Status s = (*writer)->Flush(); !s.ok()) return Fail(s.WithContext("writing " + o.output));
    const double secs = Seconds(gen_start);
    LogInfo("block " + std::to_string(index) + ": " + std::to_string(totals.completed) +
            " requests done, " + std::to_string(static_cast<int>(totals.generated_tokens / secs)) +
            " generated tokens/s");
  }
  const BlockReaderStats& stats = (*reader)->stats();
  const double secs = Seconds(gen_start);
  LogInfo("finished: " + std::to_string(totals.completed) + " completed, " +
          std::to_string(stats.errors) + " errors, " + std::to_string(stats.already_done) +
          " already done; " + std::to_string(totals.prompt_tokens) + " prompt + " +
          std::to_string(totals.generated_tokens) + " generated tokens in " +
          std::to_string(secs).substr(0, 6) + " s (" +
          std::to_string(static_cast<int>(totals.generated_tokens / std::max(secs, 1e-9))) +
          " generated tokens/s); output in " + o.output);
  if (!input_error.ok()) return Fail(input_error.WithContext("input " + o.input));
  return stats.errors > 0 ? kExitSomeFailed : kExitOk;
}

}  // namespace strata
