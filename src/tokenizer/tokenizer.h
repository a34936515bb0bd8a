// Tokenizer: byte-level BPE (GPT-2 / OPT / Llama-3 / SmolLM style) built from a Hugging Face
// tokenizer.json or from a GGUF vocabulary, and SentencePiece (Llama 2 style) from a GGUF one.
// Pre-tokenizer regexes run through PCRE2. Special (added) tokens that appear literally in the text
// are matched first and encoded as themselves, as transformers does by default. Thread-safe after
// construction (all methods are const).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/status.h"

namespace strata {

// A GGUF vocabulary as plain data (tokenizer.ggml.* keys).
struct GgufVocab {
  std::string model;  // "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;    // pre-tokenizer name: "smollm", "llama-bpe", "gpt-2", "default", ...
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
  std::vector<std::string> merges;   // "left right" (gpt2)
  std::vector<float> scores;         // by id (llama)
  bool add_space_prefix = true;      // a space before the text (llama)
  int bos_token_id = -1;
  int eos_token_id = -1;
  int eot_token_id = -1;
  int pad_token_id = -1;
  std::optional<bool> add_bos;  // absent: llama.cpp's default for `model` and `pre`
};

// A GgufVocab from any record with the same field names, such as strata::GgufTokenizerData of
// src/model/model.h (which this module may not include):
//   Tokenizer::FromGgufVocab(ToGgufVocab(model.gguf_tokenizer()))
template <typename GgufTokenizerRecord>
GgufVocab ToGgufVocab(const GgufTokenizerRecord& record) {
  GgufVocab vocab;
  vocab.model = record.model;
  vocab.pre = record.pre;
  vocab.tokens = record.tokens;
  vocab.token_types = record.token_types;
  vocab.merges = record.merges;
  vocab.scores = record.scores;
  vocab.add_space_prefix = record.add_space_prefix;
  vocab.bos_token_id = record.bos_token_id;
  vocab.eos_token_id = record.eos_token_id;
  vocab.eot_token_id = record.eot_token_id;
  vocab.pad_token_id = record.pad_token_id;
  vocab.add_bos = record.add_bos;
  return vocab;
}

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Reads tokenizer.json (model type "BPE" with byte-level pre-tokenizer/decoder). Reads
  // tokenizer_config.json from the same directory when present (bos/eos tokens). Supported:
  // normalizer null (NFC is accepted with a warning and not applied: text already in NFC, which is
  // nearly all text, tokenizes identically); pre_tokenizer ByteLevel, Split (Regex or String
  // pattern, any behaviour, invert), Digits, and Sequences of them, with a ByteLevel step
  // somewhere; decoder ByteLevel; post_processor null, ByteLevel, TemplateProcessing or a Sequence
  // of them. BOS as transformers 5: the special token the post_processor's "single" template puts
  // before $A is prepended by default, and nothing otherwise (tokenizer_config.json's add_bos_token
  // is ignored, as transformers drops it when tokenizer.json exists); bos_id() is that token, else
  // tokenizer_config.json's bos_token; eos_id() is its eos_token. Anything else gives Unsupported;
  // a malformed file gives Corrupt; a missing one NotFound.
  static Result<std::unique_ptr<Tokenizer>> FromJsonFile(const std::string& path);
  // Builds the tokenizer llama.cpp would from a GGUF vocabulary. `model` "llama" is SentencePiece
  // (src/tokenizer/spm_tokenizer.h: pieces, scores and token types; the rest of this comment is
  // about "gpt2").
  // Pre-tokenizer by `pre`: "default"/"gpt-2" GPT-2's regex; "llama-bpe"/"llama3"/"llama-v3" and
  // llama.cpp's other LLAMA3 names: Llama 3's regex with ignore_merges; "tekken": Mistral's
  // Tekken regex with ignore_merges; "qwen2" (and aliases): Qwen2's regex; "smollm" and
  // llama.cpp's other users of the same split ("starcoder", "refact", "command-r", "codeshell",
  // "exaone", "minerva"): each digit alone, then GPT-2's regex; anything else GPT-2's regex with a
  // warning. BOS/EOS ids and add_bos are taken as given (llama.cpp defaults add_bos to true for
  // the LLAMA3 names and "tekken" when the file has no tokenizer.ggml.add_bos_token, which
  // converted files always carry; strata's GGUF reader defaults it to false there). Control
  // (3) and user-defined (4) tokens are matched literally in the text; control tokens are special.
  static Result<std::unique_ptr<Tokenizer>> FromGgufVocab(const GgufVocab& vocab);

  // Token ids for `text`; prepends BOS when `add_bos` and the tokenizer defines one. Any bytes are
  // accepted: invalid UTF-8 never matches a pre-tokenizer pattern and is encoded byte by byte. A
  // byte the vocabulary has no token for is dropped, as tokenizers and llama.cpp do (SmolLM2 lacks
  // C0, C1, F1, F2, F5-FF and a few control bytes). So Decode(Encode(x)) == x unless x holds such
  // a byte or the tokenizer is lossy by design (a prefix space, a removing split, an lstrip/rstrip
  // added token).
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_bos) const = 0;
  // The raw bytes a token stands for (after undoing the byte-level mapping). Special tokens give
  // their literal text. REQUIRES: 0 <= id < vocab_size().
  virtual std::string TokenBytes(int32_t id) const = 0;
  // Concatenated bytes of `ids`; special tokens included unless `skip_special`.
  virtual std::string Decode(const std::vector<int32_t>& ids, bool skip_special) const = 0;

  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;  // -1 when none
  virtual int eos_id() const = 0;  // -1 when none
  // Whether BOS is prepended by default (OPT: yes; Llama 3: yes; SmolLM2 GGUF: per metadata).
  virtual bool add_bos_by_default() const = 0;
  virtual bool IsSpecial(int32_t id) const = 0;
  // Id of a special token by its text ("<|im_end|>"), or -1.
  virtual int32_t SpecialTokenId(std::string_view text) const = 0;
};

// Turns a stream of token ids into text that never splits a UTF-8 character: bytes of an
// incomplete character are held until the character completes, and dropped if the stream ends
// first. Not thread-safe.
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}
  // Returns the text that became complete with `id` (possibly empty). Bytes that can never form
  // a character come out as U+FFFD at once; ids outside the vocabulary, and special tokens when
  // `skip_special`, add nothing.
  std::string Push(int32_t id);
  // Ends the stream. What is still held is always the start of a character cut off by the end
  // of the ids (Push returns everything else); it is dropped, never replaced by U+FFFD, so text
  // cut inside a character ends at the last whole one. The next Push starts a new stream.
  void Finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace strata
