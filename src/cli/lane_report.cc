#include "src/cli/lane_report.h"

#include <array>
#include <cstdio>

#include "policy/cost_model.h"
#include "policy/workload.h"

namespace strata {
namespace {

constexpr std::array<const char*, 3> kKinds = {"input", "transformer", "output"};

// The executor lanes' share of one predicted layer step: CPU attention runs on the CPU lane
// (when the plan delegates it, the cost model's cpu_attention_s).
std::array<double, kNumLanes> LaneSeconds(const LayerTimes& t) {
  return {t.disk_read_s + t.h2d_lane_s(), t.compute_lane_s() - t.cpu_attention_s,
          t.d2h_s + t.disk_write_s + t.disk_write_wait_s, t.cpu_attention_s};
}

// Measured seconds of kind `kind` (kKinds' index) in `phase` on `lane`.
double Measured(const ExecutorMetrics& m, int phase, int kind, int lane) {
  const auto& roles = m.step_busy_s[static_cast<size_t>(phase)];
  auto at = [&](LayerRole r) { return roles[static_cast<size_t>(r)][static_cast<size_t>(lane)]; };
  switch (kind) {
    case 0: return at(LayerRole::kInputEmbedding);
    case 1: return at(LayerRole::kAttention) + at(LayerRole::kMlp);
    default: return at(LayerRole::kOutput);
  }
}

}  // namespace

LaneReport BuildLaneReport(const ExecutorMetrics& m, const Plan& plan,
                           const std::optional<ModelSpec>& model,
                           const std::optional<HardwareSpec>& hardware) {
  LaneReport report;
  std::optional<CostEstimate> cost;
  if (model && hardware && m.blocks > 0 && m.tokens > 0 && m.prompt_len > 0) {
    const Workload w{m.prompt_len, m.tokens, 0};
    if (w.Validate(*model).ok() && plan.Validate().ok() && hardware->Validate().ok()) {
      cost = EstimateCost(*model, w, plan, *hardware);
      report.profile = hardware->name;
    }
  }
  for (int phase = 0; phase < kNumPhases; ++phase) {
    const PhaseCost* pc = nullptr;
    double steps = 0;  // token steps of this phase over the run
    PhaseTime wall;
    wall.phase = PhaseName(static_cast<Phase>(phase));
    wall.measured_s = phase == 0 ? m.prefill_s : m.wall_s - m.prefill_s;
    if (cost) {
      pc = phase == 0 ? &cost->prefill : &cost->decode;
      steps = static_cast<double>(m.blocks) * (phase == 0 ? 1 : m.tokens - 1);
      wall.predicted_s = m.blocks * pc->total_s;
    }
    report.phases.push_back(std::move(wall));
    for (int kind = 0; kind < static_cast<int>(kKinds.size()); ++kind) {
      std::array<double, kNumLanes> predicted{};
      if (pc != nullptr && kind == 0) predicted = LaneSeconds(pc->input);
      if (pc != nullptr && kind == 1) predicted = LaneSeconds(pc->layer);
      if (pc != nullptr && kind == 2) predicted = LaneSeconds(pc->output);
      const double per_step_layers = kind == 1 && model ? model->num_layers : 1;
      for (int lane = 0; lane < kNumLanes; ++lane) {
        LaneTime t;
        t.phase = PhaseName(static_cast<Phase>(phase));
        t.layer = kKinds[static_cast<size_t>(kind)];
        t.lane = LaneName(static_cast<Lane>(lane));
        if (pc != nullptr) {
          t.predicted_s = predicted[static_cast<size_t>(lane)] * per_step_layers * steps;
        }
        t.measured_s = Measured(m, phase, kind, lane);
        report.times.push_back(std::move(t));
      }
    }
  }
  return report;
}

std::string LaneReportText(const LaneReport& r) {
  char cell[64];
  char line[256];
  std::string out = "wall time, predicted / measured s (measured / predicted):";
  for (const PhaseTime& t : r.phases) {
    if (t.predicted_s && *t.predicted_s > 0) {
      std::snprintf(cell, sizeof(cell), "%.3f / %.3f (%.2f)", *t.predicted_s, t.measured_s,
                    t.measured_s / *t.predicted_s);
    } else {
      std::snprintf(cell, sizeof(cell), "- / %.3f", t.measured_s);
    }
    out += " " + t.phase + " " + cell + (&t == &r.phases.back() ? "" : ";");
  }
  out += "\nlane busy time, predicted / measured s (measured / predicted), profile " +
         (r.profile.empty() ? std::string("none") : r.profile) + ":\n";
  std::snprintf(line, sizeof(line), "  %-8s %-12s %-28s %-28s %-28s %-28s\n", "phase", "layer",
                "load", "compute", "store", "cpu");
  out += line;
  for (size_t i = 0; i + kNumLanes <= r.times.size(); i += kNumLanes) {
    std::string row;
    for (int lane = 0; lane < kNumLanes; ++lane) {
      const LaneTime& t = r.times[i + static_cast<size_t>(lane)];
      if (!t.predicted_s) {
        std::snprintf(cell, sizeof(cell), "- / %.4f", t.measured_s);
      } else if (*t.predicted_s > 0) {
        std::snprintf(cell, sizeof(cell), "%.4f / %.4f (%.2f)", *t.predicted_s, t.measured_s,
                      t.measured_s / *t.predicted_s);
      } else {
        std::snprintf(cell, sizeof(cell), "%.4f / %.4f", *t.predicted_s, t.measured_s);
      }
      std::snprintf(line, sizeof(line), " %-28s", cell);
      row += line;
    }
    std::snprintf(line, sizeof(line), "  %-8s %-12s", r.times[i].phase.c_str(),
                  r.times[i].layer.c_str());
    out += line + row + "\n";
  }
  return out;
}

}  // namespace strata
