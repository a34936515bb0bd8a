// strata's command line. The one place where exceptions from libraries are caught.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <exception>
#include <iostream>

#include "src/cli/bench_command.h"
#include "src/cli/convert_command.h"
#include "src/cli/device_flags.h"
#include "src/cli/exit_codes.h"
#include "src/cli/merge_command.h"
#include "src/cli/perplexity_command.h"
#include "src/cli/plan_command.h"
#include "src/cli/profile_command.h"
#include "src/cli/policy_flags.h"
#include "src/cli/run_command.h"

namespace {

// OpenMP's idle worker threads spin by default (libgomp), taking a shared machine's cores from
// everyone else and from strata's own lanes. libgomp reads OMP_WAIT_POLICY once, when it is
// loaded, so setting it here is too late for this process: when the user left it unset, set it
// to PASSIVE and start this program again with the same arguments. The variable is set then, so
// this happens once; if the exec fails, the run goes on with libgomp's default.
void ReexecWithPassiveOpenMpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1);
  ::execv("/proc/self/exe", argv);
}

}  // namespace

int main(int argc, char** argv) {
  ReexecWithPassiveOpenMpWait(argv);
  CLI::App app{"strata: offline batch inference for models larger than the GPU"};
  app.require_subcommand(1);

  strata::RunOptions run;
  CLI::App* run_cmd = app.add_subcommand("run", "Run a batch job over a JSONL file");
  run_cmd->add_option("--model,-m", run.model,
                      "Hugging Face model directory or GGUF file (default: the model fetched by "
                      "scripts/setup.sh)");
  run_cmd->add_option("--input,-i", run.input, "Requests, JSONL (.jsonl or .jsonl.zst)")->required();
  run_cmd->add_option("--output,-o", run.output,
                      "Results, JSONL (.jsonl or .jsonl.zst); rerunning resumes from it")
      ->required();
  run_cmd->add_option("--batch-size", run.batch_size, "Sequences per block")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  run_cmd->add_option("--threads", run.threads, "CPU threads (0: all cores)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  run_cmd->add_option("--sort-window", run.sort_window,
                      "Requests read ahead and sorted by prompt length into blocks (0: input "
                      "order)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  run_cmd->add_option("--shard", run.shard, "I/N: run only shard I of N (merge with strata merge)");
  strata::AddPolicyFlags(run_cmd, &run.policy);
  strata::AddDeviceFlag(run_cmd, &run.device);
  strata::AddActivationsFlag(run_cmd, &run.activations);
  run_cmd->add_option("--metrics", run.metrics, "Write JSON metrics to this file at the end");
  run_cmd->add_option("--progress-interval", run.progress_interval_s,
                      "Seconds between progress lines when stderr is not a terminal")
      ->capture_default_str();

  strata::PlanOptions plan;
  CLI::App* plan_cmd = strata::AddPlanCommand(app, &plan);
  strata::ProfileOptions profile;
  CLI::App* profile_cmd = strata::AddProfileCommand(app, &profile);
  strata::MergeOptions merge;
  CLI::App* merge_cmd = strata::AddMergeCommand(app, &merge);
  strata::PerplexityOptions perplexity;
  CLI::App* perplexity_cmd = strata::AddPerplexityCommand(app, &perplexity);
  strata::ConvertOptions convert;
  CLI::App* convert_cmd = strata::AddConvertCommand(app, &convert);
  strata::BenchOptions bench;
  CLI::App* bench_cmd = strata::AddBenchCommand(app, &bench);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? strata::kExitOk : strata::kExitUnusable;
  }
  try {
    if (run_cmd->parsed()) return strata::RunCommand(run);
    if (plan_cmd->parsed()) return strata::PlanCommand(plan);
    if (profile_cmd->parsed()) return strata::ProfileCommand(profile);
    if (merge_cmd->parsed()) return strata::MergeCommand(merge);
    if (perplexity_cmd->parsed()) return strata::PerplexityCommand(perplexity);
    if (convert_cmd->parsed()) return strata::ConvertCommand(convert);
    if (bench_cmd->parsed()) return strata::BenchCommand(bench);
  } catch (const std::exception& e) {
    std::cerr << "strata: error: " << e.what() << "\n";
    return strata::kExitUnusable;
  }
  return strata::kExitUnusable;
}
