// Random blocks of each ggml type strata expands beyond the default model's, and gguf-py's
// dequantization of them (tests/data/gguf/blocks.json, written by make_block_fixture.py). gguf-py
// follows ggml's order of float operations, so strata's expansion agrees with it exactly.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "src/model/json_file.h"

namespace strata::testing_files {

struct BlockFixture {
  std::string name;
  uint32_t type = 0;
  int64_t block_size = 0;
  std::string bytes;
  std::vector<float> values;
};

inline std::vector<BlockFixture> ReadBlockFixtures() {
  Result<nlohmann::json> j =
      ReadJsonFile(std::string(STRATA_SOURCE_DIR) + "/tests/data/gguf/blocks.json");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  std::vector<BlockFixture> out;
  if (!j.ok()) return out;
  for (const auto& [name, t] : (*j)["types"].items()) {
    BlockFixture f;
    f.name = name;
    f.type = t["ggml_type"].get<uint32_t>();
    f.block_size = t["block_size"].get<int64_t>();
    const std::string hex = t["bytes_hex"].get<std::string>();
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
      f.bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    }
    f.values = t["values"].get<std::vector<float>>();
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace strata::testing_files
