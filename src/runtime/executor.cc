#include "src/runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <ranges>
#include <string>
#include <thread>

#include "src/core/check.h"
#include "src/core/thread_name.h"
#include "src/runtime/input_rows.h"

namespace strata {
namespace {

// Per-buffer checks of the replay (see executor.h): who wrote each buffer last, and who is using
// it now.
class BufferGuard {
 public:
  explicit BufferGuard(const BlockSchedule& s) : expected_(s.steps.size()) {
    std::map<BufferId, int> dense;
    std::vector<int> last;
    for (const Step& step : s.steps) {
      for (const BufferAccess& a : step.accesses) {
        const auto [it, added] = dense.emplace(a.buffer, static_cast<int>(dense.size()));
        if (added) last.push_back(-1);
        expected_[static_cast<size_t>(step.id)].push_back({it->second, last[it->second], a.write});
      }
      for (const Access& a : expected_[static_cast<size_t>(step.id)]) {
        if (a.write) last[static_cast<size_t>(a.buffer)] = step.id;
      }
    }
    last_writer_ = std::make_unique<std::atomic<int>[]>(dense.size());
    writing_ = std::make_unique<std::atomic<int>[]>(dense.size());
    reading_ = std::make_unique<std::atomic<int>[]>(dense.size());
    for (size_t i = 0; i < dense.size(); ++i) last_writer_[i] = -1;
  }

  void Begin(const Step& step) {
    for (const Access& a : expected_[static_cast<size_t>(step.id)]) {
      STRATA_CHECK_MSG(last_writer_[a.buffer].load() == a.writer, "a step ran before its input");
      STRATA_CHECK_MSG(writing_[a.buffer].load() == 0, "a buffer in use is being written");
      if (a.write) STRATA_CHECK_MSG(reading_[a.buffer].load() == 0, "a buffer in use was overwritten");
      ++(a.write ? writing_ : reading_)[a.buffer];
    }
  }
  void End(const Step& step, bool ran) {
    for (const Access& a : expected_[static_cast<size_t>(step.id)]) {
      if (ran) --(a.write ? writing_ : reading_)[a.buffer];
      if (a.write) last_writer_[a.buffer] = step.id;
    }
  }

 private:
  struct Access {
    int buffer;
    int writer;  // the step that must have written it last, -1 for none
    bool write;
  };
  std::vector<std::vector<Access>> expected_;
  std::unique_ptr<std::atomic<int>[]> last_writer_, writing_, reading_;
};

int PlacedLayerOf(const Step& step, int blocks) {
  switch (RoleOfLayer(step.layer, blocks)) {
    case LayerRole::kInputEmbedding: return 0;
    case LayerRole::kAttention:
    case LayerRole::kMlp: return 1 + BlockOfLayer(step.layer);
    case LayerRole::kOutput: return blocks + 1;
  }
  return 0;
}

std::string SpanName(const Step& step, int blocks) {
  const LayerRole role = RoleOfLayer(step.layer, blocks);
  char name[96];
  int n = std::snprintf(name, sizeof(name), "%s %s", StepKindName(step.kind), LayerRoleName(role));
  if (role == LayerRole::kAttention || role == LayerRole::kMlp) {
    n += std::snprintf(name + n, sizeof(name) - n, ".%d", BlockOfLayer(step.layer));
  }
  n += std::snprintf(name + n, sizeof(name) - n, " t%d", step.token);
  if (step.micro_batch >= 0) std::snprintf(name + n, sizeof(name) - n, " mb%d", step.micro_batch);
  return name;
}

}  // namespace

BlockExecutor::BlockExecutor(const Model& model, Backend& device_backend, Backend& cpu_backend,
                             const Placement& placement, const MemoryTiers& tiers)
    : device_(device_backend),
      p_(placement),
      position_offset_(model.config().position_offset),
      compute_(model, device_backend, cpu_backend, placement, tiers),
      transfers_(placement, tiers) {}

Status BlockExecutor::Execute(const Step& step, const BlockSchedule& schedule, BlockRun& run,
                              Stream& stream, LaneRecord& record) {
  const int blocks = schedule.shape.blocks;
  const int k = step.micro_batch;
  const int tokens = k < 0 ? 0 : step.token == 0 ? run.prompt_len : 1;
  const int block = BlockOfLayer(step.layer);
  const int slice = block * p_.shape.num_micro_batches + k;
  const int kv_rows = k < 0 ? 0 : run.batch(k) * p_.cache.rows.rows / p_.shape.gpu_batch_size;
  switch (step.kind) {
    case StepKind::kLoadWeights:
      if (RoleOfLayer(step.layer, blocks) == LayerRole::kInputEmbedding) {
        run.input_rows = BlockInputRows(*run.requests, *run.sequences, run.prompt_len, step.token,
                                        position_offset_);
        return transfers_.GatherInputRows(run.input_rows, step.weight_slot, stream, record);
      }
      return transfers_.LoadWeights(PlacedLayerOf(step, blocks),
                                    RoleOfLayer(step.layer, blocks) == LayerRole::kMlp ? 1 : 0,
                                    step.weight_slot, stream, record);
    case StepKind::kLoadCache:
      return transfers_.LoadCache(slice, step.cache_slot, kv_rows,
                                  run.prompt_len + step.token - 1, stream, record);
    case StepKind::kStoreCache: {
      int first = step.token == 0 ? 0 : run.prompt_len + step.token - 1;
      int count = tokens;
      // A decode step that completes a sequence's group of channel keys rewrote the group's
      // slots: the last group of slots, of every row (a group is a sequence's tokens, counted
      // from its first real slot).
      const auto completes_group = [&](int b) {
        const size_t written = (*run.requests)[static_cast<size_t>(b)].prompt.size() + step.token;
        return written % kChannelKeyGroup == 0;
      };
      const int b0 = k * p_.shape.gpu_batch_size;
      if (step.token > 0 && p_.plan.channel_keys() &&
          std::ranges::any_of(std::views::iota(b0, b0 + run.batch(k)), completes_group)) {
        first += 1 - kChannelKeyGroup;
        count = kChannelKeyGroup;
      }
      return transfers_.StoreCache(slice, step.cache_slot, kv_rows, first, count, step.token > 0,
                                   stream, record);
    }
    case StepKind::kLoadActivations:
      return transfers_.LoadActivations(k, step.activation_slot, run.batch(k) * tokens, stream,
                                        record);
    case StepKind::kStoreActivations:
      return transfers_.StoreActivations(k, step.activation_slot, run.batch(k) * tokens, stream,
                                         record);
    case StepKind::kCompute:
    case StepKind::kComputeToCpu:
    case StepKind::kComputeFromCpu:
      compute_.Run(step, blocks, run, stream, record);
      return Status::Ok();
    case StepKind::kCpuAttention:
      compute_.CpuAttention(step, run);
      return Status::Ok();
  }
  return Status::Ok();
}

Status BlockExecutor::Run(const BlockSchedule& schedule, BlockRun& run,
                          const ExecutorOptions& options, std::vector<LaneRecord>& records,
                          ExecutorMetrics& metrics) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point origin = Clock::now();
  const std::vector<Step>& steps = schedule.steps;
  STRATA_CHECK_MSG(!schedule.shape.cpu_attention_decode || compute_.delegates(),
                   "the schedule splits attention for the CPU but the placement keeps it");
  // given[i]: step i's work has been handed to its stream and events[i] recorded after it.
  const auto given = std::make_unique<std::atomic<uint8_t>[]>(steps.size());
  std::vector<std::unique_ptr<Event>> events(steps.size());
  for (std::unique_ptr<Event>& e : events) e = device_.MakeEvent();
  std::unique_ptr<Stream> streams[kNumLanes];
  for (std::unique_ptr<Stream>& s : streams) s = device_.MakeStream();
  std::atomic<int> last_token{INT_MAX};  // token steps after it are skipped
  std::atomic<double> prefill_us{0};
  std::mutex error_mu;
  Status error;
  BufferGuard guard(schedule);
  records.assign(kNumLanes, LaneRecord(origin));
  const int last_mb = run.num_micro_batches - 1;
  const int output_layer = schedule.num_layers() - 1;

