#include "src/job/job_metrics.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace strata {
namespace {

using Json = nlohmann::ordered_json;

Json OrNull(const std::optional<uint64_t>& v) { return v ? Json(*v) : Json(nullptr); }

double PerSecond(uint64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; }

double Waste(uint64_t used, uint64_t slots) {
  return slots == 0 ? 0.0 : 1.0 - static_cast<double>(used) / static_cast<double>(slots);
}

}  // namespace

void PaddingStats::AddBlock(const std::vector<int>& prompt_lens, const std::vector<int>& generated) {
  const uint64_t rows = prompt_lens.size();
  if (rows == 0) return;
  int longest_prompt = 0, steps = 0;
  for (int n : prompt_lens) {
    prompt_tokens += static_cast<uint64_t>(n);
    longest_prompt = std::max(longest_prompt, n);
  }
  for (int n : generated) {
    decode_tokens += static_cast<uint64_t>(n);
    steps = std::max(steps, n);
  }
  prompt_slots += rows * static_cast<uint64_t>(longest_prompt);
  decode_slots += rows * static_cast<uint64_t>(steps);
}

double PaddingStats::prompt_waste() const { return Waste(prompt_tokens, prompt_slots); }
double PaddingStats::decode_waste() const { return Waste(decode_tokens, decode_slots); }

std::string MetricsJson(const JobMetrics& m) {
  Json j;
  j["model"] = m.model;
  j["input"] = m.input;
  j["output"] = m.output;
  j["shard"] = m.shard;
  j["exit_code"] = m.exit_code;
  j["interrupted"] = m.interrupted;
  j["interrupt_signal"] = m.interrupt_signal.empty() ? Json(nullptr) : Json(m.interrupt_signal);
  j["elapsed_s"] = m.elapsed_s;
  j["load_s"] = m.load_s;
  j["placement_s"] = m.placement_s;
  j["generation_s"] = m.generation_s;
  Json& r = j["requests"];
  r["completed"] = m.completed;
  r["failed"] = m.failed;
  r["already_done"] = m.already_done;
  r["other_shard"] = m.other_shard;
  r["not_run"] = m.not_run;
  r["by_finish_reason"] = Json::object();
  for (const auto& [k, v] : m.finish_reasons) r["by_finish_reason"][k] = v;
  r["by_error_code"] = Json::object();
  for (const auto& [k, v] : m.error_codes) r["by_error_code"][k] = v;
  const uint64_t total = m.prompt_tokens + m.generated_tokens;
  j["tokens"] = {{"prompt", m.prompt_tokens}, {"generated", m.generated_tokens}, {"total", total}};
  j["throughput"] = {{"prompt_tokens_per_s", PerSecond(m.prompt_tokens, m.generation_s)},
                     {"generated_tokens_per_s", PerSecond(m.generated_tokens, m.generation_s)},
                     {"total_tokens_per_s", PerSecond(total, m.generation_s)}};
  j["blocks"] = {{"count", m.blocks}, {"sort_window", m.sort_window},
                 {"block_size", m.block_size}};
  const PaddingStats& p = m.padding;
  j["padding"] = {{"prompt_tokens", p.prompt_tokens}, {"prompt_slots", p.prompt_slots},
                  {"prompt_waste", p.prompt_waste()}, {"decode_tokens", p.decode_tokens},
                  {"decode_slots", p.decode_slots}, {"decode_waste", p.decode_waste()}};
  const double journal_s = m.journal_recover_s + m.journal_write_s;
  j["journal"] = {{"recover_s", m.journal_recover_s}, {"write_s", m.journal_write_s},
                  {"share_of_elapsed", m.elapsed_s > 0 ? journal_s / m.elapsed_s : 0.0}};
  j["memory"]["peak_rss_bytes"] = m.peak_rss_bytes;
  j["memory"]["peak_bytes"] = {{"gpu", OrNull(m.peak_bytes.gpu)},
                               {"cpu", OrNull(m.peak_bytes.cpu)},
                               {"disk", OrNull(m.peak_bytes.disk)}};
  const LinkBytes& l = m.link_bytes;
  j["links"]["bytes"] = {{"disk_to_cpu", OrNull(l.disk_to_cpu)},
                         {"cpu_to_disk", OrNull(l.cpu_to_disk)},
                         {"cpu_to_gpu", OrNull(l.cpu_to_gpu)},
                         {"gpu_to_cpu", OrNull(l.gpu_to_cpu)}};
  j["lanes"]["profile"] = m.lane_profile.empty() ? Json(nullptr) : Json(m.lane_profile);
  j["lanes"]["times"] = Json::array();
  for (const LaneTime& t : m.lane_times) {
    j["lanes"]["times"].push_back(
        {{"phase", t.phase},
         {"layer", t.layer},
         {"lane", t.lane},
         {"predicted_s", t.predicted_s ? Json(*t.predicted_s) : Json(nullptr)},
         {"measured_s", t.measured_s}});
  }
  j["lanes"]["phases"] = Json::array();
  for (const PhaseTime& t : m.phase_times) {
    j["lanes"]["phases"].push_back(
        {{"phase", t.phase},
         {"predicted_s", t.predicted_s ? Json(*t.predicted_s) : Json(nullptr)},
         {"measured_s", t.measured_s}});
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Status WriteMetricsFile(const std::string& path, const JobMetrics& m) {
  const std::string tmp = path + ".tmp";
  const std::string text = MetricsJson(m);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return Status::IoError("cannot write metrics " + tmp + ": " + std::strerror(errno));
  }
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::IoError("cannot write metrics " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

uint64_t PeakRssBytes() {
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;  // ru_maxrss is in KiB on Linux
}

}  // namespace strata
