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
  GgufVocab vocab;
  vocab.model = g.model;
  vocab.pre = g.pre;
  vocab.tokens = g.tokens;
  vocab.token_types = g.token_types;
  vocab.merges = g.merges;
  vocab.bos_token_id = g.bos_token_id;
  vocab.eos_token_id = g.eos_token_id;
  vocab.eot_token_id = g.eot_token_id;
  vocab.pad_token_id = g.pad_token_id;
  vocab.add_bos = g.add_bos;
  return Tokenizer::FromGgufVocab(vocab);
}

}  // namespace strata
