// GgufShards: a GGUF model as one file or as the shards llama.cpp's gguf-split writes
// (NAME-00001-of-0000N.gguf ... NAME-0000N-of-0000N.gguf, each a GGUF file with some of the
// tensors; the first holds the model's metadata, and every shard split.no, split.count and,
// in the first, split.tensors.count). Large models are published this way.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/status.h"
#include "src/io/mapped_file.h"
#include "src/model/gguf.h"

namespace strata {

class GgufShards {
 public:
  // Maps and parses `path` and, when its split.count is above 1, the other shards beside it.
  // InvalidArgument when `path` is not the first shard (naming the one to pass); NotFound naming a
  // missing shard; Corrupt for shards that disagree (split.no, split.count, the tensor count) or
  // hold the same tensor twice.
  static Result<GgufShards> Open(const std::string& path);

  const std::string& path() const { return shards_.front().path(); }
  // Model metadata (the first shard's).
  const GgufValue* Find(std::string_view key) const { return shards_.front().Find(key); }
  // Every shard's tensors, shard after shard, each in file order.
  const std::vector<const GgufTensorInfo*>& tensors() const { return tensors_; }
  // The tensor named `name` in any shard, or nullptr.
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  // The first byte of a tensor's data, in its shard's map.
  // REQUIRES: `info` came from this object.
  const uint8_t* TensorData(const GgufTensorInfo& info) const;
  // Hands over the shards' maps, which must outlive every pointer taken from this object.
  std::vector<std::unique_ptr<MappedFile>> TakeFiles() { return std::move(files_); }

 private:
  int64_t TensorCount() const;
  // Indexes the parsed shards' tensors by name; Corrupt for a name held twice.
  Status IndexTensors();

  struct Located {
    size_t shard;
    const GgufTensorInfo* info;
  };
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<GgufFile> shards_;
  std::vector<const GgufTensorInfo*> tensors_;
  std::map<std::string, Located, std::less<>> by_name_;
};

}  // namespace strata
