// BlockReader: turns a job's input file into blocks ready to run. It streams the input, parses
// and validates each line, keeps the lines of its shard, renders chat requests with the model's
// chat template, tokenizes prompts, checks them against the model's context, skips requests an
// earlier run already answered (resume), turns duplicate ids into errors, and groups the
// runnable requests into blocks.
//
// Blocks from real data: the reader reads ahead up to `sort_window` runnable requests, sorts them
// by prompt length (ties by input line) and cuts them into blocks of `block_size`, so a block
// holds prompts of similar length and little padding. Fewer than block_size requests left over
// at the end of a window wait for the next window (they are the longest of this one); the last
// window flushes everything. Memory stays bounded by the window, whatever the input size.
// Output order: blocks come out in this sorted order; within a block, entries are in input order.
// The error lines read while a window filled travel with the first block cut from it (a window
// of only errors becomes a block of only errors). With sort_window <= block_size every block is
// the next block_size requests of the input, and the output is in input order.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_set>
#include <variant>
#include <vector>

#include "src/core/status.h"
#include "src/job/chat_template.h"
#include "src/job/jsonl_reader.h"
#include "src/job/output_writer.h"
#include "src/job/request.h"
#include "src/job/shard.h"
#include "src/tokenizer/tokenizer.h"

namespace strata {

struct BlockReaderOptions {
  int block_size = 16;        // runnable requests per block, >= 1
  int sort_window = 0;        // runnable requests sorted together; <= block_size: input order
  int context_length = 0;     // prompt tokens + max_tokens must not exceed it; > 0
  bool add_bos = true;        // prepend the tokenizer's BOS to every plain/completions prompt
  ShardSpec shard;            // only lines of this shard are read (shard.h); default: all
  ChatTemplate chat_template; // renders chat requests; default: none (they get errors)
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
  uint64_t lines = 0;            // input lines seen
  uint64_t other_shard = 0;      // skipped: they belong to another shard
  uint64_t already_done = 0;     // skipped: answered in the output by an earlier run
  uint64_t errors = 0;           // error entries produced by this run
  uint64_t requests = 0;         // runnable entries produced by this run
  bool input_done = false;       // the whole input has been read
};

// Error codes added here (see request.h for the parser's): duplicate_custom_id,
// context_length_exceeded, unsupported_chat_template.
// Not thread-safe.
class BlockReader {
 public:
  // REQUIRES: `tokenizer` outlives the reader. `journal` lists what the output already holds.
  static Result<std::unique_ptr<BlockReader>> Open(const std::string& path,
                                                   const Tokenizer& tokenizer,
                                                   const BlockReaderOptions& options,
                                                   OutputJournal journal);

  // Fills *block with the next block and returns true, or returns false when the input is
  // exhausted. A reader error (e.g. a damaged .zst) is returned after the blocks of the lines
  // before it have been handed out.
  Result<bool> Next(Block* block);

  const BlockReaderStats& stats() const { return stats_; }

 private:
  BlockReader(std::unique_ptr<JsonlReader> reader, const Tokenizer& tokenizer,
              const BlockReaderOptions& options, OutputJournal journal)
      : reader_(std::move(reader)), tokenizer_(tokenizer), options_(options),
        journal_(std::move(journal)) {}

  // Reads the next window and cuts it into ready_ blocks.
  void FillWindow();
  // Classifies one line; returns false when the line needs no output here (another shard's, or
  // already answered).
  bool Classify(const JsonlLine& line, BlockEntry* entry);
  // Tokenizes a parsed request, or explains why it cannot run.
  BlockEntry Tokenize(Request r) const;

  std::unique_ptr<JsonlReader> reader_;
  const Tokenizer& tokenizer_;
  BlockReaderOptions options_;
  OutputJournal journal_;
  std::unordered_set<std::string> seen_ids_;
  RequestFormat last_format_ = RequestFormat::kPlain;  // of the last line that was an object
  std::vector<TokenizedRequest> pending_;  // read, not yet in a block
  std::deque<Block> ready_;
  BlockReaderStats stats_;
  Status pending_error_;
};

}  // namespace strata
