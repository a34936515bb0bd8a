// The module table of docs/DESIGN.md, enforced. One include root serves src/, policy/ and
// kernels/, so include directories alone cannot stop a module from reaching one it must not use;
// this test reads the `module-edges` block of docs/DESIGN.md and every source file of those
// trees, and fails on an include that crosses an edge the block does not list (there are no
// exceptions: the runtime, the commands and src/memory reach kernels/ only through src/backend).
// The headers of the interface itself (src/backend/*.h) include no kernel, so that a module that
// may use the interface reaches no kernel through it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace strata {
namespace {

namespace fs = std::filesystem;

// The module a path under the source root belongs to: `kernels`, `policy`, `src/<name>`, or
// `src/backend/cpu` / `src/backend/cuda` for the backends; empty outside those trees.
std::string ModuleOf(const std::string& path) {
  if (path.rfind("kernels/", 0) == 0) return "kernels";
  if (path.rfind("policy/", 0) == 0) return "policy";
  if (path.rfind("src/backend/cpu/", 0) == 0) return "src/backend/cpu";
  if (path.rfind("src/backend/cuda/", 0) == 0) return "src/backend/cuda";
  if (path.rfind("src/", 0) != 0) return "";
  const size_t slash = path.find('/', 4);
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// module -> modules it may include, from the ```module-edges block of docs/DESIGN.md.
std::map<std::string, std::set<std::string>> ReadAllowedEdges(const fs::path& design) {
  std::ifstream in(design);
  std::map<std::string, std::set<std::string>> edges;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "```module-edges") {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (line == "```") break;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::set<std::string>& uses = edges[line.substr(0, colon)];
    std::istringstream words(line.substr(colon + 1));
    for (std::string word; words >> word;) uses.insert(word);
  }
  return edges;
}

struct Include {
  std::string file;
  int line = 0;
  std::string target;  // a module, or "<cuda>" for a CUDA header
};

bool IsCudaHeader(const std::string& header) {
  static const std::regex kCuda(R"(^(cuda|cublas|curand|cusparse|cufft|nvtx|nvrtc|cub/|cuda/).*)");
  return std::regex_match(header, kCuda);
}

// Every cross-module include and every CUDA header of the source files under `root`'s trees.
std::vector<Include> ScanIncludes(const fs::path& root) {
  static const std::regex kInclude(R"re(^\s*#\s*include\s*([<"])([^>"]+)[>"])re");
  std::vector<Include> found;
  for (const char* tree : {"src", "policy", "kernels"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / tree)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() ||
          (ext != ".h" && ext != ".cc" && ext != ".cu" && ext != ".cuh")) {
        continue;
      }
      const std::string file = fs::relative(entry.path(), root).generic_string();
      const std::string module = ModuleOf(file);
      std::ifstream in(entry.path());
      std::string text;
      for (int line_no = 1; std::getline(in, text); ++line_no) {
        std::smatch m;
        if (!std::regex_search(text, m, kInclude)) continue;
        const std::string header = m[2];
        if (IsCudaHeader(header)) {
          found.push_back({file, line_no, "<cuda>"});
        } else if (m[1] == "\"" && header.find('/') != std::string::npos) {
          const std::string target = ModuleOf(header);
          if (!target.empty() && target != module) found.push_back({file, line_no, target});
        }
      }
    }
  }
  return found;
}

bool MayInclude(const std::map<std::string, std::set<std::string>>& edges,
                const std::string& module, const std::string& target) {
  if (target == "<cuda>") return module == "src/backend/cuda" || module == "kernels";
  const auto it = edges.find(module);
  return it != edges.end() && it->second.count(target) > 0;
}

TEST(ModuleEdges, TheDesignTableNamesEveryModule) {
  const auto edges = ReadAllowedEdges(fs::path(STRATA_SOURCE_DIR) / "docs/DESIGN.md");
  for (const char* module :
       {"src/core", "src/io", "src/model", "src/tokenizer", "policy", "src/schedule", "src/job",
        "kernels", "src/backend", "src/backend/cpu", "src/backend/cuda", "src/memory",
        "src/runtime", "src/cli"}) {
    EXPECT_TRUE(edges.count(module)) << module << " has no line in docs/DESIGN.md's module-edges";
  }
}

TEST(ModuleEdges, EveryIncludeFollowsTheDesignTable) {
  const fs::path root(STRATA_SOURCE_DIR);
  const auto edges = ReadAllowedEdges(root / "docs/DESIGN.md");
  ASSERT_FALSE(edges.empty()) << "no module-edges block in docs/DESIGN.md";
  for (const Include& inc : ScanIncludes(root)) {
    const std::string module = ModuleOf(inc.file);
    if (module == "kernels" && inc.target != "<cuda>" && inc.target != "kernels") {
      ADD_FAILURE() << inc.file << ":" << inc.line << " includes " << inc.target
                    << "; kernels/ may use std and CUDA only";
      continue;
    }
    // The interface's headers name no kernel: whoever includes them sees only the interface.
    const bool interface_header =
        module == "src/backend" && fs::path(inc.file).extension() == ".h";
    if (MayInclude(edges, module, inc.target) && !(interface_header && inc.target == "kernels")) {
      continue;
    }
    ADD_FAILURE() << inc.file << ":" << inc.line << " (" << module << ") includes "
                  << inc.target << ", which docs/DESIGN.md's module table does not allow";
  }
}

TEST(ModuleEdges, ModulesAreFoundByPath) {
  EXPECT_EQ(ModuleOf("src/runtime/executor.cc"), "src/runtime");
  EXPECT_EQ(ModuleOf("src/cli/profile/probes.cc"), "src/cli");
  EXPECT_EQ(ModuleOf("src/backend/backend.h"), "src/backend");
  EXPECT_EQ(ModuleOf("src/backend/cuda/ops.h"), "src/backend/cuda");
  EXPECT_EQ(ModuleOf("kernels/cpu/gemm.h"), "kernels");
  EXPECT_EQ(ModuleOf("policy/plan.h"), "policy");
  EXPECT_EQ(ModuleOf("tests/core/status_test.cc"), "");
  EXPECT_TRUE(IsCudaHeader("cuda_runtime_api.h"));
  EXPECT_TRUE(IsCudaHeader("cublasLt.h"));
  EXPECT_FALSE(IsCudaHeader("cstdint"));
}

}  // namespace
}  // namespace strata
