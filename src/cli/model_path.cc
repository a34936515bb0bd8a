#include "src/cli/model_path.h"

#include <cstdlib>
#include <filesystem>

namespace strata {

std::string CacheDirectory() {
  if (const char* c = std::getenv("STRATA_CACHE"); c != nullptr && *c != '\0') return c;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/strata";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/strata";
}

Result<std::string> ResolveModelPath(const std::string& flag) {
  if (!flag.empty()) {
    if (!std::filesystem::exists(flag)) {
      return Status::NotFound("model " + flag +
                              " does not exist; pass a Hugging Face model directory or a GGUF file");
    }
    return flag;
  }
  const std::string path = CacheDirectory() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) {
    return Status::NotFound("the default model is not at " + path +
                            "; run scripts/setup.sh to fetch it, or pass --model");
  }
  return path;
}

}  // namespace strata
