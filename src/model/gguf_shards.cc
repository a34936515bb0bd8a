#include "src/model/gguf_shards.h"

#include <cstdio>
#include <filesystem>
#include <optional>

namespace strata {
namespace {

// gguf-split's name for shard `no` (1-based) of `count`: "-00002-of-00003.gguf".
std::string ShardSuffix(int64_t no, int64_t count) {
  char suffix[48];
  std::snprintf(suffix, sizeof(suffix), "-%05lld-of-%05lld.gguf", static_cast<long long>(no),
                static_cast<long long>(count));
  return suffix;
}

std::optional<int64_t> IntKey(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.Find(key);
  return v ? v->AsInt() : std::nullopt;
}

}  // namespace

Result<GgufShards> GgufShards::Open(const std::string& path) {
  GgufShards s;
  const auto add = [&s](const std::string& file_path) -> Status {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(file_path));
    STRATA_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Parse(*file));
    s.files_.push_back(std::move(file));
    s.shards_.push_back(std::move(gguf));
    return Status::Ok();
  };
  STRATA_RETURN_IF_ERROR(add(path));
  const int64_t count = IntKey(s.shards_[0], "split.count").value_or(1);
  const int64_t no = IntKey(s.shards_[0], "split.no").value_or(0);
  if (count < 1 || count > 99999 || no < 0 || no >= count) {
    return Status::Corrupt(path + ": split.no " + std::to_string(no) + " and split.count " +
                           std::to_string(count) + " do not describe a shard");
  }
  if (count == 1) {
    STRATA_RETURN_IF_ERROR(s.IndexTensors());
    return s;
  }
  const std::string first_suffix = ShardSuffix(1, count);
  if (no != 0) {
    const std::string own = ShardSuffix(no + 1, count);
    const std::string first = path.ends_with(own)
                                  ? path.substr(0, path.size() - own.size()) + first_suffix
                                  : "the file named *" + first_suffix;
    return Status::InvalidArgument(path + " is shard " + std::to_string(no + 1) + " of " +
                                   std::to_string(count) + " of a split GGUF model; pass the " +
                                   "first shard, " + first);
  }
  if (!path.ends_with(first_suffix)) {
    return Status::InvalidArgument(path + " is the first of " + std::to_string(count) +
                                   " shards of a split GGUF model, but its name does not end in " +
                                   first_suffix + ", so the others cannot be found; keep the " +
                                   "names gguf-split gave them");
  }
  const std::string prefix = path.substr(0, path.size() - first_suffix.size());
  for (int64_t i = 2; i <= count; ++i) {
    const std::string shard = prefix + ShardSuffix(i, count);
    std::error_code ec;
    if (!std::filesystem::exists(shard, ec)) {
      return Status::NotFound(path + " is split in " + std::to_string(count) + " shards, and " +
                              shard + " is missing; put every shard in the same directory");
    }
    STRATA_RETURN_IF_ERROR(add(shard));
    const GgufFile& f = s.shards_.back();
    if (IntKey(f, "split.no") != i - 1 || IntKey(f, "split.count") != count) {
      return Status::Corrupt(shard + ": its split.no and split.count do not say shard " +
                             std::to_string(i) + " of " + std::to_string(count));
    }
  }
  if (const std::optional<int64_t> total = IntKey(s.shards_[0], "split.tensors.count");
      total && *total != s.TensorCount()) {
    return Status::Corrupt(path + ": split.tensors.count says " + std::to_string(*total) +
                           " tensors, the shards hold " + std::to_string(s.TensorCount()));
  }
  STRATA_RETURN_IF_ERROR(s.IndexTensors());
  return s;
}

int64_t GgufShards::TensorCount() const {
  int64_t n = 0;
  for (const GgufFile& f : shards_) n += static_cast<int64_t>(f.tensors().size());
  return n;
}

Status GgufShards::IndexTensors() {
  for (size_t k = 0; k < shards_.size(); ++k) {
    for (const GgufTensorInfo& info : shards_[k].tensors()) {
      if (!by_name_.try_emplace(info.name, Located{k, &info}).second) {
        return Status::Corrupt(shards_[k].path() + ": tensor '" + info.name +
                               "' is also in an earlier shard");
      }
      tensors_.push_back(&info);
    }
  }
  return Status::Ok();
}

const GgufTensorInfo* GgufShards::FindTensor(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second.info;
}

const uint8_t* GgufShards::TensorData(const GgufTensorInfo& info) const {
  return shards_[by_name_.find(info.name)->second.shard].TensorData(info);
}

}  // namespace strata
