// Plain-data parameter types of the kernels in kernels/cuda. Kept apart from the .cuh files so that
// host-only C++ (the CUDA backend, its tests and benchmarks, compiled by the host compiler) can
// name them; every .cuh that takes one includes this header.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::kernels::cuda {

// Element types of weight tables the kernels read (the kernels' own twin of strata::DType, since
// kernels/ depends on std and CUDA only).
enum class ElemType { kF32, kF16, kBF16 };

// One layer's keys (or values) in the 4-bit cache: planes as in kernels/kv_q4_format.h.
struct Q4CacheShape {
  int batch = 0;
  int num_kv_heads = 0;
  int max_len = 0;
  int head_dim = 0;
};

// Shapes of one decode step over a block of `batch` sequences (as kernels/cpu/attention_q4.h).
//   q, out: [batch, num_heads, head_dim] fp32; the query token sits at cache slot cache_len - 1,
//   which already holds its own key and value. Sequence b attends slots [start[b], cache_len); a
//   sequence with nothing to attend (start[b] >= cache_len) gets a zero output. Query head h reads
//   KV head h / (num_heads / num_kv_heads).
struct DecodeAttentionShape {
  int batch = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_len = 0;
  int cache_len = 0;
  float scale = 1.0f;         // applied to q·k, usually 1/sqrt(head_dim)
  bool keys_rotated = false;  // keys were stored Walsh–Hadamard rotated; queries are rotated alike
};

enum class DecodeCacheKind { kQ4, kF16 };

// Host-side plan for one decode shape, made once and replayed every step (cache_len may change
// freely between steps as long as it stays <= max_len).
struct DecodeAttentionPlan {
  int num_splits = 1;          // thread blocks per (sequence, KV head, head tile)
  size_t workspace_bytes = 0;  // device scratch the launcher needs; 0 when num_splits == 1
};

// As kernels::cpu::AttentionShape (kernels/cpu/attention.h):
//   q:     [batch, new_tokens, num_heads, head_dim]
//   k, v:  [batch, num_kv_heads, max_len, head_dim], already holding the new tokens
//   out:   [batch, new_tokens, num_heads, head_dim]
// New tokens occupy slots [cache_len - new_tokens, cache_len); sequence b's keys start at slot
// start[b]; a query whose slot lies before start[b] gets a zero output.
struct CausalAttentionShape {
  int batch = 0;
  int new_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_len = 0;
  int cache_len = 0;
  float scale = 1.0f;
};

// Host-side plan of the tensor-core prefill attention (attention_prefill_f16.cuh), made once per
// shape by PlanPrefillAttention.
struct PrefillAttentionPlan {
  int warps = 4;       // warps per thread block, 4 or 8
  int warp_rows = 16;  // packed query rows per warp, 16 or 32 (32 only with 4 warps)
};

// One request's sampling settings for one step (strata::SamplingSpec, src/backend/shapes.h).
struct SamplingParams {
  float temperature = 1.0f;  // <= 0: greedy
  float top_p = 1.0f;        // nucleus mass kept, (0, 1]
  int top_k = 0;             // keep the k most likely; 0 or -1 disables; 1 is greedy
  int reserved = 0;
  uint64_t seed = 0;
  uint64_t step = 0;  // index of the token being drawn
};

}  // namespace strata::kernels::cuda
