// The CPU backend's 4-bit KV cache ops (Backend::WriteKvQ4, AttendKvQ4 and the key smoothing),
// kernels/cpu over host memory: each resolves its spans and gives the kernel calls to the stream.
// Rows are written one at a time, and attended in runs of whole sequences whose rows lie as one
// contiguous cache (one kernels::cpu::DecodeAttentionQ4 call a run, otherwise one a row), so the
// results are the bits one call over a contiguous cache gives.
#pragma once

#include <span>

#include "src/backend/backend.h"

namespace strata {

void CpuWriteKvQ4(Stream& stream, const KvQ4Step& step, DeviceSpan k_new, DeviceSpan v_new,
                  std::span<const int> start, std::span<const KvQ4Row> rows, int row_begin);
void CpuAttendKvQ4(Stream& stream, const KvQ4Step& step, DeviceSpan q, std::span<const int> start,
                   std::span<const KvQ4Row> rows, int row_begin, DeviceSpan out);
void CpuFitKeySmoothing(Stream& stream, const KvQ4Step& step, DeviceSpan k_new,
                        std::span<const int> start, DeviceSpan mean, DeviceSpan scale);
void CpuSmoothKeys(Stream& stream, const KvQ4Step& step, DeviceSpan k_new, DeviceSpan mean,
                   DeviceSpan scale);
void CpuScaleQueries(Stream& stream, const KvQ4Step& step, DeviceSpan q, DeviceSpan scale);

}  // namespace strata
