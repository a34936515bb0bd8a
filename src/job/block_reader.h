// BlockReader: turns a job's input file into blocks ready to run. It streams the input, parses
// and validates each line, tokenizes prompts, checks them against the model's context, skips
// requests an earlier run already answered (resume), turns duplicate ids into errors, and groups
// the runnable requests into blocks of a fixed size. Errors keep their place in input order, so
// a block's output lines come out in the order of its input lines.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <variant>
#include <vector>

#include "src/core/status.h"
#include "src/job/jsonl_reader.h"
#include "src/job/output_writer.h"
#include "src/job/request.h"
#include "src/tokenizer/tokenizer.h"

namespace strata {

struct BlockReaderOptions {
  int block_size = 16;        // runnable requests per block, >= 1
  int context_length = 0;     // prompt tokens + max_tokens must not exceed it; > 0
  bool add_bos = true;        // prepend the tokenizer's BOS to every prompt
  JsonlReaderOptions reader;
};

struct TokenizedRequest {
  Request request;
  std::vector<int32_t> prompt_ids;
};

// One input line's fate within a block: a request to run, or an error line to write.
using BlockEntry = std::variant<TokenizedRequest, RequestError>;

struct Block {
  std::vector<BlockEntry> entries;  // input order
  int runnable() const;             // how many entries are TokenizedRequests
};

struct BlockReaderStats {
  uint64_t lines = 0;            // non-blank input lines seen
  uint64_t already_done = 0;     // skipped: answered in the output by an earlier run
  uint64_t errors = 0;           // error lines produced by this run
};

// Not thread-safe.
class BlockReader {
 public:
  // REQUIRES: `tokenizer` outlives the reader. `journal` lists what the output already holds.
  static Result<std::unique_ptr<BlockReader>> Open(const std::string& path,
                                                   const Tokenizer& tokenizer,
                                                   const BlockReaderOptions& options,
                                                   OutputJournal journal);

  // Fills *block with the next block (up to block_size runnable requests and the error entries
  // between them) and returns true, or returns false when the input is exhausted. A reader error
  // (e.g. a damaged .zst) is returned after the lines before it have been handed out.
  Result<bool> Next(Block* block);

  const BlockReaderStats& stats() const { return stats_; }

 private:
  BlockReader(std::unique_ptr<JsonlReader> reader, const Tokenizer& tokenizer,
              const BlockReaderOptions& options, OutputJournal journal)
      : reader_(std::move(reader)), tokenizer_(tokenizer), options_(options),
        journal_(std::move(journal)) {}

  // Classifies one line; returns false when the line needs no output (already answered).
  bool Classify(const JsonlLine& line, BlockEntry* entry);

  std::unique_ptr<JsonlReader> reader_;
  const Tokenizer& tokenizer_;
  BlockReaderOptions options_;
  OutputJournal journal_;
  std::unordered_set<std::string> seen_ids_;
  BlockReaderStats stats_;
  Status pending_error_;
};

}  // namespace strata
