#include "src/cli/merge_command.h"

#include <CLI/CLI.hpp>

#include "src/cli/exit_codes.h"
#include "src/core/log.h"

namespace strata {

CLI::App* AddMergeCommand(CLI::App& app, MergeOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "merge", "Join the outputs of a sharded job into one file in input order");
  cmd->add_option("--input-order", o->input,
                  "The job's input (.jsonl or .jsonl.zst); its line order is the merged order")
      ->required();
  cmd->add_option("shard_outputs", o->shard_outputs, "Every shard's output")->required();
  cmd->add_option("--output,-o", o->output, "The merged file (.jsonl or .jsonl.zst)")
      ->required();
  return cmd;
}

int MergeCommand(const MergeOptions& o) {
  Result<MergeReport> report = MergeShardOutputs(o);
  if (!report.ok()) {
    Log(LogLevel::kError, report.status().message());
    return kExitUnusable;
  }
  LogInfo("merged " + std::to_string(o.shard_outputs.size()) + " shard outputs into " + o.output +
          ": " + std::to_string(report->lines) + " lines (" +
          std::to_string(report->completions) + " completions, " +
          std::to_string(report->errors) + " errors), every input line exactly once");
  return kExitOk;
}

}  // namespace strata
