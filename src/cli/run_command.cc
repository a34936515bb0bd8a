#include "src/cli/run_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/cli/device_flags.h"
#include "src/cli/exit_codes.h"
#include "src/cli/interrupt.h"
#include "src/cli/job_loop.h"
#include "src/cli/lane_report.h"
#include "src/cli/model_path.h"
#include "src/cli/policy_flags.h"
#include "src/core/log.h"
#include "src/job/block_reader.h"
#include "src/job/chat_template.h"
#include "src/job/jsonl_reader.h"
#include "src/job/output_writer.h"
#include "src/memory/model_spec_of.h"
#include "src/model/model.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"
#include "src/schedule/schedule_dump.h"

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

int Fail(const Status& s) {
  Log(LogLevel::kError, s.message());
  return kExitUnusable;
}

// The name OpenAI result bodies give the model: the file's stem, or the directory's name.
std::string ModelName(const std::string& path) {
  const std::filesystem::path p = std::filesystem::path(path).lexically_normal();
  const std::filesystem::path name = p.has_filename() ? p : p.parent_path();
  return std::filesystem::is_directory(name) ? name.filename().string() : name.stem().string();
}

// Result lines the job's output is expected to hold at its end, for the progress line until the
// input is read to its end: the input's lines, or this shard's share of them.
uint64_t ExpectedLines(const std::string& input, const ShardSpec& shard) {
  Result<uint64_t> lines = CountJsonlLines(input);
  if (!lines.ok()) return 0;
  return (*lines + shard.count - 1) / shard.count;
}

void LogSummary(const JobMetrics& m, const std::string& output) {
  const double secs = std::max(m.generation_s, 1e-9);
  LogInfo(std::string(m.interrupted ? "interrupted" : "finished") + ": " +
          std::to_string(m.completed) + " completed, " + std::to_string(m.failed) +
          " errors, " + std::to_string(m.already_done) + " already done" +
          (m.other_shard ? ", " + std::to_string(m.other_shard) + " in other shards" : "") +
          (m.interrupted ? ", " + std::to_string(m.not_run) + " to rerun" : "") + "; " +
          std::to_string(m.prompt_tokens) + " prompt + " + std::to_string(m.generated_tokens) +
          " generated tokens in " + Fixed(m.generation_s, 2) + " s (" +
          Fixed(m.generated_tokens / secs, 1) + " generated tokens/s, prompt padding " +
          Fixed(100 * m.padding.prompt_waste(), 1) + "%; placing the model took " +
          Fixed(m.placement_s, 2) + " s more); output in " + output);
}

// An instruct model given raw text (not the chat turns its template writes) often answers with
// end-of-text at once. When at least half of a job's raw-prompt completions did, says why and what
// to send instead.
void HintAtChatLines(const JobLoopOutcome& outcome, const ChatTemplate& chat_template) {
  const ChatTemplate::Family family = chat_template.family();
  if (family == ChatTemplate::Family::kNone || family == ChatTemplate::Family::kUnknown) return;
  if (outcome.raw_prompt_early_stops == 0 ||
      2 * outcome.raw_prompt_early_stops < outcome.raw_prompt_completions) {
    return;
  }
  LogWarn(std::to_string(outcome.raw_prompt_early_stops) + " of " +
          std::to_string(outcome.raw_prompt_completions) +
          " raw-prompt requests (\"prompt\" text, not chat \"messages\") stopped with "
          "end-of-text after at most one token: this model has a " + chat_template.name() +
          " chat template and answers chat turns, not raw text. Send chat lines instead "
          "(README.md, \"OpenAI batch format\"): {\"custom_id\": \"q1\", \"method\": \"POST\", "
          "\"url\": \"/v1/chat/completions\", \"body\": {\"messages\": [{\"role\": \"user\", "
          "\"content\": \"...\"}], \"max_tokens\": 64}}");
}

// What --policy auto plans a run for, before its prompts are read: prompts of 512 tokens that
// generate 256, each capped to half the model's context.
Workload SearchWorkload(const ModelConfig& config) {
  const int half = std::max(1, config.max_position_embeddings / 2);
  return {std::min(512, half), std::min(256, half), 0};
}

}  // namespace

