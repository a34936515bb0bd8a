// LoadModel on small GGUF files written by the test: every supported tensor type, the q/k
// un-permute, tokenizer metadata, and the ways a file can be refused.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "src/model/model.h"
#include "src/model/store.h"
#include "tests/model/model_files.h"

namespace strata {
namespace {

using testing_files::Append;
using testing_files::Bf16Bytes;
using testing_files::F16Bytes;
using testing_files::F32Bytes;
using testing_files::FreshDir;
using testing_files::GgufWriter;
using testing_files::Pattern;
using testing_files::WriteFile;

constexpr int64_t kVocab = 64, kHidden = 64, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kFfn = 96,
                  kLayers = 2;

// llama.cpp's convert-time permutation: w.reshape(n_head, 2, hd/2, in).swapaxes(1, 2).
std::vector<float> LlamaCppPermute(const std::vector<float>& w, int64_t n_head, int64_t in) {
  const int64_t hd = static_cast<int64_t>(w.size()) / in / n_head;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t c = 0; c < in; ++c)
          out[((h * (hd / 2) + i) * 2 + j) * in + c] = w[((h * 2 + j) * (hd / 2) + i) * in + c];
  return out;
}

// Q8_0 blocks of `v`, whose values must be multiples of 1/8 in [-16, 15.875].
std::string PackQ8_0(const std::vector<float>& v) {
  std::string out;
  for (size_t b = 0; b < v.size(); b += 32) {
    Append<uint16_t>(&out, FloatToHalf(0.125f));
    for (size_t j = 0; j < 32; ++j) out += static_cast<char>(std::lround(v[b + j] * 8));
  }
  return out;
}

// Q4_0 blocks for d = 0.25: v must be 0.25 * (q - 8) for q in [0, 15].
std::string PackQ4_0(const std::vector<float>& v) {
  std::string out;
  for (size_t b = 0; b < v.size(); b += 32) {
    Append<uint16_t>(&out, FloatToHalf(0.25f));
    for (size_t j = 0; j < 16; ++j) {
      const long lo = std::lround(v[b + j] * 4 + 8), hi = std::lround(v[b + j + 16] * 4 + 8);
      out += static_cast<char>(hi << 4 | lo);
    }
  }
  return out;
}

// Q4_1 blocks for d = 0.5, m = -1: v must be 0.5 * q - 1 for q in [0, 15].
std::string PackQ4_1(const std::vector<float>& v) {
  std::string out;
  for (size_t b = 0; b < v.size(); b += 32) {
    Append<uint16_t>(&out, FloatToHalf(0.5f));
    Append<uint16_t>(&out, FloatToHalf(-1.0f));
    for (size_t j = 0; j < 16; ++j) {
      const long lo = std::lround((v[b + j] + 1) * 2), hi = std::lround((v[b + j + 16] + 1) * 2);
      out += static_cast<char>(hi << 4 | lo);
    }
  }
  return out;
}

// Values 0.25 * (q - 8) / 0.5 * q - 1 for a q pattern in [0, 15].
std::vector<float> Nibbles(size_t n, float d, float offset) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = d * static_cast<float>((k * 5 + 3) % 16) + offset;
  return v;
}

struct TinyGguf {
  std::string arch = "llama";  // "phi3": fused attn_qkv (Q8_0) and gate+up in ffn_up (Q4_1)
  bool tied = true;
  std::string skip;         // a tensor left out
  std::string unsupported_tensor;  // a tensor stored as MXFP4 (not expandable)
  std::string extra;        // an extra F32 tensor of 64 elements
  std::vector<float> rope_freqs;  // written as rope_freqs.weight when not empty
  bool block_count = true;  // write llama.block_count
  std::function<void(GgufWriter&)> more_keys;  // further metadata, after the usual keys
};

