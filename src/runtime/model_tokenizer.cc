#include "src/runtime/model_tokenizer.h"

namespace strata {

Result<std::unique_ptr<Tokenizer>> LoadTokenizerForModel(const Model& model) {
  if (!model.tokenizer_json_path().empty()) {
    return Tokenizer::FromJsonFile(model.tokenizer_json_path());
  }
  const GgufTokenizerData& g = model.gguf_tokenizer();
  if (g.tokens.empty()) {
    return Status::NotFound(model.source() +
                            " has no tokenizer: a Hugging Face model directory needs tokenizer.json, "
                            "a GGUF file needs tokenizer.ggml.* metadata");
  }
  return Tokenizer::FromGgufVocab(ToGgufVocab(g));
}

}  // namespace strata
