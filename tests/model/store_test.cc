// The strata store: conversion round trips byte for byte on the fixture models (Hugging Face and
// GGUF), 4-bit weights match the kernels, damage is caught at load, and the disk tier can read
// any extent with O_DIRECT.
#include "src/model/store.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/cpu/weight_q4.h"
#include "src/io/checksum.h"
#include "src/io/fault_env.h"
#include "src/io/pread_env.h"
#include "src/model/store_writer.h"
#include "tests/model/model_files.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using testing_files::F32Bytes;
using testing_files::FreshDir;
using testing_files::GgufWriter;
using testing_files::Pattern;
using testing_files::WriteFile;

fs::path Fixture(const std::string& name) {
  return fs::path(STRATA_SOURCE_DIR) / "tests" / "data" / "fixtures" / name;
}

std::unique_ptr<Model> Load(const fs::path& path) {
  Result<std::unique_ptr<Model>> m = LoadModel(path.string());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Quantize(const TensorView& w, int group, uint8_t* codes, uint16_t* params) {
  const auto source = w.dtype == DType::kF32   ? kernels::cpu::WeightQ4Source::kF32
                      : w.dtype == DType::kF16 ? kernels::cpu::WeightQ4Source::kF16
                                               : kernels::cpu::WeightQ4Source::kBF16;
  kernels::cpu::QuantizeWeightQ4(source, w.data, w.dim(0), w.dim(1), group, codes, params);
}

// Every weight of `got` equals the one of `want`: dtype, shape and bytes.
void ExpectSameWeights(const Model& want, const Model& got) {
  ModelWeights a = want.weights(), b = got.weights();
  const std::vector<WeightSlot> wa = WeightSlots(want.config(), &a),
                                wb = WeightSlots(got.config(), &b);
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) {
    const TensorView &x = *wa[i].view, &y = *wb[i].view;
    ASSERT_EQ(x.dtype, y.dtype) << wa[i].name;
    ASSERT_EQ(x.shape, y.shape) << wa[i].name;
    EXPECT_EQ(std::memcmp(x.data, y.data, x.bytes()), 0) << wa[i].name;
  }
  EXPECT_EQ(want.weights().lm_head.data == want.weights().token_embedding.data,
            got.weights().lm_head.data == got.weights().token_embedding.data);
}

class StoreFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StoreFixtureTest, RoundTripsByteForByte) {
  std::unique_ptr<Model> original = Load(Fixture(GetParam()));
  ASSERT_NE(original, nullptr);
  const fs::path store = FreshDir() / "store";
  Result<StoreWriteSummary> written = WriteStore(*original, store.string());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_TRUE(IsStoreDirectory(store.string()));
  EXPECT_FALSE(IsStoreDirectory(Fixture(GetParam()).string()));

