#include "src/runtime/model_tokenizer.h"

#include <filesystem>

#include "src/core/log.h"
#include "src/model/json_file.h"
#include "src/model/store.h"
#include "src/tokenizer/sentencepiece_model.h"

namespace strata {
namespace {

// A Hugging Face directory's SentencePiece model (Llama 2 style), read when its tokenizer.json is
// one strata cannot run (a Prepend/Replace normalizer, byte fallback); BOS by default as
// tokenizer_config.json's add_bos_token says (true for Llama tokenizers when absent).
Result<std::unique_ptr<Tokenizer>> SentencePieceBeside(const std::string& tokenizer_json,
                                                       const Status& refusal) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(tokenizer_json).parent_path();
  std::error_code ec;
  if (!fs::is_regular_file(dir / kSentencePieceModelName, ec)) return refusal;
  bool add_bos = true;
  if (fs::is_regular_file(dir / "tokenizer_config.json", ec)) {
    Result<nlohmann::json> config = ReadJsonFile((dir / "tokenizer_config.json").string());
    if (config.ok()) add_bos = JsonBool(*config, "add_bos_token").value_or(true);
  }
  LogInfo("tokenizer: " + tokenizer_json + " is not byte-level BPE (" + refusal.message() +
          "); using " + (dir / kSentencePieceModelName).string() + " with sentencepiece");
  return LoadSentencePieceModel((dir / kSentencePieceModelName).string(), add_bos);
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadTokenizerForModel(const Model& model) {
  if (!model.tokenizer_json_path().empty()) {
    Result<std::unique_ptr<Tokenizer>> t = Tokenizer::FromJsonFile(model.tokenizer_json_path());
    if (!t.ok() && t.status().code() == StatusCode::kUnsupported) {
      return SentencePieceBeside(model.tokenizer_json_path(), t.status());
    }
    return t;
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
