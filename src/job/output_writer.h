// The output journal of a job: lines appended by OutputWriter and made durable by Flush, and
// RecoverOutputJournal, which reads what an earlier run left so that a restarted job skips the
// requests already answered and never writes a line twice.
#pragma once

#include <zstd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>

#include "src/core/status.h"

namespace strata {

struct OutputWriterOptions {
  int zstd_level = 3;  // compression level for ".zst" outputs (1 fastest .. 19 smallest)
};

// Appends lines to an output file. A path ending in ".zst" is written as zstd with one frame
// per Flush, so a file cut short by a crash still decodes up to its last flushed frame.
// Not thread-safe.
class OutputWriter {
 public:
  // Opens `path` for appending, creating it when missing. Errors: those of CheckOutputPath; an
  // existing plain file must end with a complete line:
  // run RecoverOutputJournal on it first, or Open returns Corrupt.
  static Result<std::unique_ptr<OutputWriter>> Open(const std::string& path,
                                                    const OutputWriterOptions& options = {});

  // Closes the file. Lines appended since the last Flush are discarded, never half-written.
  ~OutputWriter();
  OutputWriter(const OutputWriter&) = delete;
  OutputWriter& operator=(const OutputWriter&) = delete;

  // Buffers one line; the newline is added. REQUIRES: `line` holds no '\n' (the Format*Line
  // functions never produce one).
  void Append(std::string_view line);

  // Writes the buffered lines and fsyncs the file: when it returns ok they survive a crash.
  // A failed write is undone where possible (a plain file is cut back to its last flushed
  // size) and the writer then refuses further flushes with the same error. Errors:
  // ResourceExhausted when the disk is full, IoError otherwise.
  Status Flush();

  const std::string& path() const { return path_; }

 private:
  OutputWriter(std::string path, int fd, const OutputWriterOptions& options)
      : path_(std::move(path)), fd_(fd), options_(options) {}

  // Writes all of `data` at the end of the file.
  Status WriteAll(std::string_view data);

  std::string path_;
  int fd_ = -1;
  OutputWriterOptions options_;
  ZSTD_CCtx* cctx_ = nullptr;   // set for ".zst" outputs
  uint64_t flushed_bytes_ = 0;  // file size after the last successful Flush
  std::string pending_;         // lines appended since the last Flush
  Status status_;
};

// Checks, creating nothing, what OutputWriter::Open needs of `path` before a job spends time on
// anything else: its directory exists and `path` is not a directory; an existing file is
// writable, a missing one can be created in the directory. Errors: NotFound naming the missing
// directory, InvalidArgument for a directory, IoError naming what is not writable.
Status CheckOutputPath(const std::string& path);

// What an output file already holds. A request is done when its custom_id has a completion line;
// an error is done when an error line for its input line number exists (error lines are keyed by
// line, not id, because a duplicate id's error line shares the id of the request that runs).
struct OutputJournal {
  std::unordered_set<std::string> completed_ids;  // custom_ids with a completion line
  std::unordered_set<uint64_t> error_lines;       // input line numbers with an error line
  uint64_t lines = 0;          // complete lines kept
  uint64_t dropped_bytes = 0;  // bytes of a torn tail cut off the file; 0 when none
};

// Reads the output file at `path` (plain, or zstd by its magic bytes) and returns what it holds.
// A torn tail left by a crash is cut off the file: for a plain file everything after the last
// newline, for zstd everything after the last complete frame that ends on a line boundary
// (damaged zstd data counts as a torn tail too). A missing file is an empty journal. The cut is
// fsynced before returning.
// Errors: Corrupt naming the line when a complete line is neither a completion (a JSON object
// with a string "custom_id" and no "error") nor an error line (a non-null "error" and an
// unsigned "line") -- the file was not written by strata, Corrupt when the ".zst" suffix and the
// zstd magic bytes disagree; IoError.
Result<OutputJournal> RecoverOutputJournal(const std::string& path);

}  // namespace strata
