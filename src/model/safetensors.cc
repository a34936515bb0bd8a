#include "src/model/safetensors.h"

#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "src/io/mapped_file.h"
#include "src/model/json_file.h"

namespace strata {
namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;  // the safetensors format's own limit

// Reads a non-negative JSON integer; false for anything else.
bool AsCount(const nlohmann::json& v, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;
  *out = v.get<uint64_t>();
  return true;
}

// Builds the view of tensor `name` from its header entry. `data`/`data_bytes` is the data section.
Status ParseEntry(const std::string& path, const std::string& name, const nlohmann::json& entry,
                  const uint8_t* data, uint64_t data_bytes, TensorView* out) {
  const std::string where = path + ": tensor '" + name + "'";
  if (!entry.is_object()) return Status::Corrupt(where + ": header entry is not an object");
  const std::optional<std::string> dtype_name = JsonString(entry, "dtype");
  if (!dtype_name) return Status::Corrupt(where + ": missing string 'dtype'");
  const std::optional<DType> dtype = DTypeFromName(*dtype_name);
  if (!dtype) {
    return Status::Unsupported(where + " has dtype " + *dtype_name +
                               "; strata reads F32, F16 and BF16 safetensors");
  }
  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array() || shape_it->size() > 8) {
    return Status::Corrupt(where + ": 'shape' must be an array of at most 8 sizes");
  }
  out->dtype = *dtype;
  out->shape.clear();
  uint64_t numel = 1;
  for (const nlohmann::json& d : *shape_it) {
    uint64_t n = 0;
    if (!AsCount(d, &n)) return Status::Corrupt(where + ": 'shape' holds a non-integer size");
    if (n != 0 && numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / n) {
      return Status::Corrupt(where + ": element count overflows");
    }
    numel *= n;
    out->shape.push_back(static_cast<int64_t>(n));
  }
  auto offsets = entry.find("data_offsets");
  uint64_t begin = 0, end = 0;
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !AsCount((*offsets)[0], &begin) || !AsCount((*offsets)[1], &end)) {
    return Status::Corrupt(where + ": 'data_offsets' must be two non-negative integers");
  }
  if (end < begin || end > data_bytes) {
    return Status::Corrupt(where + ": data_offsets [" + std::to_string(begin) + ", " +
                           std::to_string(end) + ") lie outside the data section of " +
                           std::to_string(data_bytes) + " bytes; the file is truncated or corrupt");
  }
  if (numel > std::numeric_limits<uint64_t>::max() / DTypeBytes(*dtype)) {
    return Status::Corrupt(where + ": byte size overflows");
  }
  if (end - begin != numel * DTypeBytes(*dtype)) {
    return Status::Corrupt(where + ": holds " + std::to_string(end - begin) +
                           " bytes but its shape and dtype need " +
                           std::to_string(numel * DTypeBytes(*dtype)));
  }
  out->data = data + begin;
  return Status::Ok();
}

}  // namespace

Result<std::map<std::string, TensorView>> ParseSafetensors(const MappedFile& file) {
  const std::string& path = file.path();
  uint64_t header_bytes = 0;
  if (file.size() < 8) return Status::Corrupt(path + ": too short to be a safetensors file");
  std::memcpy(&header_bytes, file.data(), 8);
  if (header_bytes > kMaxHeaderBytes || !file.Contains(8, header_bytes)) {
    return Status::Corrupt(path + ": header length " + std::to_string(header_bytes) +
                           " exceeds the file (" + std::to_string(file.size()) +
                           " bytes) or the 100 MiB limit; is this a safetensors file?");
  }
  const char* text = reinterpret_cast<const char*>(file.data() + 8);
  const nlohmann::json header = nlohmann::json::parse(text, text + header_bytes, nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    return Status::Corrupt(path + ": header is not a JSON object");
  }
  const uint8_t* data = file.data() + 8 + header_bytes;
  const uint64_t data_bytes = file.size() - 8 - header_bytes;
  std::map<std::string, TensorView> tensors;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    TensorView view;
    STRATA_RETURN_IF_ERROR(ParseEntry(path, it.key(), it.value(), data, data_bytes, &view));
    tensors.emplace(it.key(), std::move(view));
  }
  return tensors;
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::OpenFile(const std::string& path) {
  SafetensorsCheckpoint ckpt;
  STRATA_RETURN_IF_ERROR(ckpt.AddFile(path));
  return ckpt;
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::OpenDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) return OpenFile(single.string());
  if (!fs::exists(index_path, ec)) {
    return Status::NotFound(dir + " holds neither model.safetensors nor " +
                            "model.safetensors.index.json (only safetensors checkpoints are read; "
                            "convert .bin weights with transformers' save_pretrained)");
  }
  STRATA_ASSIGN_OR_RETURN(nlohmann::json index, ReadJsonFile(index_path.string()));
  auto map_it = index.is_object() ? index.find("weight_map") : index.end();
  if (map_it == index.end() || !map_it->is_object()) {
    return Status::Corrupt(index_path.string() + ": no 'weight_map' object");
  }
  std::map<std::string, std::string> expected;  // tensor name -> shard file name
  for (auto it = map_it->begin(); it != map_it->end(); ++it) {
    const std::string* shard = it.value().get_ptr<const std::string*>();
    if (shard == nullptr || shard->empty() || fs::path(*shard).is_absolute() ||
        shard->find("..") != std::string::npos) {
      return Status::Corrupt(index_path.string() + ": weight_map entry for '" + it.key() +
                             "' is not a shard file name in the same directory");
    }
    expected.emplace(it.key(), *shard);
  }
  SafetensorsCheckpoint ckpt;
  for (const auto& [name, shard] : expected) {
    const std::string shard_path = (fs::path(dir) / shard).string();
    bool opened = false;
    for (const auto& file : ckpt.files_) opened = opened || file->path() == shard_path;
    if (!opened) {
      Status s = ckpt.AddFile(shard_path);
      if (!s.ok()) return s.WithContext("shard named by " + index_path.string());
    }
    auto where = ckpt.tensor_file_.find(name);
    if (where == ckpt.tensor_file_.end() || where->second != shard_path) {
      return Status::Corrupt(index_path.string() + " puts tensor '" + name + "' in " + shard +
                             ", which does not hold it");
    }
  }
  return ckpt;
}

Status SafetensorsCheckpoint::AddFile(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  STRATA_ASSIGN_OR_RETURN(auto tensors, ParseSafetensors(*file));
  for (auto& [name, view] : tensors) {
    auto [it, inserted] = tensor_file_.emplace(name, path);
    if (!inserted) {
      return Status::Corrupt("tensor '" + name + "' appears in both " + it->second + " and " +
                             path);
    }
    tensors_.emplace(name, std::move(view));
  }
  files_.push_back(std::move(file));
  return Status::Ok();
}

const TensorView* SafetensorsCheckpoint::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace strata
