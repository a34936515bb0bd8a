// Copies a model's weights to the homes a WeightPlacement gave them, once, before a run: GPU rows
// to the device arena, CPU rows to the pinned host arena, disk rows to the scratch file.
//
// Disk rows that are a strata store's own bytes (PlacedTensor::disk_in_store) are not copied:
// the load lane reads them from the store's tensors.bin (no second copy, unlike FlexGen). The
// scratch copy remains for tensors with no exact file image: a GGUF or safetensors model
// converted in memory, 4-bit store tensors expanded at load. Which path is taken, and why, is
// logged once per process.
#pragma once

#include "src/core/status.h"
#include "src/memory/memory_tiers.h"
#include "src/memory/weight_placement.h"

namespace strata {

// REQUIRES: `tiers` was created from the layout `weights` was placed in.
Status CopyWeightsHome(const WeightPlacement& weights, const MemoryTiers& tiers);

}  // namespace strata
