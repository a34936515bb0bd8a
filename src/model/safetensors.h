// Readers for Hugging Face safetensors checkpoints: one `.safetensors` file (u64 little-endian
// header length, JSON header, data) or a sharded checkpoint named by
// `model.safetensors.index.json`. Tensors are views into the memory maps; nothing is copied.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/core/status.h"
#include "src/core/tensor.h"

namespace strata {

class MappedFile;

// Parses the header of a mapped `.safetensors` file into views of its tensors, keyed by name.
// Every data_offsets pair must lie inside the data section with end >= begin and size equal to
// numel * dtype size; a header that breaks this is Corrupt, a dtype other than F32/F16/BF16 is
// Unsupported (naming the tensor and dtype). REQUIRES: `file` outlives the views.
Result<std::map<std::string, TensorView>> ParseSafetensors(const MappedFile& file);

// A whole checkpoint: its mapped files and the union of their tensors. Not thread-safe to mutate;
// const access is thread-safe.
class SafetensorsCheckpoint {
 public:
  // Opens a single `.safetensors` file.
  static Result<SafetensorsCheckpoint> OpenFile(const std::string& path);
  // Opens `dir`/model.safetensors, or else `dir`/model.safetensors.index.json and every shard its
  // `weight_map` names (NotFound naming the shard when one is missing; Corrupt when a shard lacks
  // a tensor the index puts there or two shards hold the same name). NotFound when neither exists.
  static Result<SafetensorsCheckpoint> OpenDirectory(const std::string& dir);

  // The tensor named `name`, or nullptr.
  const TensorView* Find(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  // Hands over the memory maps; the views stay valid as long as the returned files live.
  std::vector<std::unique_ptr<MappedFile>> TakeFiles() { return std::move(files_); }

 private:
  Status AddFile(const std::string& path);

  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> tensor_file_;  // which file each tensor came from
};

}  // namespace strata