  auto lane_main = [&](int lane) {
    NameThisThread(std::string("strata-") + LaneName(static_cast<Lane>(lane)));
    LaneRecord& record = records[static_cast<size_t>(lane)];
    Stream& stream = *streams[lane];
    std::minstd_rand rng(options.jitter_seed * 3 + static_cast<uint32_t>(lane));
    for (const Step& step : steps) {
      if (static_cast<int>(step.lane) != lane) continue;
      if (!options.skip_waits || !options.skip_waits(step)) {
        const bool stream_waits = !options.skip_stream_waits || !options.skip_stream_waits(step);
        for (int w : step.waits) {
          given[w].wait(0);
          if (!stream_waits) continue;
          // The CPU computes on host memory: the bytes must have landed before it is given work.
          if (step.lane == Lane::kCpu) {
            events[static_cast<size_t>(w)]->HostWait();
          } else {
            stream.Wait(*events[static_cast<size_t>(w)]);
          }
        }
      }
      if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) {
        int last = last_token.load();
        while (last >= step.token && !last_token.compare_exchange_weak(last, step.token - 1)) {
        }
      }
      const bool run_it = step.token <= last_token.load();
      if (run_it) {
        if (options.jitter_us > 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % options.jitter_us));
        }
        guard.Begin(step);
        const double t0 = record.NowUs();
        Status s = Execute(step, schedule, run, stream, record);
        record.AddStep(step.lane, RoleOfLayer(step.layer, schedule.shape.blocks), step.token,
                       SpanName(step, schedule.shape.blocks), t0, record.NowUs());
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (error.ok()) error = s;
          last_token = -1;
        }
        if (step.kind == StepKind::kCompute && step.layer == output_layer &&
            step.micro_batch == last_mb) {
          if (step.token == 0) prefill_us = record.NowUs();
          if (run.sequences->all_done()) last_token = std::min(last_token.load(), step.token);
        }
      }
      guard.End(step, run_it);
      stream.Record(*events[static_cast<size_t>(step.id)]);
      given[step.id].store(1);
      given[step.id].notify_all();
    }
  };
  std::vector<std::thread> lanes;
  for (int l = 0; l < kNumLanes; ++l) lanes.emplace_back(lane_main, l);
  for (std::thread& t : lanes) t.join();
  for (std::unique_ptr<Stream>& s : streams) s->Synchronize();

  metrics.wall_s = std::chrono::duration<double>(Clock::now() - origin).count();
  metrics.prefill_s = prefill_us.load() * 1e-6;
  metrics.sequences = run.sequences->size();
  metrics.prompt_len = run.prompt_len;
  metrics.tokens = std::min(last_token.load(), schedule.shape.num_tokens - 1) + 1;
  SumSpans(records, metrics);
  return error;
}

}  // namespace strata
