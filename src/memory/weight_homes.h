// Copies a model's weights to the homes a WeightPlacement gave them, once, before a run: GPU rows
// to the device arena (made in a host window and copied on a stream of the device's backend,
// two halves in flight), CPU rows to the pinned host arena, disk rows to the scratch file.
//
// Disk rows that are a strata store's own bytes (PlacedTensor::disk_in_store) are not copied:
// the load lane reads them from the store's tensors.bin (no second copy, unlike FlexGen), 4-bit
// rows of a 4-bit store too (codes and params). The scratch copy remains for tensors with no
// exact file image: a GGUF or safetensors model converted in memory, weights quantized to 4 bits
// at load. Which path is taken, and why, is logged once per process.
//
// 4-bit tensors (PlacedTensor::q4) are written from their quantized planes, which the caller
// supplies (src/memory does not depend on kernels/): each tier's rows as codes then params.
//
// Dense rows are read through Model::ReadTensorBytes, so the weights of a model made on demand
// (src/model/synthetic_model.h) are made straight into their CPU homes. GPU and disk rows are made
// (or copied) into a window (32 MiB; for the disk, of whole pages) and copied or written from it,
// so setup holds no more host memory than the homes and two windows whatever the model's size.
#pragma once

#include <cstdint>
#include <functional>

#include "src/backend/backend.h"
#include "src/core/status.h"
#include "src/memory/memory_tiers.h"
#include "src/memory/weight_placement.h"

namespace strata {

// The 4-bit planes of the tensor whose model data is `source`.
using WeightQ4PlanesOf = std::function<Q4Planes(const TensorView& source)>;

// REQUIRES: `weights` was placed from `model`, and `tiers` created from its layout with `device`
// as the device tier's backend; `q4` is set when any tensor is 4-bit.
Status CopyWeightsHome(const Model& model, const WeightPlacement& weights,
                       const MemoryTiers& tiers, Backend& device,
                       const WeightQ4PlanesOf& q4 = nullptr);

}  // namespace strata
