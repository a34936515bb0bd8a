#include "src/runtime/generation.h"

#include <algorithm>

namespace strata {

std::vector<int32_t> EndOfGenerationIds(const Tokenizer& tokenizer, const ModelConfig& config) {
  std::vector<int32_t> ids;
  auto add = [&](int32_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  add(tokenizer.eos_id());
  add(config.eos_token_id);
  for (const char* name : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>"}) {
    add(tokenizer.SpecialTokenId(name));
  }
  return ids;
}

}  // namespace strata
