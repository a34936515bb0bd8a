#include "src/job/block_reader.h"

namespace strata {

int Block::runnable() const {
  int n = 0;
  for (const BlockEntry& e : entries) n += std::holds_alternative<TokenizedRequest>(e) ? 1 : 0;
  return n;
}

Result<std::unique_ptr<BlockReader>> BlockReader::Open(const std::string& path,
                                                       const Tokenizer& tokenizer,
                                                       const BlockReaderOptions& options,
                                                       OutputJournal journal) {
  if (options.block_size < 1 || options.context_length < 1) {
    return Status::InvalidArgument("block size and context length must be positive");
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<JsonlReader> reader,
                          JsonlReader::Open(path, options.reader));
  return std::unique_ptr<BlockReader>(
      new BlockReader(std::move(reader), tokenizer, options, std::move(journal)));
}

bool BlockReader::Classify(const JsonlLine& line, BlockEntry* entry) {
  ++stats_.lines;
  if (line.too_long) {
    if (journal_.error_lines.count(line.line_number)) return false;
    *entry = LineTooLongError(line.line_number, options_.reader.max_line_bytes);
    return true;
  }
  ParsedLine parsed = ParseRequestLine(line.text, line.line_number);
  if (parsed.error) {
    const RequestError& e = *parsed.error;
    const bool done = e.custom_id.empty() ? journal_.error_lines.count(line.line_number) > 0
                                          : journal_.custom_ids.count(e.custom_id) > 0;
    if (done) return false;
    seen_ids_.insert(e.custom_id);
    *entry = e;
    return true;
  }
  Request& r = *parsed.request;
  const bool in_journal = journal_.custom_ids.count(r.custom_id) > 0;
  if (!seen_ids_.insert(r.custom_id).second) {
    // A later line reusing an id gets an error line; the id's first line owns its output. Once
    // the id is in the journal, its line (or this error) was already written.
    if (in_journal) return false;
    *entry = RequestError{r.custom_id, r.line_number, "duplicate_custom_id",
                          "custom_id \"" + r.custom_id +
                              "\" was already used by an earlier line; give every request a "
                              "unique custom_id"};
    return true;
  }
  if (in_journal) {
    ++stats_.already_done;
    return false;
  }
  TokenizedRequest t;
  t.prompt_ids = tokenizer_.Encode(r.prompt, options_.add_bos);
  const int64_t need = static_cast<int64_t>(t.prompt_ids.size()) + r.sampling.max_tokens;
  if (need > options_.context_length) {
    *entry = RequestError{
        r.custom_id, r.line_number, "context_length_exceeded",
        "the prompt has " + std::to_string(t.prompt_ids.size()) + " tokens and max_tokens is " +
            std::to_string(r.sampling.max_tokens) + ", together more than the model's context of " +
            std::to_string(options_.context_length) +
            " tokens; shorten the prompt or lower max_tokens"};
    return true;
  }
  t.request = std::move(r);
  *entry = std::move(t);
  return true;
}

Result<bool> BlockReader::Next(Block* block) {
  block->entries.clear();
  if (!pending_error_.ok()) return pending_error_;
  int runnable = 0;
  JsonlLine line;
  while (runnable < options_.block_size) {
    Result<bool> more = reader_->Next(&line);
    if (!more.ok()) {
      pending_error_ = more.status();
      if (block->entries.empty()) return pending_error_;
      break;
    }
    if (!*more) break;
    BlockEntry entry;
    if (!Classify(line, &entry)) continue;
    if (std::holds_alternative<TokenizedRequest>(entry)) {
      ++runnable;
    } else {
      ++stats_.errors;
    }
    block->entries.push_back(std::move(entry));
  }
  return !block->entries.empty();
}

}  // namespace strata
