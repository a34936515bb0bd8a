#include "src/runtime/executor_trace.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

namespace strata {

const char* LinkName(Link link) {
  switch (link) {
    case Link::kDiskToCpu: return "disk->CPU";
    case Link::kCpuToGpu: return "CPU->GPU";
    case Link::kGpuToGpu: return "GPU->GPU";
    case Link::kGpuToCpu: return "GPU->CPU";
    case Link::kCpuToDisk: return "CPU->disk";
  }
  return "?";
}

const char* PhaseName(Phase phase) { return phase == Phase::kPrefill ? "prefill" : "decode"; }

double ExecutorMetrics::overlap() const {
  const double busiest = *std::max_element(lane_busy_s.begin(), lane_busy_s.end());
  return busiest > 0 ? wall_s / busiest : 0;
}

void ExecutorMetrics::Accumulate(const ExecutorMetrics& o) {
  wall_s += o.wall_s;
  prefill_s += o.prefill_s;
  sequences += o.sequences;
  blocks += o.blocks;
  prompt_len = std::max(prompt_len, o.prompt_len);
  tokens = std::max(tokens, o.tokens);
  weight_expansions += o.weight_expansions;
  for (int i = 0; i < kNumLanes; ++i) lane_busy_s[i] += o.lane_busy_s[i];
  for (int p = 0; p < kNumPhases; ++p) {
    for (int r = 0; r < kNumLayerRoles; ++r) {
      for (int i = 0; i < kNumLanes; ++i) step_busy_s[p][r][i] += o.step_busy_s[p][r][i];
    }
  }
  for (int i = 0; i < kNumLinks; ++i) {
    link_busy_s[i] += o.link_busy_s[i];
    link_bytes[i] += o.link_bytes[i];
  }
  for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
    peak_bytes.at(t) = std::max(peak_bytes.at(t), o.peak_bytes.at(t));
    planned_bytes.at(t) = o.planned_bytes.at(t);
  }
}

std::string ExecutorMetrics::ToString() const {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof(line),
                "wall %.3f s (prefill %.3f s), %d sequences, prompt %d, %d token steps; "
                "overlap %.2f (wall / busiest lane)\n",
                wall_s, prefill_s, sequences, prompt_len, tokens, overlap());
  out += line;
  out += "lanes busy:";
  for (int i = 0; i < kNumLanes; ++i) {
    std::snprintf(line, sizeof(line), "%s %s %.3f s", i == 0 ? "" : ",",
                  LaneName(static_cast<Lane>(i)), lane_busy_s[static_cast<size_t>(i)]);
    out += line;
  }
  out += "\n";
  out += "links:";
  for (int i = 0; i < kNumLinks; ++i) {
    if (link_bytes[i] == 0) continue;
    std::snprintf(line, sizeof(line), " %s %s in %.3f s (%.2f GB/s);",
                  LinkName(static_cast<Link>(i)), FormatBytes(static_cast<int64_t>(link_bytes[i])).c_str(),
                  link_busy_s[i], link_busy_s[i] > 0 ? link_bytes[i] / link_busy_s[i] / 1e9 : 0.0);
    out += line;
  }
  if (weight_expansions > 0) {
    out += "\n4-bit weights expanded for " + std::to_string(weight_expansions) + " layer steps";
  }
  out += "\npeak bytes per tier (actual / plan):";
  for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
    out += std::string(" ") + TierName(t) + " " + FormatBytes(peak_bytes.at(t)) + " / " +
           (planned_bytes.at(t) < 0 ? std::string("n/a") : FormatBytes(planned_bytes.at(t))) + ";";
  }
  return out + "\n";
}

void SumSpans(const std::vector<LaneRecord>& records, ExecutorMetrics& metrics) {
  ++metrics.blocks;
  for (const LaneRecord& r : records) {
    metrics.weight_expansions += r.weight_expansions();
    for (const TraceSpan& s : r.spans()) {
      if (s.track < kNumLanes) {
        metrics.lane_busy_s[static_cast<size_t>(s.track)] += s.dur_us * 1e-6;
        if (s.role >= 0 && s.role < kNumLayerRoles && s.token >= 0) {
          metrics.step_busy_s[s.token == 0 ? 0 : 1][static_cast<size_t>(s.role)]
                             [static_cast<size_t>(s.track)] += s.dur_us * 1e-6;
        }
      } else {
        metrics.link_busy_s[static_cast<size_t>(s.track - kNumLanes)] += s.dur_us * 1e-6;
        metrics.link_bytes[static_cast<size_t>(s.track - kNumLanes)] += s.bytes;
      }
    }
  }
}

Status WriteChromeTrace(const std::string& path, const std::vector<TraceSpan>& spans) {
  nlohmann::json events = nlohmann::json::array();
  for (int track = 0; track < kNumLanes + kNumLinks; ++track) {
    const std::string name = track < kNumLanes
                                 ? std::string("lane ") + LaneName(static_cast<Lane>(track))
                                 : std::string("link ") + LinkName(static_cast<Link>(track - kNumLanes));
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", track},
                      {"args", {{"name", name}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 1}, {"tid", track},
                      {"args", {{"sort_index", track}}}});
  }
  for (const TraceSpan& s : spans) {
    nlohmann::json e = {{"name", s.name}, {"ph", "X"}, {"pid", 1}, {"tid", s.track},
                        {"ts", s.start_us}, {"dur", s.dur_us}};
    if (s.bytes > 0) e["args"] = {{"bytes", s.bytes}};
    events.push_back(std::move(e));
  }
  std::ofstream out(path);
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
  if (!out) return Status::IoError("cannot write the trace to " + path);
  return Status::Ok();
}

}  // namespace strata
