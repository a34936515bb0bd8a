// Shards: a deterministic split of one input file among N independent jobs (`--shard I/N`),
// whose outputs `strata merge` joins.
//
// A line belongs to shard Mix64(Fnv1a64(custom_id)) % N when its custom_id can be read, else to
// shard (line_number - 1) % N. Hashing the id, not the line number, keeps every line of one id
// in the same shard, so duplicate ids are still caught, and keeps a request in its shard when
// lines are added to or removed from the file between runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/core/status.h"

namespace strata {

struct ShardSpec {
  int index = 0;  // 0 <= index < count
  int count = 1;  // 1: the whole input

  // "I/N", e.g. "0/4"; "0/1" for the whole input.
  std::string ToString() const;
};

// Parses "I/N" with 0 <= I < N <= 65536. Errors: InvalidArgument saying what is wrong.
Result<ShardSpec> ParseShardSpec(std::string_view text);

// The shard a line belongs to. `custom_id` empty: the line has no readable id.
int ShardOf(std::string_view custom_id, uint64_t line_number, int count);

}  // namespace strata
