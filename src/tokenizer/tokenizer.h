// Tokenizer: byte-level BPE (GPT-2 / OPT / Llama-3 / SmolLM style) built from a Hugging Face
// tokenizer.json or from a GGUF vocabulary. Pre-tokenizer regexes run through PCRE2. Special
// (added) tokens that appear literally in the text are matched first and encoded as themselves,
// as transformers does by default. Thread-safe after construction (all methods are const).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/status.h"

namespace strata {

// A GGUF vocabulary as plain data (tokenizer.ggml.* keys).
struct GgufVocab {
  std::string model;                 // must be "gpt2" (byte-level BPE)
  std::string pre;                   // pre-tokenizer name: "smollm", "llama-bpe", "gpt-2", "default", ...
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
  std::vector<std::string> merges;   // "left right"
  int bos_token_id = -1;
  int eos_token_id = -1;
  int eot_token_id = -1;
  int pad_token_id = -1;
  bool add_bos = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Reads tokenizer.json (model type "BPE" with byte-level pre-tokenizer/decoder). Reads
  // tokenizer_config.json from the same directory when present (bos/eos tokens, add_bos_token).
  static Result<std::unique_ptr<Tokenizer>> FromJsonFile(const std::string& path);
  static Result<std::unique_ptr<Tokenizer>> FromGgufVocab(const GgufVocab& vocab);

  // Token ids for `text`; prepends BOS when `add_bos` and the tokenizer defines one.
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
// incomplete character are held until the character completes. Not thread-safe.
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}
  // Returns the text that became complete with `id` (possibly empty).
  std::string Push(int32_t id);
  // Returns what is still held; invalid trailing bytes become U+FFFD.
  std::string Finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace strata
