#include "src/cli/job_loop.h"

#include <algorithm>
#include <chrono>

#include "src/job/stable_hash.h"

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
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
  g.sampling.seed = s.seed ? *s.seed : Fnv1a64(t.request.custom_id);
  g.stop = s.stop;
  g.ignore_eos = s.ignore_eos;
  return g;
}

bool Cancelled(const std::vector<GenerationResult>& results) {
  for (const GenerationResult& r : results) {
    if (r.reason == StopReason::kCancelled) return true;
  }
  return false;
}

// Appends the block's lines, in the block's order, and counts them into *m, *p and *out.
void AppendBlock(const Block& block, const std::vector<GenerationResult>& results,
                 const std::string& model, OutputWriter& writer, JobMetrics* m,
                 ProgressCounts* p, JobLoopOutcome* out) {
  std::vector<int> prompt_lens, generated;
  size_t next = 0;
  for (const BlockEntry& e : block.entries) {
    ++p->done;
    if (const auto* err = std::get_if<RequestError>(&e)) {
      writer.Append(FormatErrorLine(*err));
      ++m->failed;
      ++m->error_codes[err->code];
      ++p->failed;
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
    c.format = t.request.format;
    writer.Append(FormatCompletionLine(c, model));
    if (c.format != RequestFormat::kOpenAiChat) {
      ++out->raw_prompt_completions;
      if (c.finish_reason == FinishReason::kStop && c.completion_tokens <= 1) {
        ++out->raw_prompt_early_stops;
      }
    }
    ++m->completed;
    ++m->finish_reasons[FinishReasonName(c.finish_reason)];
    m->prompt_tokens += c.prompt_tokens;
    m->generated_tokens += c.completion_tokens;
    p->prompt_tokens += c.prompt_tokens;
    p->generated_tokens += c.completion_tokens;
    prompt_lens.push_back(c.prompt_tokens);
    generated.push_back(c.completion_tokens);
  }
  m->padding.AddBlock(prompt_lens, generated);
}

}  // namespace

JobLoopOutcome RunJobLoop(const JobLoop& loop, JobMetrics* metrics) {
  JobLoopOutcome out;
  ProgressCounts counts;
  counts.already_done = loop.already_done;
  counts.expected = std::max(loop.expected_lines, loop.already_done);
  loop.progress->Update(counts);
  Block block;
  std::vector<GenerationRequest> batch;
  while (true) {
    if (loop.stop->load()) {
      out.interrupted = true;
      break;
    }
    Result<bool> more = loop.reader->Next(&block);
    if (!more.ok()) {
      out.status = more.status().WithContext("input");
      break;
    }
    if (!*more) break;
    batch.clear();
    for (const BlockEntry& e : block.entries) {
      if (const auto* t = std::get_if<TokenizedRequest>(&e)) batch.push_back(ToGeneration(*t));
    }
    Result<std::vector<GenerationResult>> generated =
        batch.empty() ? std::vector<GenerationResult>{} : loop.generate(batch);
    if (!generated.ok()) {
      out.status = generated.status();
      break;
    }
    const std::vector<GenerationResult>& results = *generated;
    if (Cancelled(results)) {
      out.interrupted = true;
      break;
    }
    const auto write_start = Clock::now();
    AppendBlock(block, results, loop.model_name, *loop.writer, metrics, &counts, &out);
    if (Status s = loop.writer->Flush(); !s.ok()) {
      out.status = s.WithContext("writing " + loop.writer->path());
      break;
    }
    metrics->journal_write_s += Seconds(write_start);
    ++metrics->blocks;
    const BlockReaderStats& stats = loop.reader->stats();
    counts.expected_exact = stats.input_done;
    counts.expected = stats.input_done
                          ? loop.already_done + stats.requests + stats.errors
                          : std::max(loop.expected_lines, loop.already_done + counts.done);
    loop.progress->Update(counts);
  }
  const BlockReaderStats& stats = loop.reader->stats();
  metrics->already_done = stats.already_done;
  metrics->other_shard = stats.other_shard;
  metrics->not_run = stats.requests + stats.errors - counts.done;
  return out;
}

}  // namespace strata