  Result<std::unique_ptr<Model>> loaded = LoadStore(store.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& m = **loaded;
  EXPECT_EQ(ModelConfigToJson(m.config()), ModelConfigToJson(original->config()));
  ExpectSameWeights(*original, m);
  EXPECT_EQ(m.chat_template(), original->chat_template());
  ASSERT_FALSE(m.tokenizer_json_path().empty());
  EXPECT_EQ(fs::path(m.tokenizer_json_path()).parent_path(), store) << "self-contained";
  EXPECT_EQ(ReadAll(m.tokenizer_json_path()), ReadAll(original->tokenizer_json_path()));
  EXPECT_EQ(m.weight_bytes(), original->weight_bytes());

  // Extents are 4 KiB aligned and padded, so O_DIRECT can read any of them.
  Result<std::unique_ptr<Store>> s = Store::Open(store.string());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(fs::file_size((*s)->data_path()), written->data_bytes);
  EXPECT_TRUE(IsAligned(written->data_bytes));
  for (const StoreTensor& t : (*s)->tensors()) EXPECT_TRUE(IsAligned(t.data.offset)) << t.name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, StoreFixtureTest,
                         ::testing::Values("llama-gqa", "llama-bias", "llama3-rope", "opt", "qwen2",
                                           "qwen3", "qwen2-yarn", "phi3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(StoreTest, GgufModelKeepsItsTokenizerAndTiedHead) {
  constexpr int64_t kVocab = 64, kHidden = 64, kFfn = 128;
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddU32("llama.block_count", 1);
  w.AddU32("llama.context_length", 64);
  w.AddU32("llama.embedding_length", kHidden);
  w.AddU32("llama.feed_forward_length", kFfn);
  w.AddU32("llama.attention.head_count", 4);
  w.AddU32("llama.attention.head_count_kv", 4);
  w.AddF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  std::vector<std::string> tokens;
  for (int i = 0; i < kVocab; ++i) tokens.push_back("\xC4\xA0t" + std::to_string(i));  // "Ġt<i>"
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "smollm");
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddI32Array("tokenizer.ggml.token_type", std::vector<int32_t>(kVocab, 1));
  w.AddStringArray("tokenizer.ggml.merges", {"\xC4\xA0 t"});
  std::vector<float> scores(kVocab);
  for (int64_t i = 0; i < kVocab; ++i) scores[static_cast<size_t>(i)] = -0.25f * i;
  w.AddF32Array("tokenizer.ggml.scores", scores);  // as SentencePiece vocabularies carry them
  w.AddBool("tokenizer.ggml.add_space_prefix", false);
  w.AddU32("tokenizer.ggml.eos_token_id", 2);
  w.AddString("tokenizer.chat_template", "{{ messages }}");
  int seed = 0;
  auto add = [&](const std::string& name, uint64_t rows, uint64_t cols) {
    std::vector<uint64_t> ne = {cols};
    if (rows > 1) ne.push_back(rows);
    w.AddTensor(name, ne, 0, F32Bytes(Pattern(rows * cols, ++seed)));
  };
  add("token_embd.weight", kVocab, kHidden);
  for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
    add(std::string("blk.0.") + n + ".weight", kHidden, kHidden);
  }
  add("blk.0.attn_norm.weight", 1, kHidden);
  add("blk.0.ffn_norm.weight", 1, kHidden);
  add("blk.0.ffn_gate.weight", kFfn, kHidden);
  add("blk.0.ffn_up.weight", kFfn, kHidden);
  add("blk.0.ffn_down.weight", kHidden, kFfn);
  add("output_norm.weight", 1, kHidden);
  const std::vector<float> rope_freqs = {1.0f, 1.25f, 2.0f, 3.5f, 8.0f, 8.0f, 8.0f, 8.0f};
  w.AddTensor("rope_freqs.weight", {rope_freqs.size()}, 0, F32Bytes(rope_freqs));
  const fs::path dir = FreshDir();
  WriteFile(dir / "tiny.gguf", w.Build());
  std::unique_ptr<Model> original = Load(dir / "tiny.gguf");
  ASSERT_NE(original, nullptr);
  ASSERT_TRUE(WriteStore(*original, (dir / "store").string()).ok());
  Result<std::unique_ptr<Model>> loaded = LoadStore((dir / "store").string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectSameWeights(*original, **loaded);
  EXPECT_TRUE((*loaded)->tokenizer_json_path().empty());
  EXPECT_EQ(GgufTokenizerToJson((*loaded)->gguf_tokenizer()),
            GgufTokenizerToJson(original->gguf_tokenizer()));
  EXPECT_EQ((*loaded)->gguf_tokenizer().scores, scores);
  EXPECT_FALSE((*loaded)->gguf_tokenizer().add_space_prefix);
  EXPECT_FALSE((*loaded)->gguf_tokenizer().add_bos.has_value());  // the file had no key
  EXPECT_EQ((*loaded)->chat_template(), "{{ messages }}");
  EXPECT_EQ((*loaded)->config().rope_scaling.kind, RopeScalingKind::kFactors);
  EXPECT_EQ((*loaded)->config().rope_scaling.freq_factors, rope_freqs);
  Result<std::unique_ptr<Store>> s = Store::Open((dir / "store").string());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Find("lm_head"), (*s)->Find("token_embedding")) << "a tied head is stored once";

  // `strata convert` loads a GGUF file without expanding it (its permuted q and k here) and
  // expands tensor by tensor while writing: the same store, byte for byte.
  LoadOptions options;
  options.expand_gguf = false;
  Result<std::unique_ptr<Model>> deferred = LoadModel((dir / "tiny.gguf").string(), options);
  ASSERT_TRUE(deferred.ok()) << deferred.status().ToString();
  EXPECT_TRUE((*deferred)->IsDeferred((*deferred)->weights().layers[0].wq));
  ASSERT_TRUE(WriteStore(**deferred, (dir / "store2").string()).ok());
  EXPECT_EQ(ReadAll(dir / "store2" / kStoreDataName), ReadAll(dir / "store" / kStoreDataName));
}

