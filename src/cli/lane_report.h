// Predicted next to measured busy time per executor lane, per kind of layer and per phase, and
// the wall time of each phase, so the cost model (policy/cost_model.h) can be checked against a
// run on any machine.
//
// The executor's lanes carry the cost model's links and units as follows:
//   load     disk -> CPU reads and CPU -> GPU copies (the load lane runs both, one after another)
//   compute  GPU GEMMs, GPU attention and 4-bit expansion
//   store    GPU -> CPU copies and CPU -> disk writes
//   cpu      CPU attention (CPU delegation)
// Kinds of layer: "input" (the embedding: the model predicts its weights' trip only, not the
// gather), "transformer" (every attention and MLP scheduling layer; the model predicts them as
// one transformer layer step) and "output" (final norm and projection). Phases: "prefill" (token
// step 0) and "decode". Predictions are for the run's blocks, each taken at the plan's block size,
// the longest padded prompt and the most token steps of the run (exact for `strata bench`, an upper
// bound for runs whose blocks differ).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "policy/hardware_spec.h"
#include "policy/model_spec.h"
#include "policy/plan.h"
#include "src/job/job_metrics.h"
#include "src/runtime/executor_trace.h"

namespace strata {

struct LaneReport {
  std::string profile;          // the hardware profile's name; empty: no predictions
  std::vector<LaneTime> times;  // phase-major: prefill then decode; input, transformer, output;
                                // load, compute, store, cpu
  std::vector<PhaseTime> phases;  // prefill then decode: the run's wall seconds in each phase
};

// The report of a run's metrics under `plan`. Without `model` or `hardware` (or when they do not
// validate for the run's lengths) the predictions are empty (nullopt).
LaneReport BuildLaneReport(const ExecutorMetrics& metrics, const Plan& plan,
                           const std::optional<ModelSpec>& model,
                           const std::optional<HardwareSpec>& hardware);

// For people: the phases' wall time, then a table with one row per phase and kind of layer,
// "predicted / measured (ratio)" per lane.
std::string LaneReportText(const LaneReport& report);

}  // namespace strata