// Writes a 2-layer llama GGUF as `shards` files the way gguf-split does (the metadata in the
// first, tensor i in shard i % shards, split.* keys); `expected` receives each tensor's values in
// Hugging Face layout.
std::vector<std::string> BuildTinyGgufShards(const TinyGguf& o, int shards,
                                             std::map<std::string, std::vector<float>>* expected) {
  std::vector<GgufWriter> writers(static_cast<size_t>(shards));
  GgufWriter& w = writers[0];
  w.AddString("general.architecture", o.arch);
  const std::string a = o.arch + ".";
  if (o.block_count) w.AddU32(a + "block_count", kLayers);
  w.AddU32(a + "context_length", 128);
  w.AddU32(a + "embedding_length", kHidden);
  w.AddU32(a + "feed_forward_length", kFfn);
  w.AddU32(a + "attention.head_count", kHeads);
  w.AddU32(a + "attention.head_count_kv", kKvHeads);
  w.AddF32(a + "rope.freq_base", 100000.0f);
  w.AddF32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.AddU32(a + "rope.dimension_count", kHeadDim);
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int i = 0; i < kVocab; ++i) {
    tokens.push_back(std::string("t").append(std::to_string(i)));
    types.push_back(i < 3 ? 3 : 1);
  }
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "smollm");
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddI32Array("tokenizer.ggml.token_type", types);
  w.AddStringArray("tokenizer.ggml.merges", {"t 1", "t1 2"});
  w.AddU32("tokenizer.ggml.bos_token_id", 1);
  w.AddU32("tokenizer.ggml.eos_token_id", 2);
  w.AddU32("tokenizer.ggml.padding_token_id", 2);
  w.AddBool("tokenizer.ggml.add_bos_token", true);
  w.AddString("tokenizer.chat_template", "{{ messages }}");
  if (o.more_keys) o.more_keys(w);

  int seed = 0, tensors = 0;
  // Adds tensor `name` of HF shape [rows, cols] stored as `type`; `heads` > 0 permutes rows.
  auto add = [&](const std::string& name, int64_t rows, int64_t cols, uint32_t type,
                 int64_t heads) {
    if (name == o.skip) return;
    const size_t n = static_cast<size_t>(rows * cols);
    std::vector<float> v = type == 2   ? Nibbles(n, 0.25f, -2.0f)
                           : type == 3 ? Nibbles(n, 0.5f, -1.0f)
                                       : Pattern(n, ++seed);
    (*expected)[name] = v;
    if (heads > 0) v = LlamaCppPermute(v, heads, cols);
    if (name == o.unsupported_tensor) type = 39;
    const std::string bytes = type == 0    ? F32Bytes(v)
                              : type == 1  ? F16Bytes(v)
                              : type == 2  ? PackQ4_0(v)
                              : type == 3  ? PackQ4_1(v)
                              : type == 8  ? PackQ8_0(v)
                              : type == 30 ? Bf16Bytes(v)
                                           : std::string(n / 32 * 17, '\0');
    std::vector<uint64_t> ne = {static_cast<uint64_t>(cols)};
    if (rows > 1) ne.push_back(static_cast<uint64_t>(rows));
    writers[static_cast<size_t>(tensors++ % shards)].AddTensor(name, ne, type, bytes);
  };
  add("token_embd.weight", kVocab, kHidden, 8, 0);
  for (int i = 0; i < kLayers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    add(p + "attn_norm.weight", 1, kHidden, 0, 0);
    if (o.arch == "phi3") {
      add(p + "attn_qkv.weight", (kHeads + 2 * kKvHeads) * kHeadDim, kHidden, 8, 0);
    } else {
      add(p + "attn_q.weight", kHeads * kHeadDim, kHidden, 8, kHeads);
      add(p + "attn_k.weight", kKvHeads * kHeadDim, kHidden, 1, kKvHeads);
      add(p + "attn_v.weight", kKvHeads * kHeadDim, kHidden, 2, 0);
    }
    add(p + "attn_output.weight", kHidden, kHeads * kHeadDim, 3, 0);
    add(p + "ffn_norm.weight", 1, kHidden, 0, 0);
    if (o.arch == "phi3") {
      add(p + "ffn_up.weight", 2 * kFfn, kHidden, 3, 0);
    } else {
      add(p + "ffn_gate.weight", kFfn, kHidden, 30, 0);
      add(p + "ffn_up.weight", kFfn, kHidden, 0, 0);
    }
    add(p + "ffn_down.weight", kHidden, kFfn, 8, 0);
  }
  add("output_norm.weight", 1, kHidden, 0, 0);
  if (!o.tied) add("output.weight", kVocab, kHidden, 0, 0);
  if (!o.extra.empty()) add(o.extra, 1, 64, 0, 0);
  if (!o.rope_freqs.empty()) {
    writers[0].AddTensor("rope_freqs.weight", {o.rope_freqs.size()}, 0, F32Bytes(o.rope_freqs));
  }
  std::vector<std::string> files;
  for (int k = 0; k < shards; ++k) {
    GgufWriter& shard = writers[static_cast<size_t>(k)];
    if (shards > 1) {
      std::string no, count, total;
      Append<uint16_t>(&no, static_cast<uint16_t>(k));
      Append<uint16_t>(&count, static_cast<uint16_t>(shards));
      Append<int32_t>(&total, tensors);
      shard.AddKv("split.no", 2, no);
      shard.AddKv("split.count", 2, count);
      if (k == 0) shard.AddKv("split.tensors.count", 5, total);
    }
    files.push_back(shard.Build());
  }
  return files;
}