TEST(StoreTest, FourBitWeightsMatchTheKernels) {
  std::unique_ptr<Model> original = Load(Fixture("llama-gqa"));
  ASSERT_NE(original, nullptr);
  const fs::path store = FreshDir() / "store";
  StoreWriteOptions options;
  options.quantize_q4 = Quantize;
  Result<StoreWriteSummary> written = WriteStore(*original, store.string(), options);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  // hidden 64 divides into groups; intermediate 160 does not, so w_down stays raw.
  EXPECT_EQ(written->raw_matrices, 3);
  EXPECT_GT(written->q4_tensors, 0);
  EXPECT_EQ(written->q4_blocks_kept, 0);  // a Hugging Face model: every matrix is quantized
  Result<std::unique_ptr<Store>> s = Store::Open(store.string());
  Result<std::unique_ptr<Model>> loaded = LoadStore(store.string());
  ASSERT_TRUE(s.ok() && loaded.ok()) << loaded.status().ToString();
  ModelWeights a = original->weights(), b = (*loaded)->weights();
  const std::vector<WeightSlot> wa = WeightSlots(original->config(), &a);
  const std::vector<WeightSlot> wb = WeightSlots((*loaded)->config(), &b);
  uint64_t q4_bytes = 0, source_bytes = 0;
  std::set<const void*> seen;  // a tied head is one tensor
  for (size_t i = 0; i < wa.size(); ++i) {
    const TensorView &x = *wa[i].view, &y = *wb[i].view;
    const StoreTensor* t = (*s)->Find(wa[i].name);
    ASSERT_NE(t, nullptr);
    if (!seen.insert(y.data).second) continue;
    if (t->encoding == StoreEncoding::kRaw) {
      EXPECT_EQ(std::memcmp(x.data, y.data, x.bytes()), 0) << wa[i].name;
      continue;
    }
    std::vector<uint8_t> codes(kernels::cpu::WeightQ4CodeBytes(x.dim(0), x.dim(1)));
    std::vector<uint16_t> params(kernels::cpu::WeightQ4ParamHalves(x.dim(0), x.dim(1), 64));
    Quantize(x, 64, codes.data(), params.data());
    EXPECT_EQ(t->q4_group, 64);
    // Kept as stored: a view of the planes in tensors.bin, nothing expanded at load.
    ASSERT_EQ(y.dtype, DType::kQ4) << wa[i].name;
    const auto* planes = static_cast<const Q4Planes*>(y.data);
    EXPECT_EQ((*loaded)->StoreOffsetOf(planes->codes), static_cast<int64_t>(t->data.offset));
    EXPECT_EQ((*loaded)->StoreOffsetOf(planes->params), static_cast<int64_t>(t->q4_params.offset));
    EXPECT_EQ(std::memcmp(codes.data(), planes->codes, codes.size()), 0) << wa[i].name;
    EXPECT_EQ(std::memcmp(params.data(), planes->params, params.size() * 2), 0) << wa[i].name;
    EXPECT_EQ(y.bytes(), codes.size() + params.size() * 2);
    EXPECT_EQ(t->data.bytes, codes.size());
    EXPECT_EQ(t->q4_params.bytes, params.size() * 2);
    q4_bytes += y.bytes();
    source_bytes += x.bytes();
  }
  EXPECT_TRUE((*loaded)->has_q4_weights());
  EXPECT_FALSE(original->has_q4_weights());
  // The model holds the planes' bytes, not an fp32 expansion of them.
  EXPECT_EQ((*loaded)->weight_bytes(), original->weight_bytes() - source_bytes + q4_bytes);
  // A 4-bit store is not converted again: its source is.
  Result<StoreWriteSummary> again = WriteStore(**loaded, (FreshDir() / "again").string(), options);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.status().message().find("convert the model it was converted from"),
            std::string::npos)
      << again.status().message();
}

