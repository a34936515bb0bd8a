// Plain descriptions of the work an op does, as the backend interface takes them. Each backend
// turns them into its kernels' own argument structs, so the code above src/backend never names
// a kernel type.
#pragma once

#include <cstdint>

#include "src/backend/memory.h"

namespace strata {

// Causal attention of `new_tokens` query tokens per sequence over a contiguous cache:
//   q, out: [batch, new_tokens, num_heads, head_dim]
//   k, v:   [batch, num_kv_heads, max_len, head_dim]
// The new tokens sit at cache slots [cache_len - new_tokens, cache_len) (their keys and values
// already written). Sequence b attends slots [start[b], its own slot]; a query with no slot to
// attend gets a zero output. Query head h reads KV head h / (num_heads / num_kv_heads).
struct AttentionShape {
  int batch = 0;
  int new_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_len = 0;
  int cache_len = 0;
  float scale = 1.0f;  // applied to q·k, usually 1/sqrt(head_dim)
};

// How a 4-bit KV cache (kernels/kv_q4_format.h) stores keys, and which tokens it also keeps
// exact: the plan's cache format.
struct KvQ4Format {
  bool rotate_keys = false;      // keys Walsh–Hadamard rotated first (a power-of-two head_dim)
  bool keys_by_channel = false;  // keys by channel: a group of kKvQ4ChannelGroup slots (q4_sizes.h)
                                 // quantized once its last slot is written
  int sink = 0;                  // exact tokens: each sequence's first `sink` real tokens and its
  int window = 0;                // `window` most recent ones (>= kKvQ4ChannelGroup with keys by
                                 // channel: an unfinished group is read exact)
  bool exact() const { return sink + window > 0; }
};

// One step of `tokens` new tokens for each of a micro-batch's `batch` sequences, over its 4-bit
// rows: row r is (sequence r / num_kv_heads, KV head r % num_kv_heads).
//   k_new, v_new: [batch * tokens, num_kv_heads * head_dim] (token-major, as a Linear writes them)
//   q, out (a decode step, tokens == 1): [batch, num_heads, head_dim]
// The new tokens sit at slots [cache_len - tokens, cache_len); sequence b's first real slot is
// start[b] (slots before it are padding). Query head h reads KV head h / (num_heads /
// num_kv_heads).
struct KvQ4Step {
  int batch = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int tokens = 0;
  int cache_len = 0;
  float scale = 1.0f;  // attention: applied to q·k, usually 1/sqrt(head_dim)
  KvQ4Format format;
};

// The largest op of a run, for the scratch a backend reserves once before its token loop
// (Backend::ScratchBytes, ReserveScratch): every op the run gives the backend stays within each
// field. Plain numbers from the model's shapes and the plan's block (src/memory/placement.h,
// OpLimitsOf); the default (all zero) is a run of no ops.
struct OpLimits {
  int64_t rows = 0;                    // token rows of one op's activations (Linear's m, Embed's
                                       // ids, Rope's positions): a micro-batch's prefill
  int64_t linear_in = 0;               // the widest Linear input, features (and the widest
                                       // LayerNorm / RmsNorm row)
  int64_t linear_out = 0;              // the widest Linear output, features
  int64_t linear_weight_elements = 0;  // the largest Linear weight, out x in elements
  bool half_weights = false;           // some weight the ops read is F16 or BF16 (else all F32)
  int64_t rounded_weight_elements = 0;  // with fp16/bf16 activations: the largest Linear weight
                                        // of another type (F32, or the other half type), which
                                        // a GEMM may round first; 0 when all are of theirs
  int batch = 0;                       // sequences of one op: attention's, and the rows
                                       // SampleTokens and ScoreTokens take
  int vocab = 0;                       // logits per row of SampleTokens and ScoreTokens
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int step_tokens = 0;                 // new tokens per sequence in one step (the prompt's, at
                                       // the prefill)
  int max_len = 0;                     // cache slots per sequence: the longest cache_len
  bool kv_q4 = false;                  // the 4-bit cache ops run (WriteKvQ4, AttendKvQ4 ...)
  KvQ4Format kv_q4_format;             // ... in this format
  SpanType activations = SpanType::kF32;  // the activations' element type (ActivationType)
};

// How a token is drawn from one row of logits: greedy (temperature <= 0 or top_k == 1: the
// largest logit, lowest id on ties), else from softmax(logits / temperature) cut to the top_k
// most likely (0 or -1: all) and then to the smallest prefix whose mass reaches top_p, by a
// uniform draw that depends only on (seed, step), the index of the token being drawn, so that a
// seeded request gives the same text whatever it is batched with (kernels/cpu/sampling.h).
struct SamplingSpec {
  float temperature = 1.0f;
  float top_p = 1.0f;  // (0, 1]
  int top_k = 0;
  uint64_t seed = 0;
  uint64_t step = 0;
};

// Rotary position embedding: the base frequency and the scaling a model's config asks for
// (transformers' rope_scaling types). Fields a kind does not use are ignored.
struct RopeSpec {
  enum class Scaling { kNone, kLinear, kLlama3, kFactors, kYarn };
  int head_dim = 0;
  float theta = 10000.0f;
  Scaling scaling = Scaling::kNone;
  float factor = 1.0f;                  // kLinear, kLlama3, kYarn
  float low_freq_factor = 1.0f;         // kLlama3
  float high_freq_factor = 4.0f;        // kLlama3
  int original_max_positions = 8192;    // kLlama3, kYarn
  const float* freq_factors = nullptr;  // kFactors: head_dim / 2 divisors of the frequencies
  float beta_fast = 32.0f;              // kYarn
  float beta_slow = 1.0f;               // kYarn
  bool truncate = true;                 // kYarn
};

// Fills inv_freq[spec.head_dim / 2] with the (scaled) inverse frequencies, in fp32 the way
// transformers computes them; every backend's Rope takes this table.
void RopeInverseFrequencies(const RopeSpec& spec, float* inv_freq);

}  // namespace strata