std::string BuildTinyGguf(const TinyGguf& o, std::map<std::string, std::vector<float>>* expected) {
  return BuildTinyGgufShards(o, 1, expected)[0];
}

// Writes the file described by `o` and loads it.
Result<std::unique_ptr<Model>> LoadTiny(const TinyGguf& o,
                                        std::map<std::string, std::vector<float>>* expected,
                                        const LoadOptions& options = {}) {
  const auto path = FreshDir() / "tiny.gguf";
  WriteFile(path, BuildTinyGguf(o, expected));
  return LoadModel(path.string(), options);
}

void ExpectValues(const TensorView& v, const std::vector<float>& expected, const char* what) {
  ASSERT_EQ(v.dtype, DType::kF32) << what;
  ASSERT_EQ(static_cast<size_t>(v.numel()), expected.size()) << what;
  const auto* f = static_cast<const float*>(v.data);
  EXPECT_EQ(std::vector<float>(f, f + expected.size()), expected) << what;
}

TEST(GgufModelTest, LoadsEveryTypeAndUnpermutes) {
  std::map<std::string, std::vector<float>> e;
  auto m = LoadTiny({}, &e);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.num_layers, kLayers);
  EXPECT_EQ(c.num_kv_heads, kKvHeads);
  EXPECT_EQ(c.head_dim, kHeadDim);
  EXPECT_EQ(c.vocab_size, kVocab);
  EXPECT_EQ(c.max_position_embeddings, 128);
  EXPECT_EQ(c.rope_theta, 100000.0f);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_id, 2);
  const ModelWeights& w = (*m)->weights();
  EXPECT_EQ(w.token_embedding.shape, (std::vector<int64_t>{kVocab, kHidden}));
  ExpectValues(w.token_embedding, e["token_embd.weight"], "token_embd (Q8_0)");
  EXPECT_EQ(w.lm_head.data, w.token_embedding.data);
  ExpectValues(w.final_norm, e["output_norm.weight"], "output_norm");
  for (int i = 0; i < kLayers; ++i) {
    const LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(l.wq.shape, (std::vector<int64_t>{kHeads * kHeadDim, kHidden}));
    ExpectValues(l.wq, e[p + "attn_q.weight"], "attn_q (Q8_0, permuted)");
    ExpectValues(l.wk, e[p + "attn_k.weight"], "attn_k (F16, permuted)");
    ExpectValues(l.wv, e[p + "attn_v.weight"], "attn_v (Q4_0)");
    ExpectValues(l.wo, e[p + "attn_output.weight"], "attn_output (Q4_1)");
    ExpectValues(l.w_gate, e[p + "ffn_gate.weight"], "ffn_gate (BF16)");
    ExpectValues(l.w_up, e[p + "ffn_up.weight"], "ffn_up (F32)");
    ExpectValues(l.w_down, e[p + "ffn_down.weight"], "ffn_down (Q8_0)");
    ExpectValues(l.attn_norm, e[p + "attn_norm.weight"], "attn_norm");
    ExpectValues(l.mlp_norm, e[p + "ffn_norm.weight"], "ffn_norm");
    EXPECT_FALSE(l.bq.present());
  }
  const GgufTokenizerData& t = (*m)->gguf_tokenizer();
  EXPECT_EQ(t.model, "gpt2");
  EXPECT_EQ(t.pre, "smollm");
  ASSERT_EQ(t.tokens.size(), static_cast<size_t>(kVocab));
  EXPECT_EQ(t.tokens[5], "t5");
  EXPECT_EQ(t.token_types[0], 3);
  EXPECT_EQ(t.token_types[5], 1);
  EXPECT_EQ(t.merges, (std::vector<std::string>{"t 1", "t1 2"}));
  EXPECT_EQ(t.bos_token_id, 1);
  EXPECT_EQ(t.eos_token_id, 2);
  EXPECT_EQ(t.eot_token_id, -1);
  EXPECT_EQ(t.pad_token_id, 2);
  EXPECT_EQ(t.add_bos, true);
  EXPECT_EQ((*m)->chat_template(), "{{ messages }}");
  EXPECT_TRUE((*m)->tokenizer_json_path().empty());
  const uint64_t params = kVocab * kHidden + kHidden +
                          kLayers * (2 * kHidden + 2 * kHeads * kHeadDim * kHidden +
                                     2 * kKvHeads * kHeadDim * kHidden + 3 * kFfn * kHidden);
  EXPECT_EQ((*m)->weight_bytes(), params * 4);
}

