// Merging the outputs of the shards of one job (`strata merge`) into one file in input order,
// checking that every input line has exactly one result line.
//
// Result lines are matched to input lines the way the journal matches them (output_writer.h): an
// error line by its "line" number, a completion by its custom_id (the first input line with that
// id owns it). The input is read with the same rules as `strata run` (a blank line is a line and
// has an error line, line numbers are counted the same way), so it must be the very file the
// shards ran on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/core/status.h"

namespace strata {

struct MergeOptions {
  std::string input;                       // the job's input, .jsonl or .jsonl.zst
  std::vector<std::string> shard_outputs;  // every shard's output, .jsonl or .jsonl.zst
  std::string output;                      // the merged file; ".zst" compresses it
};

struct MergeReport {
  uint64_t lines = 0;        // result lines written, one per input line
  uint64_t completions = 0;  // of which completions
  uint64_t errors = 0;       // of which error lines
};

// Writes the merged file through a temporary file in the output's directory and renames it into
// place, so `output` is either the whole merge or untouched. Compressed shard outputs are
// decoded to temporary files beside the output first; memory holds an index of the result lines
// (their ids and offsets), never the lines themselves.
// Errors: InvalidArgument when `output` is also an input; Corrupt listing (up to 20 of) the
// problems when an input line has no result or two, a result matches no input line, an id or
// line appears twice among the shard outputs, or a shard output ends with a torn line (rerun
// that shard to repair it); NotFound / IoError / Corrupt from reading the files.
Result<MergeReport> MergeShardOutputs(const MergeOptions& options);

}  // namespace strata