// A GGUF file's Q4_1 projections are stored as their own blocks, in groups of 32 (Model::
// GgufQ4Planes); its Q8_0 embedding is quantized, in groups of 32 too. The default model, when
// scripts/setup.sh has fetched it.
TEST(StoreTest, GgufFourBitBlocksAreStoredAsTheyAre) {
  const fs::path path = testing_files::DefaultModelPath();
  if (!fs::exists(path)) GTEST_SKIP() << "default model not found at " << path;
  std::unique_ptr<Model> source = Load(path);
  ASSERT_NE(source, nullptr);
  ASSERT_EQ(source->q4_group(), 32);
  LoadOptions deferred;  // as `strata convert` loads it: a tensor expanded only as it is written
  deferred.expand_gguf = false;
  Result<std::unique_ptr<Model>> unexpanded = LoadModel(path.string(), deferred);
  ASSERT_TRUE(unexpanded.ok()) << unexpanded.status().ToString();
  ASSERT_EQ((*unexpanded)->q4_group(), 32);
  const fs::path store = FreshDir() / "store";
  StoreWriteOptions options;
  options.quantize_q4 = Quantize;
  Result<StoreWriteSummary> written = WriteStore(**unexpanded, store.string(), options);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->raw_matrices, 0);
  EXPECT_EQ(written->q4_blocks_kept, 30 * 7);
  Result<std::unique_ptr<Store>> s = Store::Open(store.string());
  Result<std::unique_ptr<Model>> loaded = LoadStore(store.string());
  ASSERT_TRUE(s.ok() && loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->q4_group(), 32);
  ModelWeights a = source->weights(), b = (*loaded)->weights();
  const std::vector<WeightSlot> wa = WeightSlots(source->config(), &a);
  const std::vector<WeightSlot> wb = WeightSlots((*loaded)->config(), &b);
  int blocks = 0, quantized = 0;
  for (size_t i = 0; i < wa.size(); ++i) {
    const TensorView &x = *wa[i].view, &y = *wb[i].view;
    if (x.shape.size() != 2) continue;
    const StoreTensor* t = (*s)->Find(wa[i].name);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->encoding, StoreEncoding::kQ4) << wa[i].name;
    EXPECT_EQ(t->q4_group, 32) << wa[i].name;
    std::vector<uint8_t> codes(kernels::cpu::WeightQ4CodeBytes(x.dim(0), x.dim(1)));
    std::vector<uint16_t> params(kernels::cpu::WeightQ4ParamHalves(x.dim(0), x.dim(1), 32));
    if (source->GgufQ4Planes(x, codes.data(), params.data())) {
      ++blocks;
    } else {
      Quantize(x, 32, codes.data(), params.data());
      ++quantized;
    }
    const auto* planes = static_cast<const Q4Planes*>(y.data);
    ASSERT_EQ(planes->group, 32);
    EXPECT_EQ(std::memcmp(codes.data(), planes->codes, codes.size()), 0) << wa[i].name;
    EXPECT_EQ(std::memcmp(params.data(), planes->params, params.size() * 2), 0) << wa[i].name;
  }
  EXPECT_EQ(blocks, 30 * 7);  // every projection of the 30 layers
  EXPECT_EQ(quantized, 2);    // the embedding and its tied output projection (one tensor)
}

