#include "policy/workload.h"

#include <string>

namespace strata {

Status Workload::Validate(const ModelSpec& model) const {
  if (prompt_len < 1) {
    return Status::InvalidArgument("prompt length must be at least 1, got " +
                                   std::to_string(prompt_len));
  }
  if (gen_len < 1) {
    return Status::InvalidArgument("generation length must be at least 1, got " +
                                   std::to_string(gen_len));
  }
  if (num_prompts < 0) {
    return Status::InvalidArgument("number of prompts must not be negative, got " +
                                   std::to_string(num_prompts));
  }
  if (static_cast<int64_t>(prompt_len) + gen_len > model.max_position_embeddings) {
    return Status::OutOfRange("prompt length " + std::to_string(prompt_len) +
                              " + generation length " + std::to_string(gen_len) + " = " +
                              std::to_string(int64_t{prompt_len} + gen_len) +
                              " exceeds the context of " + model.name + " (" +
                              std::to_string(model.max_position_embeddings) +
                              " positions); shorten the prompts or generate fewer tokens");
  }
  return Status::Ok();
}

}  // namespace strata
