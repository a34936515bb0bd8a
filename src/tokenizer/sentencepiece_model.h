// SentencePieceModelTokenizer: the tokenizer of a Hugging Face directory that ships a SentencePiece
// `tokenizer.model` (Llama 2, Mistral 7B, CodeLlama, Yi, TinyLlama), run by the sentencepiece
// library itself (Debian's libsentencepiece). Control pieces written in the text ("<s>", "</s>")
// are cut out first and encoded as themselves; every run of text between them is encoded by
// sentencepiece, dummy prefix included, as transformers' Llama tokenizer does. Pieces decode as
// the GGUF SentencePiece tokenizer's do (spm_tokenizer.h): "▁" as a space, a byte piece as its
// byte, so a completion keeps the space that separates it from its prompt. Thread-safe (const
// after construction; sentencepiece's Encode is const).
#pragma once

#include <memory>
#include <string>

#include "src/core/status.h"
#include "src/tokenizer/tokenizer.h"

namespace strata {

// Loads `path`. `add_bos`: whether BOS is prepended by default (tokenizer_config.json's
// add_bos_token, true for Llama tokenizers). Errors: NotFound for a missing file, Corrupt for one
// sentencepiece cannot load (its message included).
Result<std::unique_ptr<Tokenizer>> LoadSentencePieceModel(const std::string& path, bool add_bos);

}  // namespace strata
