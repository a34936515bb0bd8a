// Keys of the 4-bit cache quantized by channel (kernels/kv_q4_format.h, "Keys by channel"): the
// writer, which quantizes a group of kQ4ChannelGroup slots once its last slot is written, and
// the reader every attention path and test checks against. Keys are quantized as they come (no
// rotation or smoothing): per channel over 32 tokens, a channel's own range sets its step, so
// the few large channels of a key no longer stretch every other channel's (KIVI, KVQuant).
#pragma once

#include <cstdint>

namespace strata::kernels::cpu {

// Quantizes one group: keys[j] is its j-th token's key (head_dim floats), or null for a token
// that is not fitted (an exact sink token), whose codes become 0. codes and params point at the
// group's first slot in the row's planes; the params past the 2 * head_dim the channels use are
// zeroed (kv_q4_format.h). All null gives zero codes and params.
void QuantizeKeyGroupByChannel(const float* const* keys, int head_dim, uint8_t* codes,
                               uint16_t* params);

// Key of one slot of a written group: x[c] = code * scale[c] + minimum[c], codes the slot's,
// group_params its group's first slot's.
void DequantizeKeyByChannel(const uint8_t* codes, const uint16_t* group_params, int head_dim,
                            float* x);

// After slots [first_slot, first_slot + tokens) of one row (a sequence's KV head, whose token i
// sits at slot start + i) were written, quantizes every group whose last token lies among them.
// A token's key comes from new_keys (token-major, `new_stride` floats apart) when it was written
// now, otherwise from the row's exact rows (Q4ExactRows' rule: ring row sink + i % window). The
// first `sink` tokens are not fitted. codes and params are the row's planes from slot 0 (params
// Q4ChannelParamHalves(head_dim) per slot).
// REQUIRES: window >= kQ4ChannelGroup (an unfinished group's tokens are all in the ring);
// exact_keys as before this write's tokens went in, or after them when tokens == 1.
void WriteKeyGroupsByChannel(int head_dim, int sink, int window, int start, int first_slot,
                             int tokens, const float* new_keys, long new_stride,
                             const float* exact_keys, uint8_t* codes, uint16_t* params);

}  // namespace strata::kernels::cpu
