#include "src/job/block_reader.h"

#include <algorithm>

namespace strata {
namespace {

uint64_t LineOf(const BlockEntry& e) {
  if (const auto* t = std::get_if<TokenizedRequest>(&e)) return t->request.line_number;
  return std::get<RequestError>(e).line_number;
}

}  // namespace

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

BlockEntry BlockReader::Tokenize(Request r) const {
  const auto error = [&](const char* code, std::string message) {
    return RequestError{r.custom_id, r.line_number, code, std::move(message), r.format};
  };
  bool add_bos = options_.add_bos;
  if (r.format == RequestFormat::kOpenAiChat) {
    Result<std::string> prompt = options_.chat_template.Render(r.messages);
    if (!prompt.ok()) return error("unsupported_chat_template", prompt.status().message());
    r.prompt = std::move(*prompt);
    r.messages.clear();
    add_bos = options_.chat_template.adds_bos();
  }
  TokenizedRequest t;
  t.prompt_ids = tokenizer_.Encode(r.prompt, add_bos);
  const int64_t need = static_cast<int64_t>(t.prompt_ids.size()) + r.sampling.max_tokens;
  if (t.prompt_ids.empty()) {
    return error("empty_prompt", "the prompt encodes to no tokens; give it text");
  }
  if (need > options_.context_length) {
    return error("context_length_exceeded",
                 "the prompt has " + std::to_string(t.prompt_ids.size()) +
                     " tokens and max_tokens is " + std::to_string(r.sampling.max_tokens) +
                     ", together more than the model's context of " +
                     std::to_string(options_.context_length) +
                     " tokens; shorten the prompt or lower max_tokens");
  }
  t.request = std::move(r);
  return t;
}

bool BlockReader::Classify(const JsonlLine& line, BlockEntry* entry) {
  ++stats_.lines;
  const uint64_t n = line.line_number;
  ParsedLine parsed;
  if (line.too_long) {
    parsed.error = LineTooLongError(n, options_.reader.max_line_bytes);
  } else {
    parsed = ParseRequestLine(line.text, n);
  }
  // A line that is not an object cannot say its format; it answers in its neighbour's.
  if (!parsed.is_object) parsed.error->format = last_format_;
  if (parsed.is_object) last_format_ = parsed.request ? parsed.request->format : parsed.error->format;

  const std::string& id = parsed.request ? parsed.request->custom_id : parsed.error->custom_id;
  if (ShardOf(id, n, options_.shard.count) != options_.shard.index) {
    ++stats_.other_shard;
    return false;
  }
  const bool error_done = journal_.error_lines.count(n) > 0;
  if (parsed.error) {
    if (!id.empty()) seen_ids_.insert(id);
    if (error_done) ++stats_.already_done;
    *entry = std::move(*parsed.error);
    return !error_done;
  }
  Request& r = *parsed.request;
  if (!seen_ids_.insert(r.custom_id).second) {
    // A later line reusing an id gets an error line; the id's first line owns its completion.
    if (error_done) {
      ++stats_.already_done;
      return false;
    }
    *entry = RequestError{r.custom_id, n, "duplicate_custom_id",
                          "custom_id \"" + r.custom_id +
                              "\" was already used by an earlier line; give every request a "
                              "unique custom_id",
                          r.format};
    return true;
  }
  if (error_done || journal_.completed_ids.count(r.custom_id) > 0) {
    ++stats_.already_done;
    return false;
  }
  *entry = Tokenize(std::move(r));
  return true;
}

void BlockReader::FillWindow() {
  const size_t block = static_cast<size_t>(options_.block_size);
  const size_t window = std::max(block, static_cast<size_t>(std::max(options_.sort_window, 0)));
  std::vector<RequestError> errors;
  JsonlLine line;
  while (!stats_.input_done && pending_.size() < window && errors.size() < window) {
    Result<bool> more = reader_->Next(&line);
    if (!more.ok()) pending_error_ = more.status();
    if (!more.ok() || !*more) {
      stats_.input_done = true;
      break;
    }
    BlockEntry entry;
    if (!Classify(line, &entry)) continue;
    if (auto* t = std::get_if<TokenizedRequest>(&entry)) {
      ++stats_.requests;
      pending_.push_back(std::move(*t));
    } else {
      ++stats_.errors;
      errors.push_back(std::move(std::get<RequestError>(entry)));
    }
  }
  std::stable_sort(pending_.begin(), pending_.end(),
                   [](const TokenizedRequest& a, const TokenizedRequest& b) {
                     return a.prompt_ids.size() < b.prompt_ids.size();
                   });
  const size_t full = pending_.size() / block;
  const size_t cut = stats_.input_done ? pending_.size() : full * block;
  for (size_t begin = 0; begin < cut; begin += block) {
    Block b;
    const size_t end = std::min(cut, begin + block);
    for (size_t i = begin; i < end; ++i) b.entries.emplace_back(std::move(pending_[i]));
    ready_.push_back(std::move(b));
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(cut));
  if (!errors.empty()) {
    if (ready_.empty()) ready_.emplace_back();
    for (RequestError& e : errors) ready_.front().entries.emplace_back(std::move(e));
  }
  for (Block& b : ready_) {
    std::sort(b.entries.begin(), b.entries.end(),
              [](const BlockEntry& a, const BlockEntry& b) { return LineOf(a) < LineOf(b); });
  }
}

Result<bool> BlockReader::Next(Block* block) {
  block->entries.clear();
  while (ready_.empty() && !stats_.input_done) FillWindow();
  if (ready_.empty()) {
    if (!pending_error_.ok()) return pending_error_;
    return false;
  }
  *block = std::move(ready_.front());
  ready_.pop_front();
  return true;
}

}  // namespace strata