// Rows [first, first + rows) of a [.., cols] matrix's values.
std::vector<float> Rows(const std::vector<float>& v, int64_t cols, int64_t first, int64_t rows) {
  return std::vector<float>(v.begin() + first * cols, v.begin() + (first + rows) * cols);
}

// Phi-3: q, k and v are row ranges of attn_qkv (a Q8_0 row is 2 blocks here), gate and up of
// ffn_up (Q4_1), each expanded in place from its first row; nothing is un-permuted.
TEST(GgufModelTest, Phi3FusedProjectionsSplitByRows) {
  TinyGguf o;
  o.arch = "phi3";
  std::map<std::string, std::vector<float>> e;
  auto m = LoadTiny(o, &e);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const int64_t q = kHeads * kHeadDim, kv = kKvHeads * kHeadDim;
  for (int i = 0; i < kLayers; ++i) {
    const LayerWeights& l = (*m)->weights().layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    const std::vector<float>& qkv = e[p + "attn_qkv.weight"];
    EXPECT_EQ(l.wk.shape, (std::vector<int64_t>{kv, kHidden}));
    ExpectValues(l.wq, Rows(qkv, kHidden, 0, q), "q of attn_qkv");
    ExpectValues(l.wk, Rows(qkv, kHidden, q, kv), "k of attn_qkv");
    ExpectValues(l.wv, Rows(qkv, kHidden, q + kv, kv), "v of attn_qkv");
    const std::vector<float>& gate_up = e[p + "ffn_up.weight"];
    ExpectValues(l.w_gate, Rows(gate_up, kHidden, 0, kFfn), "gate of ffn_up");
    ExpectValues(l.w_up, Rows(gate_up, kHidden, kFfn, kFfn), "up of ffn_up");
  }
}