TEST(StoreTest, DamagedExtentIsCorruptNamingTheTensor) {
  std::unique_ptr<Model> original = Load(Fixture("llama-gqa"));
  ASSERT_NE(original, nullptr);
  const fs::path store = FreshDir() / "store";
  ASSERT_TRUE(WriteStore(*original, store.string()).ok());
  Result<std::unique_ptr<Store>> s = Store::Open(store.string());
  ASSERT_TRUE(s.ok());
  const StoreTensor* t = (*s)->Find("layers.1.wv");
  ASSERT_NE(t, nullptr);
  {
    std::fstream f((*s)->data_path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(t->data.offset + t->data.bytes / 2));
    f.put('\x5A');
  }
  Result<std::unique_ptr<Model>> loaded = LoadStore(store.string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(loaded.status().message().find("tensor 'layers.1.wv' fails its checksum"),
            std::string::npos)
      << loaded.status().message();
}

// What the disk tier does: look an extent up, read it with O_DIRECT, check it.
TEST(StoreTest, ExtentsReadWithDirectIo) {
  std::unique_ptr<Model> original = Load(Fixture("opt"));
  ASSERT_NE(original, nullptr);
  const fs::path store = FreshDir() / "store";
  ASSERT_TRUE(WriteStore(*original, store.string()).ok());
  Result<std::unique_ptr<Store>> s = Store::Open(store.string());
  Result<std::unique_ptr<FileEnv>> env = NewFileEnv();
  ASSERT_TRUE(s.ok() && env.ok());
  Result<std::unique_ptr<DiskFile>> file = (*env)->Open((*s)->data_path(), {FileMode::kRead});
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE((*file)->direct());
  const StoreTensor* t = (*s)->Find("layers.0.w_up");
  ASSERT_NE(t, nullptr);
  Result<AlignedBuffer> buf = AlignedBuffer::Allocate(t->data.padded_bytes());
  ASSERT_TRUE(buf.ok());
  IoEvent loaded;
  IoRequest r{IoOp::kRead, file->get(), t->data.offset, t->data.padded_bytes(), buf->data()};
  (*env)->Submit({&r, 1}, &loaded);
  ASSERT_TRUE(loaded.Wait().ok());
  EXPECT_EQ(Checksum64(buf->data(), t->data.bytes), t->data.checksum);
  EXPECT_EQ(std::memcmp(buf->data(), original->weights().layers[0].w_up.data, t->data.bytes), 0);
}

TEST(StoreTest, RefusesBadDirectoriesAndManifests) {
  std::unique_ptr<Model> original = Load(Fixture("llama-gqa"));
  ASSERT_NE(original, nullptr);
  const fs::path dir = FreshDir();
  fs::create_directories(dir / "occupied");
  WriteFile(dir / "occupied" / "x", "x");
  Result<StoreWriteSummary> taken = WriteStore(*original, (dir / "occupied").string());
  EXPECT_EQ(taken.status().code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(LoadStore((dir / "none").string()).status().code(), StatusCode::kNotFound);
  const fs::path store = dir / "store";
  ASSERT_TRUE(WriteStore(*original, store.string()).ok());
  const std::string manifest = ReadAll(store / kStoreManifestName);
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = manifest;
    text.replace(text.find(from), from.size(), to);
    WriteFile(store / kStoreManifestName, text);
    return LoadStore(store.string()).status();
  };
  EXPECT_EQ(edited("\"version\": 1", "\"version\": 2").code(), StatusCode::kUnsupported);
  EXPECT_EQ(edited("\"num_layers\": 3", "\"num_layers\": 4").code(), StatusCode::kCorrupt);
  const Status renamed = edited("\"layers.2.wq\"", "\"layers.2.wx\"");
  EXPECT_NE(renamed.message().find("tensor 'layers.2.wq' is missing"), std::string::npos)
      << renamed.message();
  const Status outside = edited("\"offset\": 0,", "\"offset\": 409600000,");
  EXPECT_NE(outside.message().find("lies outside tensors.bin"), std::string::npos)
      << outside.message();
}

// Stores converted before Qwen2 support have no attention_output_bias key: the o projection's bias
// then goes with the q/k/v biases, as it did when they were written.
TEST(StoreTest, ManifestWithoutOutputBiasKeyKeepsTheOutputBias) {
  std::unique_ptr<Model> original = Load(Fixture("llama-bias"));
  ASSERT_NE(original, nullptr);
  const fs::path store = FreshDir() / "store";
  ASSERT_TRUE(WriteStore(*original, store.string()).ok());
  nlohmann::json manifest = nlohmann::json::parse(ReadAll(store / kStoreManifestName));
  ASSERT_EQ(manifest["config"].erase("attention_output_bias"), 1u);
  WriteFile(store / kStoreManifestName, manifest.dump(2));
  Result<std::unique_ptr<Model>> loaded = LoadStore(store.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE((*loaded)->config().attention_output_bias);
  ExpectSameWeights(*original, **loaded);
}

TEST(StoreTest, FullDiskWhileConvertingLeavesNoManifest) {
  std::unique_ptr<Model> original = Load(Fixture("llama-gqa"));
  ASSERT_NE(original, nullptr);
  FaultInjectingEnv env(NewPreadEnv({}));
  env.AddRule({IoFault::kNoSpace, "tensors.bin", 64 << 10, UINT64_MAX, -1});
  StoreWriteOptions options;
  options.env = &env;
  const fs::path store = FreshDir() / "store";
  Result<StoreWriteSummary> written = WriteStore(*original, store.string(), options);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(written.status().message().find("tensors.bin"), std::string::npos);
  EXPECT_FALSE(IsStoreDirectory(store.string()));
}

}  // namespace
}  // namespace strata
