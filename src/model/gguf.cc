#include "src/model/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "src/io/mapped_file.h"

namespace strata {
namespace {

constexpr uint64_t kMaxKeyBytes = 65535;  // the GGUF spec's limit on key length
constexpr uint64_t kMaxTensorNameBytes = 4096;
constexpr uint32_t kMaxDims = 4;   // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 4;  // arrays of arrays nest no deeper than this
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;
constexpr uint64_t kMaxReserve = uint64_t{1} << 16;

struct NamedTraits {
  uint32_t number;
  GgmlTypeTraits traits;
};

// Block layouts from ggml-common.h; numbers are enum ggml_type.
constexpr NamedTraits kGgmlTypes[] = {
    {0, {"F32", 1, 4}},         {1, {"F16", 1, 2}},         {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},      {6, {"Q5_0", 32, 22}},      {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},      {10, {"Q2_K", 256, 84}},    {11, {"Q3_K", 256, 110}},
    {12, {"Q4_K", 256, 144}},   {13, {"Q5_K", 256, 176}},   {14, {"Q6_K", 256, 210}},
    {15, {"Q8_K", 256, 292}},   {16, {"IQ2_XXS", 256, 66}}, {17, {"IQ2_XS", 256, 74}},
    {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},   {20, {"IQ4_NL", 32, 18}},
    {21, {"IQ3_S", 256, 110}},  {22, {"IQ2_S", 256, 82}},   {23, {"IQ4_XS", 256, 136}},
    {24, {"I8", 1, 1}},         {25, {"I16", 1, 2}},        {26, {"I32", 1, 4}},
    {27, {"I64", 1, 8}},        {28, {"F64", 1, 8}},        {29, {"IQ1_M", 256, 56}},
    {30, {"BF16", 1, 2}},       {34, {"TQ1_0", 256, 54}},   {35, {"TQ2_0", 256, 66}},
    {39, {"MXFP4", 32, 17}},
};

// Bytes of one scalar of `type`; 0 for strings, arrays and numbers outside the enum.
uint64_t ScalarBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

std::optional<int64_t> IntFromBits(GgufValueType type, uint64_t bits) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kBool:
      return static_cast<int64_t>(bits);
    case GgufValueType::kInt8:
      return static_cast<int8_t>(bits);
    case GgufValueType::kInt16:
      return static_cast<int16_t>(bits);
    case GgufValueType::kInt32:
      return static_cast<int32_t>(bits);
    case GgufValueType::kInt64:
      return static_cast<int64_t>(bits);
    case GgufValueType::kUint64:
      if (bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(bits);
    default:
      return std::nullopt;
  }
}

uint64_t LoadBits(const uint8_t* p, uint64_t n) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, n);  // little-endian host: the low n bytes
  return bits;
}

}  // namespace

const GgmlTypeTraits* GgmlTypeInfo(uint32_t type) {
  for (const NamedTraits& t : kGgmlTypes) {
    if (t.number == type) return &t.traits;
  }
  return nullptr;
}

std::string GgmlTypeName(uint32_t type) {
  const GgmlTypeTraits* t = GgmlTypeInfo(type);
  return t != nullptr ? std::string(t->name) : "type " + std::to_string(type);
}

std::optional<int64_t> GgufValue::AsInt() const { return IntFromBits(type_, bits_); }

std::optional<double> GgufValue::AsFloat() const {
  if (type_ == GgufValueType::kFloat32) {
    float f;
    const uint32_t b = static_cast<uint32_t>(bits_);
    std::memcpy(&f, &b, 4);
    return f;
  }
  if (type_ == GgufValueType::kFloat64) {
    double d;
    std::memcpy(&d, &bits_, 8);
    return d;
  }
  if (type_ == GgufValueType::kUint64) return static_cast<double>(bits_);
  const std::optional<int64_t> i = AsInt();
  if (!i) return std::nullopt;
  return static_cast<double>(*i);
}

const std::string* GgufValue::AsString() const {
  return type_ == GgufValueType::kString ? &string_ : nullptr;
}

std::optional<bool> GgufValue::AsBool() const {
  if (type_ != GgufValueType::kBool) return std::nullopt;
  return bits_ != 0;
}

std::optional<int64_t> GgufValue::IntAt(uint64_t i) const {
  if (type_ != GgufValueType::kArray || raw_ == nullptr || i >= count_) return std::nullopt;
  const uint64_t n = ScalarBytes(element_type_);
  return IntFromBits(element_type_, LoadBits(raw_ + i * n, n));
}

std::optional<double> GgufValue::FloatAt(uint64_t i) const {
  if (type_ != GgufValueType::kArray || raw_ == nullptr || i >= count_) return std::nullopt;
  GgufValue element;
  element.type_ = element_type_;
  const uint64_t n = ScalarBytes(element_type_);
  element.bits_ = LoadBits(raw_ + i * n, n);
  return element.AsFloat();
}

