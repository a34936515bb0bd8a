// `strata merge`: joins the outputs of a sharded job (`strata run --shard I/N`) into one file in
// input order, checking that every input line has exactly one result (src/job/merge.h).
#pragma once

#include "src/job/merge.h"

namespace CLI {
class App;
}  // namespace CLI

namespace strata {

// Registers the `merge` subcommand and its flags on `app`, filling *options when parsed:
//   strata merge --input-order IN SHARD_OUT... --output MERGED
CLI::App* AddMergeCommand(CLI::App& app, MergeOptions* options);

// Runs it; returns kExitOk when the merged file was written, kExitUnusable (nothing written)
// when a file is unreadable or a request is missing, duplicated or unknown. Messages go to stderr.
int MergeCommand(const MergeOptions& options);

}  // namespace strata
