// strata's command line. The one place where exceptions from libraries are caught.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

#include "src/cli/exit_codes.h"
#include "src/cli/plan_command.h"
#include "src/cli/profile_command.h"
#include "src/cli/run_command.h"

int main(int argc, char** argv) {
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

  strata::PlanOptions plan;
  CLI::App* plan_cmd = strata::AddPlanCommand(app, &plan);
  strata::ProfileOptions profile;
  CLI::App* profile_cmd = strata::AddProfileCommand(app, &profile);

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
  } catch (const std::exception& e) {
    std::cerr << "strata: error: " << e.what() << "\n";
    return strata::kExitUnusable;
  }
  return strata::kExitUnusable;
}
