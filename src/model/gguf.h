// GgufFile: a parsed GGUF (v2 or v3) header over a memory-mapped file — metadata key/values,
// tensor infos and the data section. Parsing bounds-checks every count, length, offset and size
// read from the file, so a truncated or crafted file yields a Status, never an out-of-bounds read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/status.h"

namespace strata {

class MappedFile;

// ggml tensor types strata can expand to F32. A GgufTensorInfo's type may hold any value that
// GgmlTypeInfo() knows; only these are dequantized.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
};

// The storage layout of one ggml type: `type_bytes` bytes hold `block_size` consecutive elements
// of a row.
struct GgmlTypeTraits {
  const char* name;  // "Q4_1"
  uint32_t block_size;
  uint32_t type_bytes;
};

// Traits of the ggml type numbered `type`, or nullptr when the number is not a ggml type.
const GgmlTypeTraits* GgmlTypeInfo(uint32_t type);
// "Q4_1", or "type 77" for a number GgmlTypeInfo() does not know.
std::string GgmlTypeName(uint32_t type);

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// One metadata value. Scalars are held by value; arrays of numbers keep a pointer into the mapped
// file (so a 50k-entry token-type array costs nothing), arrays of strings and arrays of arrays are
// copied out. REQUIRES: the MappedFile the value was parsed from outlives it.
class GgufValue {
 public:
  GgufValueType type() const { return type_; }

  // The scalar as an integer: any integer type or bool; nullopt for other types or a uint64 that
  // does not fit in int64.
  std::optional<int64_t> AsInt() const;
  // Any integer, float or bool scalar as a double; nullopt for strings and arrays.
  std::optional<double> AsFloat() const;
  // The string, or nullptr when the value is not a string.
  const std::string* AsString() const;
  std::optional<bool> AsBool() const;

  // Arrays only (type() == kArray): the element type and count.
  GgufValueType element_type() const { return element_type_; }
  uint64_t size() const { return count_; }
  // Element i of an array of integers or bools, as AsInt() would read it; nullopt when the array
  // holds anything else. REQUIRES: i < size().
  std::optional<int64_t> IntAt(uint64_t i) const;
  // Element i of an array of numbers or bools, as AsFloat() would read it; nullopt for other
  // arrays. REQUIRES: i < size().
  std::optional<double> FloatAt(uint64_t i) const;
  // The elements of an array of strings (empty for other arrays).
  const std::vector<std::string>& strings() const { return strings_; }
  // The elements of an array of arrays (empty for other arrays).
  const std::vector<GgufValue>& arrays() const { return arrays_; }

 private:
  friend class GgufParser;
  GgufValueType type_ = GgufValueType::kUint8;
  uint64_t bits_ = 0;  // scalar payload, little-endian bytes zero-extended
  std::string string_;
  GgufValueType element_type_ = GgufValueType::kUint8;
  uint64_t count_ = 0;
  const uint8_t* raw_ = nullptr;  // numeric array elements, in the map
  std::vector<std::string> strings_;
  std::vector<GgufValue> arrays_;
};

// One tensor as the header describes it.
struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the innermost (row length)
  uint32_t type = 0;        // a ggml type number known to GgmlTypeInfo()
  uint64_t offset = 0;      // absolute byte offset of the data in the file
  uint64_t bytes = 0;       // bytes of data
  int64_t numel = 0;

  // Outermost-first shape, as TensorView uses ([out, in] for a linear weight).
  std::vector<int64_t> Shape() const { return {ne.rbegin(), ne.rend()}; }
};

class GgufFile {
 public:
  // Parses the header of `file`. Corrupt (message names the file and the field) for a bad magic,
  // truncation, an offset or size outside the file, or an inconsistent count; Unsupported for a
  // version other than 2 or 3 or a tensor of an unknown ggml type.
  // REQUIRES: `file` outlives the returned object and every pointer taken from it.
  static Result<GgufFile> Parse(const MappedFile& file);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }      // general.alignment, default 32
  uint64_t data_offset() const { return data_offset_; }  // start of the data section
  const std::string& path() const { return path_; }

  // The value under `key`, or nullptr.
  const GgufValue* Find(std::string_view key) const;
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }

  // Tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // The tensor named `name`, or nullptr.
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  // The first byte of the tensor's data in the map.
  const uint8_t* TensorData(const GgufTensorInfo& info) const { return base_ + info.offset; }

 private:
  friend class GgufParser;
  std::string path_;
  const uint8_t* base_ = nullptr;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace strata
