// WriteStore: a loaded Model to a strata store (store.h), the work of `strata convert`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "src/core/status.h"
#include "src/core/tensor.h"
#include "src/io/file_env.h"
#include "src/model/model.h"

namespace strata {

// Fills the 4-bit planes of `weight` [rows, cols] in the layout of kernels/cpu/weight_q4.h, in
// groups of `group`: codes [rows, cols / 2] bytes, params [rows, cols / group, 2] fp16 bits
// {scale, minimum}.
using StoreQ4Quantizer =
    std::function<void(const TensorView& weight, int group, uint8_t* codes, uint16_t* params)>;

struct StoreWriteOptions {
  // Non-null (`--compress-weight`): every weight matrix whose rows are a multiple of the model's
  // Model::q4_group() is stored 4-bit in its groups (a GGUF file's Q4 blocks as they are, the
  // others quantized by this); the rest stay raw. src/model does not depend on kernels/, so the
  // caller passes kernels::cpu::QuantizeWeightQ4. Default null: all raw.
  StoreQ4Quantizer quantize_q4;
  // Writes tensors.bin through this environment (direct I/O). Default null: NewFileEnv().
  FileEnv* env = nullptr;
};

// What a conversion wrote.
struct StoreWriteSummary {
  int tensors = 0;          // stored tensors (a tied lm_head is not stored twice)
  int q4_tensors = 0;       // of which 4-bit
  int q4_blocks_kept = 0;   // of those, a GGUF file's Q4 blocks stored as they are
  int raw_matrices = 0;     // matrices kept raw under quantize_q4 (rows not whole groups)
  uint64_t data_bytes = 0;  // size of tensors.bin
};

// Writes `model` as a store in `dir`, which must not exist or be empty (InvalidArgument
// otherwise; also for a model with 4-bit weights, a store itself). tensors.bin is written and
// synced before manifest.json is renamed into place, so a directory with a manifest always holds a
// complete store. On failure the partial directory is left for inspection and the Status names it.
// Deferred GGUF tensors (Model::IsDeferred) are expanded one at a time, so memory holds one of them
// in F32 at most.
Result<StoreWriteSummary> WriteStore(const Model& model, const std::string& dir,
                                     const StoreWriteOptions& options = {});

}  // namespace strata
