// Test helpers that write small GGUF and safetensors files byte by byte, so the readers can be fed
// valid files and precisely broken ones.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/core/dtype.h"

namespace strata::testing_files {

// Where scripts/setup.sh puts the default model, SmolLM2-135M-Instruct Q4_1 GGUF ($STRATA_CACHE,
// else $XDG_CACHE_HOME/strata, else ~/.cache/strata, then models/); it may be absent.
inline std::filesystem::path DefaultModelPath() {
  std::filesystem::path cache;
  if (const char* s = std::getenv("STRATA_CACHE"); s != nullptr && *s != '\0') {
    cache = s;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    cache = std::filesystem::path(x) / "strata";
  } else if (const char* h = std::getenv("HOME"); h != nullptr) {
    cache = std::filesystem::path(h) / ".cache" / "strata";
  }
  return cache / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

// A fresh empty directory under the test temp dir, named after the running test.
inline std::filesystem::path FreshDir(const std::string& suffix = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   (std::string("strata_") + info->test_suite_name() + "_" + info->name() + suffix);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void WriteFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename T>
void Append(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

inline void AppendString(std::string* out, const std::string& s) {
  Append<uint64_t>(out, s.size());
  out->append(s);
}

// Builds a GGUF file. Metadata values are given as raw payloads after the type tag, so tests can
// write any (also a broken) value.
class GgufWriter {
 public:
  void AddKv(const std::string& key, uint32_t type, const std::string& payload) {
    std::string kv;
    AppendString(&kv, key);
    Append<uint32_t>(&kv, type);
    kv += payload;
    kvs_.push_back(kv);
  }
  void AddString(const std::string& key, const std::string& v) {
    std::string p;
    AppendString(&p, v);
    AddKv(key, 8, p);
  }
  void AddU32(const std::string& key, uint32_t v) {
    std::string p;
    Append(&p, v);
    AddKv(key, 4, p);
  }
  void AddF32(const std::string& key, float v) {
    std::string p;
    Append(&p, v);
    AddKv(key, 6, p);
  }
  void AddBool(const std::string& key, bool v) { AddKv(key, 7, std::string(1, v ? 1 : 0)); }
  void AddStringArray(const std::string& key, const std::vector<std::string>& v) {
    std::string p;
    Append<uint32_t>(&p, 8);
    Append<uint64_t>(&p, v.size());
    for (const auto& s : v) AppendString(&p, s);
    AddKv(key, 9, p);
  }
  void AddI32Array(const std::string& key, const std::vector<int32_t>& v) {
    std::string p;
    Append<uint32_t>(&p, 5);
    Append<uint64_t>(&p, v.size());
    for (int32_t x : v) Append(&p, x);
    AddKv(key, 9, p);
  }
  void AddF32Array(const std::string& key, const std::vector<float>& v) {
    std::string p;
    Append<uint32_t>(&p, 6);
    Append<uint64_t>(&p, v.size());
    for (float x : v) Append(&p, x);
    AddKv(key, 9, p);
  }
  // `ne` innermost first; `data` the raw bytes. The data offset is assigned at Build() unless
  // `offset_override` is given.
  void AddTensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::string data,
                 uint64_t offset_override = UINT64_MAX) {
    tensors_.push_back({name, std::move(ne), type, std::move(data), offset_override});
  }

  std::string Build(uint32_t version = 3, uint64_t alignment = 32) const {
    std::string out = "GGUF";
    Append(&out, version);
    Append<uint64_t>(&out, tensors_.size());
    Append<uint64_t>(&out, kvs_.size());
    for (const auto& kv : kvs_) out += kv;
    uint64_t offset = 0;
    std::vector<uint64_t> offsets;
    for (const auto& t : tensors_) {
      AppendString(&out, t.name);
      Append<uint32_t>(&out, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t n : t.ne) Append(&out, n);
      Append(&out, t.type);
      offset = (offset + alignment - 1) / alignment * alignment;
      offsets.push_back(offset);
      Append(&out, t.offset_override != UINT64_MAX ? t.offset_override : offset);
      offset += t.data.size();
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    const size_t data_start = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      out.resize(data_start + offsets[i], '\0');
      out += tensors_[i].data;
    }
    return out;
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::string data;
    uint64_t offset_override;
  };
  std::vector<std::string> kvs_;
  std::vector<Tensor> tensors_;
};

// n values k/8 for small integers k: exact in F32, F16 and BF16. `seed` varies the pattern.
inline std::vector<float> Pattern(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; ++k)
    v[k] = static_cast<float>(static_cast<int>((k * 7 + seed * 13) % 31) - 15) / 8.0f;
  return v;
}

// F32 values as raw bytes.
inline std::string F32Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

// F16 bytes of `v` (values should be exactly representable).
inline std::string F16Bytes(const std::vector<float>& v) {
  std::string out;
  for (float x : v) Append<uint16_t>(&out, FloatToHalf(x));
  return out;
}

// BF16 bytes of `v` by truncation (values should be exactly representable).
inline std::string Bf16Bytes(const std::vector<float>& v) {
  std::string out;
  for (float x : v) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    Append<uint16_t>(&out, static_cast<uint16_t>(bits >> 16));
  }
  return out;
}

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", or anything for error tests
  std::vector<int64_t> shape;
  std::string data;
};

// A .safetensors file of `entries`, laid out back to back. The header is padded with spaces to a
// multiple of 8 bytes, then `extra_header_bytes` more (an odd number misaligns the data).
inline std::string SafetensorsBytes(const std::vector<SafetensorsEntry>& entries,
                                    size_t extra_header_bytes = 0) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& e : entries) {
    header[e.name] = {{"dtype", e.dtype},
                      {"shape", e.shape},
                      {"data_offsets", {data.size(), data.size() + e.data.size()}}};
    data += e.data;
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  text.append(extra_header_bytes, ' ');
  std::string out;
  Append<uint64_t>(&out, text.size());
  return out + text + data;
}

}  // namespace strata::testing_files
