// BpeModel: the merge step of byte-level BPE, exactly as Hugging Face tokenizers' BPE model runs
// it (merge_all in word.rs): a pre-token's bytes start as single-byte tokens and the pair with the
// lowest merge rank (then the leftmost) merges until no ranked pair is left. Works on raw bytes;
// the byte-level spelling of the vocabulary is undone at construction. Thread-safe (const).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/core/status.h"

namespace strata {

class BpeModel {
 public:
  struct Options {
    bool ignore_merges = false;  // a pre-token that is itself in the vocabulary is emitted whole
    int32_t unk_id = -1;         // stands for a byte missing from the vocabulary; -1 drops it
    bool fuse_unk = false;       // adjacent unknown bytes give one unk_id
  };

  // `vocab` pairs byte-level spellings ("Ġthe") with ids; spellings outside the byte-level
  // alphabet are kept out of matching (no pre-token can produce them). `merges` are pairs of
  // spellings, highest priority first. A merge whose parts or result are missing from `vocab`
  // gives Corrupt, as tokenizers refuses such a file.
  static Result<BpeModel> Create(const std::vector<std::pair<std::string, int32_t>>& vocab,
                                 const std::vector<std::pair<std::string, std::string>>& merges,
                                 Options options);

  // Appends the ids of one pre-token, given as raw bytes.
  void Encode(std::string_view word, std::vector<int32_t>* ids) const;

 private:
  struct MergeTarget {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const MergeTarget* FindMerge(int32_t left, int32_t right) const;

  Options options_;
  std::unordered_map<std::string, int32_t> ids_by_bytes_;
  std::unordered_map<uint64_t, MergeTarget> merges_;
  std::array<int32_t, 256> byte_ids_{};  // single-byte tokens; -1 when missing
};

}  // namespace strata
