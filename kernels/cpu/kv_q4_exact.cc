#include "kernels/cpu/kv_q4_exact.h"

#include <cstring>

#include "kernels/cpu/hadamard.h"

namespace strata::kernels::cpu {

long ExactRowsFloats(int batch, int num_kv_heads, int head_dim, int sink, int window) {
  return static_cast<long>(batch) * num_kv_heads * (sink + window) * head_dim;
}

void WriteExactRows(int batch, int num_kv_heads, int head_dim, int sink, int window,
                    const float* k_rows, const float* v_rows, int tokens, int first_slot,
                    const int* start, bool rotate_keys, float* keys, float* values) {
  const int d = head_dim;
  const int rows = sink + window;
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < tokens; ++t) {
      const int token = first_slot + t - start[b];
      if (token < 0) continue;  // padding
      int at;
      if (token < sink) {
        at = token;
      } else if (window > 0) {
        at = sink + token % window;
      } else {
        continue;
      }
      const long src = (static_cast<long>(b) * tokens + t) * num_kv_heads * d;
      for (int h = 0; h < num_kv_heads; ++h) {
        const long dst = ((static_cast<long>(b) * num_kv_heads + h) * rows + at) * d;
        std::memcpy(keys + dst, k_rows + src + static_cast<long>(h) * d, sizeof(float) * d);
        std::memcpy(values + dst, v_rows + src + static_cast<long>(h) * d, sizeof(float) * d);
        if (rotate_keys) HadamardRotate(keys + dst, 1, d);
      }
    }
  }
}

}  // namespace strata::kernels::cpu
