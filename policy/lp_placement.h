// The linear program of the search: for one plan shape (gpu batch size, number of gpu batches,
// compression, CPU attention, overlap), the placement fractions that minimise the block's time
// subject to every tier's capacity — FlexGen's formulation (../shared/docs/ANCHORS.md) over
// strata's own cost and memory forms, solved with COIN-OR Clp.
#pragma once

#include "policy/cost_model.h"
#include "policy/hardware_spec.h"
#include "policy/linear_form.h"
#include "policy/memory_accounting.h"
#include "src/core/status.h"

namespace strata {

struct LpPlacement {
  Fractions fractions{};  // each family sums to 1
  double block_s = 0;     // the LP's optimal block time
};

// Variables: the nine fractions and one step time per (layer kind, phase). Minimises
// num_layers * prefill_layer + prefill_output + (gen_len - 1) * (num_layers * decode_layer +
// decode_output), each step time bounded below by every lane (overlap) or by their sum.
// The weight slots' chains (cost_model.h) exist only where weights load, so the caller picks
// the side: `weights_load` true keeps at most 99% of the weights on the GPU and bounds each
// overlapped step by the chains too; false keeps every weight on the GPU.
// ResourceExhausted when no placement fits the capacities; Unknown solver trouble is reported
// as ResourceExhausted too, with the solver's status. Thread-compatible.
Result<LpPlacement> SolvePlacementLp(const CostForms& cost, const LinearMemory& memory,
                                     const HardwareSpec& hardware, int num_layers, int gen_len,
                                     bool overlap, bool weights_load);

}  // namespace strata
