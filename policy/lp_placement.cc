#include "policy/lp_placement.h"

#include <coin/ClpSimplex.hpp>
#include <coin/CoinError.hpp>
#include <coin/CoinPackedMatrix.hpp>
#include <coin/CoinPackedVector.hpp>
#include <string>
#include <vector>

namespace strata {
namespace {

// Columns: the fractions, then the six step times.
enum StepColumn {
  kPrefillLayer = kNumFractions,
  kDecodeLayer,
  kPrefillOutput,
  kDecodeOutput,
  kPrefillInput,  // the input embedding steps
  kDecodeInput,
  kNumColumns
};

struct Rows {
  CoinPackedMatrix matrix{false, 0, 0};
  std::vector<double> lower, upper;

  Rows() { matrix.setDimensions(0, kNumColumns); }

  // lower <= form.coef . x + extra_coef * column <= upper.
  void Add(const LinearForm& form, double lo, double hi, int extra_column = -1,
           double extra_coef = 0) {
    CoinPackedVector row;
    for (int i = 0; i < kNumFractions; ++i) {
      if (form.coef[i] != 0) row.insert(i, form.coef[i]);
    }
    if (extra_column >= 0) row.insert(extra_column, extra_coef);
    matrix.appendRow(row);
    lower.push_back(lo);
    upper.push_back(hi);
  }
};

// Step time >= each lane (overlap; and each weight-slot chain where weights load) or >= the sum
// of the lanes: lane(x) - T <= 0.
void AddStep(Rows& rows, const LayerForms& f, int column, bool overlap, bool weights_load) {
  const LinearForm disk = f.disk_read_s + f.disk_write_s;
  const LinearForm compute = f.gpu_gemm_s + f.gpu_attention_s + f.cpu_attention_s + f.gpu_dequant_s;
  if (overlap) {
    for (const LinearForm* lane : {&disk, &f.h2d_s, &f.d2h_s, &compute}) {
      rows.Add(*lane, -COIN_DBL_MAX, -lane->constant, column, -1.0);
    }
    if (weights_load) {
      for (const LinearForm& chain : f.slot_chains) {
        rows.Add(chain, -COIN_DBL_MAX, -chain.constant, column, -1.0);
      }
    }
  } else {
    const LinearForm sum = disk + f.h2d_s + f.d2h_s + compute;
    rows.Add(sum, -COIN_DBL_MAX, -sum.constant, column, -1.0);
  }
}

// All lanes added up: the work a step does whatever overlaps.
LinearForm Work(const LayerForms& f) {
  return f.disk_read_s + f.disk_write_s + f.h2d_s + f.d2h_s + f.gpu_gemm_s + f.gpu_attention_s +
         f.cpu_attention_s + f.gpu_dequant_s;
}

// Weight of total work in the objective. Lanes that do not bind cost nothing in the block time,
// so placements can tie; this breaks ties towards less traffic (keep on the GPU what fits there)
// while moving the optimum by at most this fraction.
constexpr double kTieBreak = 1e-3;

// bytes(x) <= capacity, scaled by the capacity so that every row is of order one.
void AddCapacity(Rows& rows, const LinearForm& bytes, int64_t capacity) {
  const double cap = static_cast<double>(capacity);
  rows.Add(bytes * (1.0 / cap), -COIN_DBL_MAX, 1.0 - bytes.constant / cap);
}

}  // namespace

Result<LpPlacement> SolvePlacementLp(const CostForms& cost, const LinearMemory& memory,
                                     const HardwareSpec& hardware, int num_layers, int gen_len,
                                     bool overlap, bool weights_load) {
  Rows rows;
  for (Fraction first : {kWeightGpu, kCacheGpu, kActivationGpu}) {
    LinearForm family;
    family.Add(first, 1).Add(Fraction(first + 1), 1).Add(Fraction(first + 2), 1);
    rows.Add(family, 1.0, 1.0);
  }
  AddStep(rows, cost.layer_prefill, kPrefillLayer, overlap, weights_load);
  AddStep(rows, cost.layer_decode, kDecodeLayer, overlap, weights_load);
  AddStep(rows, cost.output_prefill, kPrefillOutput, overlap, weights_load);
  AddStep(rows, cost.output_decode, kDecodeOutput, overlap, weights_load);
  AddStep(rows, cost.input_prefill, kPrefillInput, overlap, weights_load);
  AddStep(rows, cost.input_decode, kDecodeInput, overlap, weights_load);
  AddCapacity(rows, memory.gpu_bytes, hardware.gpu_capacity_bytes);
  AddCapacity(rows, memory.cpu_bytes, hardware.cpu_capacity_bytes);
  AddCapacity(rows, memory.disk_bytes, hardware.disk_capacity_bytes);

  std::vector<double> col_lower(kNumColumns, 0.0), col_upper(kNumColumns, COIN_DBL_MAX);
  std::vector<double> objective(kNumColumns, 0.0);
  for (int i = 0; i < kNumFractions; ++i) col_upper[i] = 1.0;
  if (weights_load) {
    col_upper[kWeightGpu] = 0.99;  // the most below 100% that --percent places
  } else {
    col_lower[kWeightGpu] = 1.0;
  }
  const double decode_steps = gen_len - 1;
  objective[kPrefillLayer] = num_layers;
  objective[kPrefillOutput] = 1;
  objective[kDecodeLayer] = decode_steps * num_layers;
  objective[kDecodeOutput] = decode_steps;
  objective[kPrefillInput] = 1;
  objective[kDecodeInput] = decode_steps;
  const LinearForm work =
      Work(cost.layer_prefill) * num_layers + Work(cost.output_prefill) +
      (Work(cost.layer_decode) * num_layers + Work(cost.output_decode)) * decode_steps +
      Work(cost.input_prefill) + Work(cost.input_decode) * decode_steps;
  for (int i = 0; i < kNumFractions; ++i) objective[i] = kTieBreak * work.coef[i];

  try {
    ClpSimplex lp;
    lp.setLogLevel(0);
    lp.loadProblem(rows.matrix, col_lower.data(), col_upper.data(), objective.data(),
                   rows.lower.data(), rows.upper.data());
    lp.dual();
    if (lp.isProvenPrimalInfeasible()) {
      return Status::ResourceExhausted("no placement fits the tiers' capacities");
    }
    if (!lp.isProvenOptimal()) {
      return Status::ResourceExhausted("the placement LP ended with Clp status " +
                                       std::to_string(lp.status()));
    }
    LpPlacement out;
    const double* x = lp.primalColumnSolution();
    for (int i = 0; i < kNumFractions; ++i) out.fractions[i] = x[i];
    out.block_s = 0;
    for (int c = kNumFractions; c < kNumColumns; ++c) out.block_s += objective[c] * x[c];
    return out;
  } catch (const CoinError& e) {
    return Status::ResourceExhausted("the placement LP failed in Clp: " + e.message());
  }
}

}  // namespace strata
