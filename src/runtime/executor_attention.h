// Attention over a KV cache whose rows live in different places. Row r of a (block, micro-batch)
// slice is (sequence r / kv_heads, KV head r % kv_heads); the executor keeps each tier's rows of
// a slice in its own memory (GPU home, cache slot, CPU home, CPU-attention slot), so a row is
// found through a table. Each (sequence, query head, token) is computed exactly as one
// Backend::Attention call over a contiguous cache computes it (or, for the 4-bit cache, one
// kernels::cpu::DecodeAttentionQ4 call over a contiguous cache), so results are the same bits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/attention_q4.h"
#include "src/backend/backend.h"
#include "src/memory/placement.h"

namespace strata {

// One K row and one V row, each `stride` slots, as spans of the arena they live in (the device's,
// or the host tier's as the CPU backend sees it): head_dim fp32 values per slot (k, v), or for
// the 4-bit cache the codes and params planes of kernels/kv_q4_format.h (k_codes ... v_params).
// Each span runs from the row to the end of its plane, so that the rows after it in its buffer
// are a Sub of it; the row itself is its first `stride` slots.
struct KvRow {
  DeviceSpan k, v;
  int stride = 0;
  DeviceSpan k_codes, k_params, v_codes, v_params;
};

// Row `index` of `buffer`, which holds `rows` rows of `len` slots in `format`'s planes.
KvRow KvRowAt(const KvFormat& format, const DeviceSpan& buffer, int64_t rows, int len,
              int64_t index);

// A KvRow by host address, for the steps that still read and write the cache so (the writes,
// and the 4-bit decode attention) until they are backend ops.
struct KvRowAddress {
  float* k = nullptr;
  float* v = nullptr;
  int stride = 0;
  uint8_t* k_codes = nullptr;
  uint16_t* k_params = nullptr;
  uint8_t* v_codes = nullptr;
  uint16_t* v_params = nullptr;
};

// How 4-bit rows take keys, as the plan says: Walsh–Hadamard rotated first, or by
// channel (kernels/cpu/kv_q4_channel.h), a group once its last slot is written, from this
// write's keys and the micro-batch's exact keys (Q4ExactRows' keys, row r of `rows` at its row
// r; as before this write, or after it for one token).
struct Q4KeyWrite {
  bool rotate = false;
  bool by_channel = false;
  int sink = 0;
  int window = 0;
  const float* exact_keys = nullptr;
  const int* start = nullptr;  // each sequence's first real slot
};

// Stores this step's keys and values, k_new and v_new [batch * tokens, kv_heads * head_dim]
// (token-major, as a Linear writes them), in slots [first_slot, first_slot + tokens) of 4-bit
// rows [row_begin, row_end) of `rows`, quantized (keys as `keys` says) through `scratch`.
void WriteKvRowsQ4(const std::vector<KvRowAddress>& rows, int row_begin, int row_end,
                   int kv_heads, int head_dim, const float* k_new, const float* v_new, int tokens,
                   int first_slot, const Q4KeyWrite& keys, std::vector<float>& scratch);

// out = attention of q over rows [row_begin, row_end) of `rows`, for the query heads those rows
// serve, on `stream`; other heads of `out` are left as they are. `shape` is the whole
// micro-batch's (its max_len is ignored: each row has its own stride); q and out hold all of it.
// Whole sequences whose rows lie contiguously go in one backend call; other rows one call each
// (one a token when a step has several, since a token's heads are what lie together).
void AttendRows(Backend& backend, Stream& stream, const AttentionShape& shape, DeviceSpan q,
                const std::vector<KvRow>& rows, int row_begin, int row_end,
                std::span<const int> start, DeviceSpan out);

// AttendRows for a decode step (one token) over 4-bit rows, on the 4-bit codes directly
// (kernels/cpu/attention_q4.h). `shape`'s batch and max_len are ignored. `exact`, when given,
// holds the exact tokens of the whole micro-batch (Q4ExactRows, row r of `rows` at its row r).
void AttendRowsQ4(const kernels::cpu::DecodeAttentionQ4Shape& shape, const float* q,
                  const std::vector<KvRowAddress>& rows, int row_begin, int row_end,
                  const int* start, float* out,
                  const kernels::cpu::Q4ExactRows* exact = nullptr);

}  // namespace strata
