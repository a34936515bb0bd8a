// Copies a model's weights to the homes a WeightPlacement gave them, once, before a run: GPU rows
// to the device arena, CPU rows to the pinned host arena, disk rows to the scratch file.
//
// Disk weights are a scratch copy for now: a loaded model's tensors may be dequantized or
// converted in memory (GGUF, unaligned safetensors), so there is not always a file region to read
// them from. Reading them in place from the strata store (src/io, `strata convert`) replaces
// this copy once the store exists.
#pragma once

#include "src/core/status.h"
#include "src/memory/memory_tiers.h"
#include "src/memory/weight_placement.h"

namespace strata {

// REQUIRES: `tiers` was created from the layout `weights` was placed in.
Status CopyWeightsHome(const WeightPlacement& weights, const MemoryTiers& tiers);

}  // namespace strata
