#include "src/job/jsonl_reader.h"

#include <cstring>

#include "src/job/decoded_file.h"

namespace strata {
namespace {

constexpr size_t kDecodeWindowBytes = 256 << 10;
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

}  // namespace

Result<std::unique_ptr<JsonlReader>> JsonlReader::Open(const std::string& path,
                                                       const JsonlReaderOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<DecodedFile> file, DecodedFile::Open(path));
  return std::unique_ptr<JsonlReader>(new JsonlReader(std::move(file), options));
}

JsonlReader::JsonlReader(std::unique_ptr<DecodedFile> file, const JsonlReaderOptions& options)
    : file_(std::move(file)), options_(options), buf_(kDecodeWindowBytes, '\0') {}

JsonlReader::~JsonlReader() = default;

bool JsonlReader::compressed() const { return file_->compressed(); }
const std::string& JsonlReader::path() const { return file_->path(); }

Result<bool> JsonlReader::Next(JsonlLine* out) {
  if (!status_.ok()) return status_;
  while (true) {
    if (buf_pos_ == buf_len_) {
      if (eof_) {
        if (!line_started_) return false;
        FinishLine(out);
        return true;
      }
      Result<size_t> n = file_->Read(buf_.data(), buf_.size());
      if (!n.ok()) {
        status_ = n.status();
        return status_;
      }
      buf_pos_ = 0;
      buf_len_ = *n;
      eof_ = *n == 0;
      continue;
    }
    const char* start = buf_.data() + buf_pos_;
    const size_t avail = buf_len_ - buf_pos_;
    const void* newline = std::memchr(start, '\n', avail);
    const size_t take = newline ? static_cast<const char*>(newline) - start : avail;
    line_started_ = true;
    // One byte of slack lets a line of exactly max_line_bytes keep its "\r" until FinishLine.
    if (!line_too_long_ && line_.size() + take > options_.max_line_bytes + 1) {
      line_too_long_ = true;
      line_.clear();
    }
    if (!line_too_long_) line_.append(start, take);
    buf_pos_ += take;
    if (newline != nullptr) {
      ++buf_pos_;
      FinishLine(out);
      return true;
    }
  }
}

void JsonlReader::FinishLine(JsonlLine* out) {
  ++line_number_;
  line_started_ = false;
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  if (line_number_ == 1 && line_.starts_with(kUtf8Bom)) line_.erase(0, kUtf8Bom.size());
  const bool too_long = line_too_long_ || line_.size() > options_.max_line_bytes;
  line_too_long_ = false;
  out->line_number = line_number_;
  out->too_long = too_long;
  out->text.clear();
  if (!too_long) out->text.swap(line_);
  line_.clear();
}

Result<uint64_t> CountJsonlLines(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<JsonlReader> reader, JsonlReader::Open(path));
  uint64_t lines = 0;
  JsonlLine line;
  while (true) {
    Result<bool> more = reader->Next(&line);
    if (!more.ok() || !*more) return lines;
    ++lines;
  }
}

}  // namespace strata
