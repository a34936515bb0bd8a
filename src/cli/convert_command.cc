#include "src/cli/convert_command.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "src/cli/exit_codes.h"
#include "src/model/model.h"
#include "src/model/store.h"
#include "src/model/store_writer.h"
#include "src/runtime/q4_weights.h"

namespace strata {

CLI::App* AddConvertCommand(CLI::App& app, ConvertOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "convert", "Write a strata store (4 KiB-aligned extents + manifest) from a model");
  cmd->add_option("--model,-m", o->model, "Hugging Face model directory or GGUF file")->required();
  cmd->add_option("--out,-o", o->out, "Store directory to create (must not exist, or be empty)")
      ->required();
  cmd->add_flag("--compress-weight", o->compress_weight,
                "Store weight matrices as 4-bit groups (fp16 scale and minimum) of 64, or of 32 "
                "keeping a GGUF file's Q4_0/Q4_1/Q4_K blocks");
  return cmd;
}

int ConvertCommand(const ConvertOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  // A GGUF file's quantized tensors are expanded one at a time as they are written.
  LoadOptions load;
  load.expand_gguf = false;
  Result<std::unique_ptr<Model>> model = LoadModel(o.model, load);
  if (!model.ok()) {
    std::fprintf(stderr, "strata: error: %s\n", model.status().ToString().c_str());
    return kExitUnusable;
  }
  StoreWriteOptions options;
  if (o.compress_weight) options.quantize_q4 = QuantizeWeight;
  Result<StoreWriteSummary> written = WriteStore(**model, o.out, options);
  if (!written.ok()) {
    std::fprintf(stderr, "strata: error: %s\n", written.status().ToString().c_str());
    return kExitUnusable;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: %d tensors (%d 4-bit), %.1f MiB of extents, from %s in %.1f s\n",
              o.out.c_str(), written->tensors, written->q4_tensors,
              static_cast<double>(written->data_bytes) / (1 << 20), o.model.c_str(), seconds);
  if (written->q4_blocks_kept > 0) {
    std::printf(
        "kept %d of the 4-bit matrices as the file's own Q4 blocks (groups of 32); "
        "quantized the other %d\n",
        written->q4_blocks_kept, written->q4_tensors - written->q4_blocks_kept);
  }
  if (written->raw_matrices > 0) {
    std::printf("kept %d weight matrices raw: their rows are not a multiple of %d elements\n",
                written->raw_matrices, (*model)->q4_group());
  }
  return kExitOk;
}

}  // namespace strata
