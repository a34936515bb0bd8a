// `strata convert`: writes the strata store (src/model/store.h) from any model LoadModel reads —
// a Hugging Face directory or a GGUF file — optionally with 4-bit group-wise weights.
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace strata {

struct ConvertOptions {
  std::string model;             // Hugging Face directory or GGUF file
  std::string out;               // the store directory to create
  bool compress_weight = false;  // 4-bit group-wise weight matrices (kernels/cpu/weight_q4.h)
};

// Registers the `convert` subcommand and its flags on `app`, filling *options when parsed.
CLI::App* AddConvertCommand(CLI::App& app, ConvertOptions* options);

// Runs it; returns the process exit code (src/cli/exit_codes.h): kExitOk when the store was
// written, kExitUnusable when the model cannot be read or the store cannot be written.
int ConvertCommand(const ConvertOptions& options);

}  // namespace strata