// Reads a GGUF header front to back with a cursor that never passes the end of the map.
class GgufParser {
 public:
  explicit GgufParser(const MappedFile& file) : file_(file) {}

  Result<GgufFile> Run() {
    GgufFile out;
    out.path_ = file_.path();
    out.base_ = file_.data();
    char magic[4];
    if (file_.size() < 4) return Fail("file is too short to be GGUF");
    STRATA_RETURN_IF_ERROR(ReadBytes(magic, 4, "magic"));
    if (std::memcmp(magic, "GGUF", 4) != 0) return Fail("not a GGUF file (bad magic)");
    STRATA_RETURN_IF_ERROR(Read(&out.version_, "version"));
    if (out.version_ != 2 && out.version_ != 3) {
      return Status::Unsupported(file_.path() + ": GGUF version " + std::to_string(out.version_) +
                                 " (strata reads little-endian versions 2 and 3)");
    }
    uint64_t n_tensors = 0, n_kv = 0;
    STRATA_RETURN_IF_ERROR(Read(&n_tensors, "tensor count"));
    STRATA_RETURN_IF_ERROR(Read(&n_kv, "metadata count"));
    // A key/value takes at least 13 bytes and a tensor info at least 32; larger counts cannot fit.
    if (n_kv > Remaining() / 13)
      return Fail("metadata count " + std::to_string(n_kv) + " too large");
    if (n_tensors > Remaining() / 32) {
      return Fail("tensor count " + std::to_string(n_tensors) + " too large for the file");
    }
    for (uint64_t i = 0; i < n_kv; ++i) {
      std::string key;
      STRATA_RETURN_IF_ERROR(ReadString(&key, kMaxKeyBytes, "metadata key"));
      uint32_t type = 0;
      STRATA_RETURN_IF_ERROR(Read(&type, "metadata type"));
      GgufValue value;
      STRATA_RETURN_IF_ERROR(ReadValue(type, 0, key, &value));
      if (!out.metadata_.emplace(key, std::move(value)).second) {
        return Fail("duplicate metadata key '" + key + "'");
      }
    }
    if (const GgufValue* a = out.Find("general.alignment")) {
      const std::optional<int64_t> v = a->AsInt();
      if (!v || *v <= 0 || static_cast<uint64_t>(*v) > kMaxAlignment || (*v & (*v - 1)) != 0) {
        return Fail("general.alignment must be a power of two integer");
      }
      out.alignment_ = static_cast<uint64_t>(*v);
    }
    std::vector<uint64_t> relative_offsets;
    for (uint64_t i = 0; i < n_tensors; ++i) {
      GgufTensorInfo info;
      uint64_t relative = 0;
      STRATA_RETURN_IF_ERROR(ReadTensorInfo(&info, &relative));
      if (!out.tensor_index_.emplace(info.name, out.tensors_.size()).second) {
        return Fail("duplicate tensor '" + info.name + "'");
      }
      out.tensors_.push_back(std::move(info));
      relative_offsets.push_back(relative);
    }
    const uint64_t misalignment = pos_ % out.alignment_;
    out.data_offset_ = pos_ + (misalignment == 0 ? 0 : out.alignment_ - misalignment);
    for (size_t i = 0; i < out.tensors_.size(); ++i) {
      GgufTensorInfo& t = out.tensors_[i];
      const uint64_t rel = relative_offsets[i];
      if (rel % out.alignment_ != 0) {
        return Fail("tensor '" + t.name + "' offset " + std::to_string(rel) +
                    " is not a multiple of the alignment " + std::to_string(out.alignment_));
      }
      if (rel > file_.size() || !file_.Contains(out.data_offset_ + rel, t.bytes)) {
        return Status::Corrupt(file_.path() + ": tensor '" + t.name + "' data (" +
                               std::to_string(t.bytes) + " bytes at data offset " +
                               std::to_string(rel) + ") lies outside the file of " +
                               std::to_string(file_.size()) + " bytes; the file is truncated");
      }
      t.offset = out.data_offset_ + rel;
    }
    return out;
  }

 private:
  uint64_t Remaining() const { return file_.size() - pos_; }

  Status Fail(const std::string& what) const {
    return Status::Corrupt(file_.path() + ": " + what + " (GGUF header, byte " +
                           std::to_string(pos_) + ")");
  }

  Status ReadBytes(void* out, uint64_t n, const char* what) {
    if (n > Remaining()) return Fail(std::string("truncated while reading ") + what);
    std::memcpy(out, file_.data() + pos_, n);
    pos_ += n;
    return Status::Ok();
  }

  template <typename T>
  Status Read(T* out, const char* what) {
    return ReadBytes(out, sizeof(T), what);
  }

  Status ReadString(std::string* out, uint64_t max_bytes, const char* what) {
    uint64_t n = 0;
    STRATA_RETURN_IF_ERROR(Read(&n, what));
    if (n > Remaining() || n > max_bytes) {
      return Fail(std::string(what) + " length " + std::to_string(n) + " exceeds the file");
    }
    out->assign(reinterpret_cast<const char*>(file_.data() + pos_), n);
    pos_ += n;
    return Status::Ok();
  }

