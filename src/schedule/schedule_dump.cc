#include "src/schedule/schedule_dump.h"

#include <array>
#include <cstdio>

namespace strata {

std::string DumpSchedule(const BlockSchedule& schedule) {
  const ScheduleShape& s = schedule.shape;
  std::array<int, kNumLanes> per_lane{};
  for (const Step& step : schedule.steps) ++per_lane[static_cast<int>(step.lane)];
  char line[256];
  // The CPU lane and its flag show only in a schedule that delegates, so that other dumps read as
  // they did before the lane existed.
  const bool cpu = s.cpu_attention_decode;
  std::snprintf(line, sizeof(line),
                "# block schedule: %d blocks (%d scheduling layers), %d micro-batches, %d token "
                "steps; %zu steps (load %d, compute %d, store %d",
                s.blocks, schedule.num_layers(), s.num_micro_batches, s.num_tokens,
                schedule.steps.size(), per_lane[0], per_lane[1], per_lane[2]);
  std::string out = line;
  if (cpu) out += ", cpu " + std::to_string(per_lane[static_cast<int>(Lane::kCpu)]);
  out += ")\n";
  std::snprintf(line, sizeof(line),
                "# loads weights: input %d, blocks %d, output %d; moves activations %d; cache: "
                "load decode %d, store prefill %d, store decode %d",
                s.load_input_weights, s.load_block_weights, s.load_output_weights,
                s.move_activations, s.load_cache_decode, s.store_cache_prefill,
                s.store_cache_decode);
  out += line;
  if (cpu) out += "; CPU attention in decode 1";
  out += "\n";
  for (const Step& step : schedule.steps) {
    const LayerRole role = RoleOfLayer(step.layer, s.blocks);
    std::string layer = LayerRoleName(role);
    if (role == LayerRole::kAttention || role == LayerRole::kMlp) {
      layer += "." + std::to_string(BlockOfLayer(step.layer));
    }
    std::snprintf(line, sizeof(line), "#%-6d %-8s %-18s token %-3d layer %-3d %-13s", step.id,
                  LaneName(step.lane), StepKindName(step.kind), step.token, step.layer,
                  layer.c_str());
    out += line;
    if (step.micro_batch >= 0) out += " mb " + std::to_string(step.micro_batch);
    if (step.weight_slot >= 0) out += " w" + std::to_string(step.weight_slot);
    if (step.cache_slot >= 0) out += " c" + std::to_string(step.cache_slot);
    if (step.activation_slot >= 0) out += " a" + std::to_string(step.activation_slot);
    if (!step.waits.empty()) {
      out += "  waits";
      for (int w : step.waits) out += " #" + std::to_string(w);
    }
    out += "\n";
  }
  return out;
}

}  // namespace strata