int RunCommand(const RunOptions& o) {
  const std::atomic<bool>& stop = InstallInterruptHandlers();
  const auto start = Clock::now();
  if (o.batch_size < 1) return Fail(Status::InvalidArgument("--batch-size must be at least 1"));
  if (o.sort_window < 0) return Fail(Status::InvalidArgument("--sort-window must be >= 0"));
  if (!(o.progress_interval_s > 0)) {
    return Fail(Status::InvalidArgument("--progress-interval must be positive"));
  }
  ShardSpec shard;
  if (!o.shard.empty()) {
    Result<ShardSpec> parsed = ParseShardSpec(o.shard);
    if (!parsed.ok()) return Fail(parsed.status());
    shard = *parsed;
  }
  SetCpuThreads(o.threads);

  // What a user can get wrong is checked before the model loads (seconds to minutes) and before
  // anything is written: the model path, the input, the output, the device, the hardware
  // profile, a plan by hand and its offload directory.
  Result<std::string> model_path = ResolveModelPath(o.model);
  if (!model_path.ok()) return Fail(model_path.status());
  if (Result<std::unique_ptr<JsonlReader>> in = JsonlReader::Open(o.input); !in.ok()) {
    return Fail(in.status().WithContext("input"));
  }
  if (Status s = CheckOutputPath(o.output); !s.ok()) return Fail(s);
  if (std::error_code ec; std::filesystem::equivalent(o.input, o.output, ec)) {
    return Fail(Status::InvalidArgument("--output " + o.output + " is the input file; give the "
                                        "results a file of their own"));
  }
  Result<Backends> backends = MakeBackends(o.device, o.policy.gpu_memory_bytes, o.activations);
  if (!backends.ok()) return Fail(backends.status());
  std::string hardware_origin;
  Result<std::optional<HardwareSpec>> hardware = HardwareFromFlags(o.policy, &hardware_origin);
  if (!hardware.ok()) return Fail(hardware.status());
  FitProfileToDevice(*backends, hardware_origin, *hardware);
  if (o.policy.explicit_plan()) {
    Result<Plan> given = PlanFromFlags(o.policy);
    if (!given.ok()) return Fail(given.status());
    if (Status s = PrepareOffloadDir(o.policy, *given); !s.ok()) return Fail(s);
  }

  JobMetrics m;
  m.input = o.input;
  m.output = o.output;
  m.shard = shard.ToString();
  m.block_size = o.batch_size;
  m.sort_window = o.sort_window;
  const auto recover_start = Clock::now();
  Result<OutputJournal> journal = RecoverOutputJournal(o.output);
  m.journal_recover_s = Seconds(recover_start);
  if (!journal.ok()) return Fail(journal.status().WithContext("output " + o.output));
  if (journal->lines > 0) {
    LogInfo("resuming: " + o.output + " already holds " + std::to_string(journal->lines) +
            " lines; those requests are skipped");
  }
  if (journal->dropped_bytes > 0) {
    LogWarn("cut a torn last line (" + std::to_string(journal->dropped_bytes) +
            " bytes) off " + o.output + "; its request runs again");
  }
  const uint64_t already_done = journal->lines;
  const uint64_t expected = ExpectedLines(o.input, shard);

  Result<std::unique_ptr<Model>> model = LoadModel(*model_path);
  if (!model.ok()) return Fail(model.status());
  Result<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizerForModel(**model);
  if (!tokenizer.ok()) return Fail(tokenizer.status());
  const ModelConfig& config = (*model)->config();
  const auto token_text = [&](int32_t id) {
    return id >= 0 && id < (*tokenizer)->vocab_size() ? (*tokenizer)->TokenBytes(id) : "";
  };
  const ChatTemplate chat_template =
      ChatTemplate::FromJinja((*model)->chat_template(), token_text((*tokenizer)->bos_id()),
                              token_text((*tokenizer)->eos_id()));
  LogInfo("model " + *model_path + ": " + config.Summary() + "; chat template " +
          chat_template.name());
  m.model = *model_path;

  BlockReaderOptions ro;
  ro.block_size = o.batch_size;
  ro.sort_window = o.sort_window;
  ro.context_length = config.max_position_embeddings;
  ro.add_bos = (*tokenizer)->add_bos_by_default();
  ro.shard = shard;
  ro.chat_template = chat_template;
  Result<std::unique_ptr<BlockReader>> reader =
      BlockReader::Open(o.input, **tokenizer, ro, std::move(*journal));
  if (!reader.ok()) return Fail(reader.status().WithContext("input"));

  std::optional<ModelSpec> spec;
  if (Result<ModelSpec> s = ModelSpecOf(**model, ActivationBytesOn(*backends->device, **model));
      s.ok()) {
    spec = std::move(s).value();
  }
  const Workload workload = SearchWorkload(config);
  Result<ChosenPlan> chosen = ChoosePlan(o.policy, spec, workload, *hardware, o.batch_size,
                                         DeviceScratchOf(*backends->device, **model, workload));
  if (!chosen.ok()) return Fail(chosen.status());
  if (!chosen->searched && !o.policy.explicit_plan()) {
    // Nothing to place by: each block of --batch-size runs as one micro-batch on the device.
    chosen->plan.gpu_batch_size = o.batch_size;
    chosen->how += ", each block one micro-batch";
  }
  const Plan& plan = chosen->plan;
  LogInfo("device " + backends->description + "; hardware profile: " + hardware_origin);
  if (chosen->searched) {  // a plan by hand had its offload directory checked above
    if (Status s = PrepareOffloadDir(o.policy, plan); !s.ok()) return Fail(s);
  }
  OffloadGenerator engine(**model, *backends->device, *backends->cpu, **tokenizer,
                          EndOfGenerationIds(**tokenizer, config),
                          OffloadOptionsFromFlags(o.policy, *chosen));
  engine.set_cancel(&stop);
  LogInfo("plan " + chosen->how + ": " + PlanToFlexGenFlags(plan));
  if (!o.policy.dump_schedule.empty()) {
    Result<BlockSchedule> schedule =
        engine.ScheduleFor(static_cast<int>(plan.block_size()), 64, 16);
    if (!schedule.ok()) return Fail(schedule.status());
    Status s = WriteTextFile(o.policy.dump_schedule, DumpSchedule(*schedule));
    return s.ok() ? kExitOk : Fail(s);
  }
  Result<std::unique_ptr<OutputWriter>> writer = OutputWriter::Open(o.output);
  if (!writer.ok()) return Fail(writer.status().WithContext("output"));
  m.load_s = Seconds(start);
  LogInfo("loaded in " + Fixed(m.load_s, 2) + " s; " +
          std::to_string(CpuThreads()) + " CPU threads, blocks of " +
          std::to_string(o.batch_size) + ", sort window " + std::to_string(o.sort_window) +
          (shard.count > 1 ? ", shard " + shard.ToString() : ""));

  JobLoop loop;
  loop.reader = reader->get();
  loop.writer = writer->get();
  loop.generate = [&](const std::vector<GenerationRequest>& b) { return engine.TryGenerate(b); };
  loop.stop = &stop;
  loop.model_name = ModelName(*model_path);
  loop.already_done = already_done;
  loop.expected_lines = expected;
  const auto gen_start = Clock::now();
  JobLoopOutcome outcome;
  {
    ProgressReporter progress(::isatty(STDERR_FILENO) ? ProgressStyle::kBar : ProgressStyle::kLog,
                              o.progress_interval_s);
    loop.progress = &progress;
    outcome = RunJobLoop(loop, &m);
  }
  m.placement_s = engine.placement_s();
  m.generation_s = Seconds(gen_start) - m.placement_s;
  m.elapsed_s = Seconds(start);
  m.interrupted = outcome.interrupted;
  m.interrupt_signal = InterruptSignalName();
  m.peak_rss_bytes = PeakRssBytes();
  m.exit_code = !outcome.status.ok() ? kExitUnusable
                : outcome.interrupted ? kExitInterrupted
                : m.failed > 0        ? kExitSomeFailed
                                      : kExitOk;
  LogSummary(m, o.output);
  HintAtChatLines(outcome, chat_template);
  if (!outcome.status.ok()) Log(LogLevel::kError, outcome.status.message());
  if (outcome.interrupted) {
    LogInfo(std::string("stopped by ") +
            (m.interrupt_signal.empty() ? "a signal" : m.interrupt_signal) +
            "; every finished block is in " + o.output + ": rerun the same command to resume");
  }
  const ExecutorMetrics& x = engine.metrics();
  m.peak_bytes = {static_cast<uint64_t>(x.peak_bytes.gpu_bytes),
                  static_cast<uint64_t>(x.peak_bytes.cpu_bytes),
                  static_cast<uint64_t>(x.peak_bytes.disk_bytes)};
  auto link = [&](Link l) { return x.link_bytes[static_cast<int>(l)]; };
  m.link_bytes = {link(Link::kDiskToCpu), link(Link::kCpuToDisk), link(Link::kCpuToGpu),
                  link(Link::kGpuToCpu)};
  LogInfo(x.ToString());
  const LaneReport lanes = BuildLaneReport(x, plan, spec, *hardware);
  m.lane_profile = lanes.profile;
  m.lane_times = lanes.times;
  m.phase_times = lanes.phases;
  LogInfo(LaneReportText(lanes));
  if (!o.policy.trace.empty()) {
    if (Status s = engine.WriteTrace(o.policy.trace); !s.ok()) LogWarn(s.message());
  }
  if (!o.metrics.empty()) {
    if (Status s = WriteMetricsFile(o.metrics, m); !s.ok()) LogWarn(s.message());
  }
  return m.exit_code;
}

}  // namespace strata
