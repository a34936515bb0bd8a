// The tokenizer of a loaded model: a Hugging Face directory whose tokenizer.json is a SentencePiece
// one strata refuses (Llama 2's Prepend/Replace normalizer) falls back to the tokenizer.model beside
// it, and a strata store converted from that directory keeps it.
#include "src/runtime/model_tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/model/store_writer.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(STRATA_SOURCE_DIR) / "tests" / "data";

// The llama-bias fixture with a Llama 2 style tokenizer.json (the parts strata refuses) and, when
// `with_model`, the tokenizer.model of the SentencePiece goldens.
fs::path SentencePieceDirectory(bool with_model) {
  const fs::path dir = fs::path(::testing::TempDir()) / (with_model ? "spm_dir" : "spm_dir_bare");
  fs::remove_all(dir);
  fs::copy(kData / "fixtures" / "llama-bias", dir);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "tokenizer.json"));
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                       {{"type", "Replace"},
                        {"pattern", {{"String", " "}}},
                        {"content", "\xE2\x96\x81"}}}}};
  std::ofstream(dir / "tokenizer.json") << j.dump();
  if (with_model) {
    fs::copy_file(kData / "tokenizer" / "spm_style" / "tokenizer.model", dir / "tokenizer.model");
  }
  return dir;
}

std::vector<int32_t> GoldenIds(const std::string& text) {
  const nlohmann::json golden =
      nlohmann::json::parse(std::ifstream(kData / "tokenizer" / "spm_golden.json"));
  for (const nlohmann::json& c : golden["cases"]) {
    if (c["text"] == text) return c["ids"];
  }
  ADD_FAILURE() << "no golden case " << text;
  return {};
}

TEST(ModelTokenizerTest, SentencePieceModelBesideARefusedTokenizerJson) {
  for (const bool through_store : {false, true}) {
    SCOPED_TRACE(through_store ? "store" : "directory");
    fs::path dir = SentencePieceDirectory(true);
    auto model = LoadModel(dir.string());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    if (through_store) {
      const fs::path store = fs::path(::testing::TempDir()) / "spm_store";
      fs::remove_all(store);
      ASSERT_TRUE(WriteStore(**model, store.string()).ok());
      model = LoadModel(store.string());
      ASSERT_TRUE(model.ok()) << model.status().ToString();
    }
    auto tokenizer = LoadTokenizerForModel(**model);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    EXPECT_EQ((*tokenizer)->Encode("hello world", false), GoldenIds("hello world"));
    EXPECT_TRUE((*tokenizer)->add_bos_by_default());
  }
  auto bare = LoadModel(SentencePieceDirectory(false).string());
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  const auto refused = LoadTokenizerForModel(**bare);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported) << refused.status().ToString();
}

}  // namespace
}  // namespace strata
