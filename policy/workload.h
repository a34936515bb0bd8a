// Workload: what a job asks of the model — prompt length, generation length, number of prompts.
#pragma once

#include <cstdint>

#include "policy/model_spec.h"
#include "src/core/status.h"

namespace strata {

struct Workload {
  int prompt_len = 0;       // tokens per prompt (a block's prompts are padded to it)
  int gen_len = 0;          // tokens generated per prompt, the first by prefill
  int64_t num_prompts = 0;  // prompts in the job; blocks = ceil(num_prompts / block size).
                            // 0: an open-ended job, measured per block as FlexGen does

  // KV cache slots per sequence.
  int max_len() const { return prompt_len + gen_len; }

  // Ok, or InvalidArgument when a length is not positive or num_prompts negative, OutOfRange
  // when prompt + generation exceeds the model's context (max_position_embeddings).
  Status Validate(const ModelSpec& model) const;
};

}  // namespace strata