  Status ReadValue(uint32_t type_number, int depth, const std::string& key, GgufValue* out) {
    if (type_number > static_cast<uint32_t>(GgufValueType::kFloat64)) {
      return Fail("metadata '" + key + "' has unknown value type " + std::to_string(type_number));
    }
    const auto type = static_cast<GgufValueType>(type_number);
    out->type_ = type;
    if (type == GgufValueType::kString) {
      return ReadString(&out->string_, std::numeric_limits<uint64_t>::max(), "string");
    }
    if (type != GgufValueType::kArray) {
      const uint64_t n = ScalarBytes(type);
      if (n > Remaining()) return Fail("truncated in metadata '" + key + "'");
      out->bits_ = LoadBits(file_.data() + pos_, n);
      pos_ += n;
      return Status::Ok();
    }
    if (depth >= kMaxArrayDepth) return Fail("metadata '" + key + "' nests arrays too deeply");
    uint32_t elem = 0;
    STRATA_RETURN_IF_ERROR(Read(&elem, "array element type"));
    if (elem > static_cast<uint32_t>(GgufValueType::kFloat64)) {
      return Fail("metadata '" + key + "' is an array of unknown type " + std::to_string(elem));
    }
    out->element_type_ = static_cast<GgufValueType>(elem);
    STRATA_RETURN_IF_ERROR(Read(&out->count_, "array length"));
    const uint64_t count = out->count_;
    // Strings take at least 8 bytes (their length) and arrays 12 (type and length).
    const uint64_t min_bytes = elem == static_cast<uint32_t>(GgufValueType::kString) ? 8
                               : elem == static_cast<uint32_t>(GgufValueType::kArray)
                                   ? 12
                                   : ScalarBytes(out->element_type_);
    if (count > Remaining() / min_bytes) {
      return Fail("metadata '" + key + "' array length " + std::to_string(count) +
                  " exceeds the file");
    }
    // Reserve a bounded amount: a crafted count must not allocate before its bytes are read.
    const uint64_t reserve = std::min<uint64_t>(count, kMaxReserve);
    if (out->element_type_ == GgufValueType::kString) {
      out->strings_.reserve(reserve);
      for (uint64_t i = 0; i < count; ++i) {
        std::string s;
        STRATA_RETURN_IF_ERROR(ReadString(&s, std::numeric_limits<uint64_t>::max(), "string"));
        out->strings_.push_back(std::move(s));
      }
    } else if (out->element_type_ == GgufValueType::kArray) {
      out->arrays_.reserve(reserve);
      for (uint64_t i = 0; i < count; ++i) {
        GgufValue v;
        STRATA_RETURN_IF_ERROR(ReadValue(elem, depth + 1, key, &v));
        out->arrays_.push_back(std::move(v));
      }
    } else {
      out->raw_ = file_.data() + pos_;
      pos_ += count * min_bytes;
    }
    return Status::Ok();
  }

  Status ReadTensorInfo(GgufTensorInfo* info, uint64_t* relative_offset) {
    STRATA_RETURN_IF_ERROR(ReadString(&info->name, kMaxTensorNameBytes, "tensor name"));
    uint32_t n_dims = 0;
    STRATA_RETURN_IF_ERROR(Read(&n_dims, "tensor dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Fail("tensor '" + info->name + "' has " + std::to_string(n_dims) +
                  " dimensions (1 to 4 allowed)");
    }
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      STRATA_RETURN_IF_ERROR(Read(&ne, "tensor dimension"));
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (ne != 0 && static_cast<uint64_t>(numel) >
                          static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne)) {
        return Fail("tensor '" + info->name + "' element count overflows");
      }
      info->ne.push_back(static_cast<int64_t>(ne));
      numel *= static_cast<int64_t>(ne);
    }
    info->numel = numel;
    STRATA_RETURN_IF_ERROR(Read(&info->type, "tensor type"));
    const GgmlTypeTraits* traits = GgmlTypeInfo(info->type);
    if (traits == nullptr) {
      return Status::Unsupported(file_.path() + ": tensor '" + info->name +
                                 "' has unknown ggml type " + std::to_string(info->type));
    }
    if (info->ne[0] % traits->block_size != 0) {
      return Fail("tensor '" + info->name + "' row length " + std::to_string(info->ne[0]) +
                  " is not a multiple of the " + traits->name + " block size");
    }
    const uint64_t blocks = static_cast<uint64_t>(numel) / traits->block_size;
    if (blocks > std::numeric_limits<uint64_t>::max() / traits->type_bytes) {
      return Fail("tensor '" + info->name + "' byte size overflows");
    }
    info->bytes = blocks * traits->type_bytes;
    return Read(relative_offset, "tensor offset");
  }

  const MappedFile& file_;
  uint64_t pos_ = 0;
};

Result<GgufFile> GgufFile::Parse(const MappedFile& file) { return GgufParser(file).Run(); }

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace strata