// attention.sliding_window caps the context as a Hugging Face sliding_window does (hf_config).
TEST(GgufModelTest, SlidingWindowCapsTheContext) {
  for (const auto& [window, context] :
       std::vector<std::pair<uint32_t, int>>{{64, 64}, {0, 128}, {4096, 128}}) {
    TinyGguf o;
    o.more_keys = [window](GgufWriter& w) { w.AddU32("llama.attention.sliding_window", window); };
    std::map<std::string, std::vector<float>> e;
    auto m = LoadTiny(o, &e);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ((*m)->config().max_position_embeddings, context) << window;
  }
}

// Every weight view of `m` under its store name (WeightSlots).
std::vector<std::pair<std::string, TensorView>> Views(const Model& m) {
  ModelWeights w = m.weights();
  std::vector<std::pair<std::string, TensorView>> out;
  for (const WeightSlot& slot : WeightSlots(m.config(), &w))
    out.emplace_back(slot.name, *slot.view);
  return out;
}

TEST(GgufModelTest, DeferredTensorsExpandOnRequestToTheLoadedValues) {
  std::map<std::string, std::vector<float>> e;
  auto eager = LoadTiny({}, &e);
  LoadOptions options;
  options.expand_gguf = false;
  auto deferred = LoadTiny({}, &e, options);
  ASSERT_TRUE(eager.ok() && deferred.ok()) << deferred.status().ToString();
  const ModelWeights& d = (*deferred)->weights();
  EXPECT_EQ(d.lm_head.data, d.token_embedding.data);
  EXPECT_EQ((*deferred)->weight_bytes(), (*eager)->weight_bytes());
  const auto eager_views = Views(**eager), deferred_views = Views(**deferred);
  int expanded = 0;
  for (size_t i = 0; i < eager_views.size(); ++i) {
    const std::string& name = eager_views[i].first;
    const TensorView& a = eager_views[i].second;
    const TensorView& b = deferred_views[i].second;
    EXPECT_FALSE((*eager)->IsDeferred(a)) << name;
    EXPECT_EQ(b.dtype, a.dtype) << name;
    EXPECT_EQ(b.shape, a.shape) << name;
    // F32 tensors without a permutation are views of the file either way; the rest wait.
    const bool plain = name.ends_with("norm") || name.ends_with("w_up");
    EXPECT_EQ((*deferred)->IsDeferred(b), !plain) << name;
    if (!(*deferred)->IsDeferred(b)) {
      ExpectValues(b,
                   std::vector<float>(static_cast<const float*>(a.data),
                                      static_cast<const float*>(a.data) + a.numel()),
                   name.c_str());
      continue;
    }
    std::vector<float> values(static_cast<size_t>(b.numel()));
    ASSERT_TRUE((*deferred)->ExpandDeferred(b, values.data()).ok()) << name;
    ExpectValues(a, values, name.c_str());
    ++expanded;
  }
  // The embedding and lm_head, and per layer q, k (permuted), v, output, gate and down.
  EXPECT_EQ(expanded, 2 + kLayers * 6);
}

TEST(GgufModelTest, ExpandingMoreThanTheMemoryAllowsIsRefusedWithWhatToDo) {
  std::map<std::string, std::vector<float>> e;
  LoadOptions options;
  options.expand_gguf = false;
  auto deferred = LoadTiny({}, &e, options);
  ASSERT_TRUE(deferred.ok()) << deferred.status().ToString();
  std::set<const void*> seen;
  int64_t needed = 0;
  for (const auto& [name, v] : Views(**deferred)) {
    if ((*deferred)->IsDeferred(v) && seen.insert(v.data).second) needed += v.bytes();
  }
  options = {};
  options.expand_memory_bytes = needed;
  auto fits = LoadTiny({}, &e, options);
  EXPECT_TRUE(fits.ok()) << fits.status().ToString();
  options.expand_memory_bytes = needed - 1;
  auto refused = LoadTiny({}, &e, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("strata convert --model"), std::string::npos)
      << refused.status().ToString();
}

