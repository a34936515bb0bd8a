// JsonlReader streams the lines of a job input file, plain or zstd-compressed, holding at most
// one line (up to the line limit) and a fixed window of the file in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "src/core/status.h"

namespace strata {

class DecodedFile;

struct JsonlReaderOptions {
  // A line longer than this many bytes (not counting "\n" or "\r\n") is reported with too_long
  // set and its bytes dropped as they stream by. Default 16 MiB.
  size_t max_line_bytes = size_t{16} << 20;
};

struct JsonlLine {
  uint64_t line_number = 0;  // 1-based physical line in the file
  std::string text;          // the line without "\n", "\r\n" or a leading BOM; empty if too_long
  bool too_long = false;     // the line exceeded max_line_bytes; report LineTooLongError
};

// Not thread-safe.
class JsonlReader {
 public:
  // Opens `path`; zstd when it starts with the zstd magic bytes (a ".zst" name requires them).
  // Errors: NotFound naming the path, InvalidArgument for a directory, Corrupt, IoError.
  static Result<std::unique_ptr<JsonlReader>> Open(const std::string& path,
                                                   const JsonlReaderOptions& options = {});

  ~JsonlReader();
  JsonlReader(const JsonlReader&) = delete;
  JsonlReader& operator=(const JsonlReader&) = delete;

  // Stores the next line in *out and returns true, or returns false at the end of the input.
  // Blank lines are lines too (each input line gets a result line); a UTF-8 BOM at the start of
  // the file is dropped; the last line needs no final newline, and a final newline starts no
  // line. On damaged zstd input every line decoded
  // before the damage is returned first, then the Corrupt status (and again on every later
  // call); a partial line at the damage is dropped.
  Result<bool> Next(JsonlLine* out);

  bool compressed() const;
  const std::string& path() const;

 private:
  JsonlReader(std::unique_ptr<DecodedFile> file, const JsonlReaderOptions& options);

  // Ends the current line and stores it in *out.
  void FinishLine(JsonlLine* out);

  std::unique_ptr<DecodedFile> file_;
  JsonlReaderOptions options_;
  std::string buf_;       // decoded bytes from the file; [buf_pos_, buf_len_) is unread
  size_t buf_pos_ = 0;
  size_t buf_len_ = 0;
  std::string line_;      // the line being assembled, at most max_line_bytes + 1 bytes
  bool line_too_long_ = false;
  bool line_started_ = false;  // bytes of the current line were seen (it may be too long)
  uint64_t line_number_ = 0;   // of the last finished line
  bool eof_ = false;
  Status status_;
};

// The number of lines a JsonlReader on `path` would return, reading the whole file; for damaged
// zstd input, the lines before the damage. Errors: those of JsonlReader::Open.
Result<uint64_t> CountJsonlLines(const std::string& path);

}  // namespace strata
