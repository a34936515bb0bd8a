// The tokenizer that belongs to a loaded model: its tokenizer.json for a Hugging Face directory
// (or, where that is a SentencePiece one strata refuses, the tokenizer.model beside it), or the
// vocabulary in its GGUF metadata.
#pragma once

#include <memory>

#include "src/core/status.h"
#include "src/model/model.h"
#include "src/tokenizer/tokenizer.h"

namespace strata {

// Fails with NotFound when the model carries no tokenizer, naming what was looked for.
Result<std::unique_ptr<Tokenizer>> LoadTokenizerForModel(const Model& model);

}  // namespace strata