TEST(GgufModelTest, SplitModelLoadsFromItsFirstShard) {
  std::map<std::string, std::vector<float>> e;
  auto whole = LoadTiny({}, &e);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const std::vector<std::string> shards = BuildTinyGgufShards({}, 3, &e);
  const auto dir = FreshDir();
  const auto name = [&](int no) {
    return (dir / ("tiny-0000" + std::to_string(no) + "-of-00003.gguf")).string();
  };
  for (int k = 0; k < 3; ++k) WriteFile(name(k + 1), shards[static_cast<size_t>(k)]);
  auto split = LoadModel(name(1));
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_EQ((*split)->weight_bytes(), (*whole)->weight_bytes());
  const auto a = Views(**whole), b = Views(**split);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const TensorView& v = a[i].second;
    ExpectValues(b[i].second,
                 std::vector<float>(static_cast<const float*>(v.data),
                                    static_cast<const float*>(v.data) + v.numel()),
                 a[i].first.c_str());
  }

  auto second = LoadModel(name(2));  // not the first shard: says which one to pass
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(second.status().message().find(name(1)), std::string::npos)
      << second.status().ToString();

  std::filesystem::remove(name(3));  // a shard missing: named
  auto missing = LoadModel(name(1));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(name(3)), std::string::npos)
      << missing.status().ToString();

  const auto renamed = (dir / "renamed.gguf").string();  // the first shard under another name
  std::filesystem::rename(name(1), renamed);
  auto lost = LoadModel(renamed);
  ASSERT_FALSE(lost.ok());
  EXPECT_NE(lost.status().message().find("-00001-of-00003.gguf"), std::string::npos)
      << lost.status().ToString();
}

TEST(GgufModelTest, RopeFrequencyFactorsBecomeTheScaling) {
  std::map<std::string, std::vector<float>> e;
  TinyGguf o;
  o.rope_freqs = {1.0f, 1.0f, 1.5f, 2.0f, 4.0f, 8.0f, 8.0f, 8.0f};
  auto m = LoadTiny(o, &e);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->config().rope_scaling.kind, RopeScalingKind::kFactors);
  EXPECT_EQ((*m)->config().rope_scaling.freq_factors, o.rope_freqs);
  o.rope_freqs[3] = 0.0f;
  auto zero = LoadTiny(o, &e);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("factors must be positive"), std::string::npos)
      << zero.status().ToString();
}

// YaRN as llama.cpp's converter writes a Hugging Face rope_scaling, with transformers' defaults
// (the attention factor, beta_fast 32, beta_slow 1); the keys that would change llama.cpp's
// YaRN beyond those are refused.
TEST(GgufModelTest, YarnScalingFromTheMetadata) {
  std::map<std::string, std::vector<float>> e;
  TinyGguf o;
  std::vector<std::function<void(GgufWriter&)>> extra;
  o.more_keys = [&](GgufWriter& w) {
    w.AddString("llama.rope.scaling.type", "yarn");
    w.AddF32("llama.rope.scaling.factor", 4.0f);
    for (const auto& f : extra) f(w);
  };
  extra = {[](GgufWriter& w) { w.AddU32("llama.rope.scaling.original_context_length", 64); }};
  auto m = LoadTiny(o, &e);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const RopeScaling& r = (*m)->config().rope_scaling;
  EXPECT_EQ(r.kind, RopeScalingKind::kYarn);
  EXPECT_EQ(r.factor, 4.0f);
  EXPECT_EQ(r.original_max_position_embeddings, 64);
  EXPECT_FLOAT_EQ(r.attention_factor, 0.1 * std::log(4.0) + 1);
  EXPECT_EQ(r.beta_fast, 32.0f);
  EXPECT_EQ(r.beta_slow, 1.0f);
  EXPECT_EQ((*m)->config().max_position_embeddings, 256);  // 4 × 64, past the native 128

  extra.push_back([](GgufWriter& w) { w.AddF32("llama.rope.scaling.yarn_beta_fast", 16.0f); });
  m = LoadTiny(o, &e);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->config().rope_scaling.beta_fast, 16.0f);

  extra.push_back([](GgufWriter& w) { w.AddF32("llama.rope.scaling.yarn_log_multiplier", 0.1f); });
  m = LoadTiny(o, &e);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported) << m.status().ToString();
  EXPECT_NE(m.status().message().find("yarn_log_multiplier"), std::string::npos);

  extra.clear();
  m = LoadTiny(o, &e);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("original_context_length"), std::string::npos)
      << m.status().ToString();
}

// A SentencePiece vocabulary's scores and space-prefix flag reach the tokenizer data
// (src/tokenizer/spm_tokenizer.h tokenizes with them).
TEST(GgufModelTest, SentencePieceScoresAndSpacePrefixAreRead) {
  std::map<std::string, std::vector<float>> e;
  TinyGguf o;
  std::vector<float> scores(kVocab);
  for (int i = 0; i < kVocab; ++i) scores[static_cast<size_t>(i)] = -0.5f * i;
  o.more_keys = [&](GgufWriter& w) {
    w.AddF32Array("tokenizer.ggml.scores", scores);
    w.AddBool("tokenizer.ggml.add_space_prefix", false);
  };
  auto m = LoadTiny(o, &e);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->gguf_tokenizer().scores, scores);
  EXPECT_FALSE((*m)->gguf_tokenizer().add_space_prefix);

  scores.pop_back();
  m = LoadTiny(o, &e);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("tokenizer.ggml.scores"), std::string::npos)
      << m.status().ToString();
}

TEST(GgufModelTest, UntiedOutput) {
  std::map<std::string, std::vector<float>> e;
  TinyGguf o;
  o.tied = false;
  auto m = LoadTiny(o, &e);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE((*m)->config().tie_word_embeddings);
  EXPECT_NE((*m)->weights().lm_head.data, (*m)->weights().token_embedding.data);
  ExpectValues((*m)->weights().lm_head, e["output.weight"], "output");
}

TEST(GgufModelTest, Refusals) {
  const auto expect = [](const TinyGguf& o, StatusCode code, const std::string& needle) {
    std::map<std::string, std::vector<float>> e;
    auto m = LoadTiny(o, &e);
    ASSERT_FALSE(m.ok()) << needle;
    EXPECT_EQ(m.status().code(), code) << m.status().ToString();
    EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().ToString();
  };
  TinyGguf o;
  o.arch = "gpt2";
  expect(o, StatusCode::kUnsupported, "'gpt2'");
  o = {};
  o.skip = "blk.1.ffn_up.weight";
  expect(o, StatusCode::kNotFound, "'blk.1.ffn_up.weight'");
  o = {};
  o.unsupported_tensor = "blk.0.ffn_up.weight";
  expect(o, StatusCode::kUnsupported, "'blk.0.ffn_up.weight' has type MXFP4");
  o = {};
  o.extra = "rope_freqs.weight";  // 64 values where head_dim 16 has 8 frequencies
  expect(o, StatusCode::kCorrupt, "rope_freqs.weight is not 8 F32 values");
  o = {};
  o.extra = "blk.0.attn_q.bias";
  expect(o, StatusCode::kUnsupported, "'blk.0.attn_q.bias'");
  o = {};
  o.block_count = false;
  expect(o, StatusCode::kCorrupt, "llama.block_count");
  o = {};
  o.arch = "phi3";
  o.extra = "rope_factors_long.weight";  // Phi-3 128k's LongRoPE
  expect(o, StatusCode::kUnsupported, "LongRoPE");
}

TEST(GgufModelTest, TruncatedFileFailsCleanly) {
  std::map<std::string, std::vector<float>> e;
  const std::string bytes = BuildTinyGguf({}, &e);
  const auto path = FreshDir() / "cut.gguf";
  for (size_t n : {size_t{0}, size_t{3}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    WriteFile(path, bytes.substr(0, n));
    auto m = LoadModel(path.string());
    ASSERT_FALSE(m.ok()) << n;
    EXPECT_EQ(m.status().code(), StatusCode::kCorrupt) << m.status().ToString();
  }
}

}  // namespace
}  // namespace strata
