#include "src/model/model.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include "src/core/check.h"
#include "src/core/host_memory.h"
#include "src/io/mapped_file.h"
#include "src/model/gguf_dequant.h"
#include "src/model/gguf_q4.h"
#include "src/model/model_builder.h"
#include "src/model/store.h"

namespace strata {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Model::~Model() {
  if (reserved_ != nullptr) ::munmap(reserved_, reserved_bytes_);
}

uint64_t Model::weight_bytes() const {
  std::unordered_set<const void*> seen;
  uint64_t total = 0;
  auto add = [&](const TensorView& v) {
    if (v.present() && seen.insert(v.data).second) total += v.bytes();
  };
  const ModelWeights& w = weights_;
  for (const TensorView* v :
       {&w.token_embedding, &w.position_embedding, &w.final_norm, &w.final_norm_bias, &w.lm_head}) {
    add(*v);
  }
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* v :
         {&l.attn_norm, &l.attn_norm_bias, &l.wq,     &l.wk,     &l.wv,   &l.wo,
          &l.bq,        &l.q_norm,         &l.k_norm, &l.bk,     &l.bv,   &l.bo,
          &l.mlp_norm,  &l.mlp_norm_bias,  &l.w_gate, &l.b_gate, &l.w_up, &l.w_down,
          &l.b_up,      &l.b_down}) {
      add(*v);
    }
  }
  return total;
}

int64_t Model::StoreOffsetOf(const void* data) const {
  if (store_data_ == nullptr) return -1;
  const auto* p = static_cast<const uint8_t*>(data);
  const uint8_t* base = store_data_->data();
  if (p < base || p >= base + store_data_->size()) return -1;
  return p - base;
}

bool Model::IsDeferred(const TensorView& view) const { return deferred_.count(view.data) > 0; }

int Model::q4_group() const {
  if (!q4_planes_.empty()) return q4_planes_.front().group;
  return gguf_q4_.empty() ? 64 : 32;
}

bool Model::GgufQ4Planes(const TensorView& view, uint8_t* codes, uint16_t* params) const {
  const auto it = gguf_q4_.find(view.data);
  if (it == gguf_q4_.end() || view.shape.size() != 2) return false;
  return strata::GgufQ4Planes(it->second.ggml_type, it->second.blocks, view.dim(0), view.dim(1),
                              it->second.unpermute_heads, codes, params);
}

Status Model::ExpandDeferred(const TensorView& view, float* dst) const {
  const auto it = deferred_.find(view.data);
  STRATA_CHECK_MSG(it != deferred_.end(), "ExpandDeferred of a tensor that is not deferred");
  return ExpandGgufTensor(it->second.ggml_type, static_cast<const uint8_t*>(view.data), view.shape,
                          it->second.unpermute_heads, dst);
}

void Model::ReadTensorBytes(const TensorView& view, uint64_t offset, uint64_t bytes,
                            void* dst) const {
  STRATA_CHECK(view.dtype != DType::kQ4 && offset + bytes <= view.bytes() &&
               offset % DTypeBytes(view.dtype) == 0 && bytes % DTypeBytes(view.dtype) == 0);
  if (on_demand_ != nullptr) {
    on_demand_(view, offset, bytes, dst);
  } else {
    std::memcpy(dst, static_cast<const uint8_t*>(view.data) + offset, bytes);
  }
}

ModelBuilder::ModelBuilder(std::string source) : model_(new Model()) {
  model_->source_ = std::move(source);
}

void ModelBuilder::AddFile(std::unique_ptr<MappedFile> file) {
  model_->files_.push_back(std::move(file));
}

void ModelBuilder::AddStoreData(std::unique_ptr<MappedFile> file) {
  model_->store_data_path_ = file->path();
  model_->store_data_ = file.get();
  AddFile(std::move(file));
}

float* ModelBuilder::NewBuffer(size_t n) {
  model_->owned_.emplace_back(n);
  return model_->owned_.back().data();
}

TensorView ModelBuilder::Defer(const TensorView& view, uint32_t ggml_type, int unpermute_heads) {
  model_->deferred_[view.data] = {ggml_type, unpermute_heads, view.bytes()};
  if (GgufHasQ4Blocks(ggml_type) && view.shape.size() == 2) {
    model_->gguf_q4_[view.data] = {static_cast<const uint8_t*>(view.data), ggml_type,
                                   unpermute_heads};
  }
  return view;
}

Status ModelBuilder::ExpandDeferred(int64_t memory_bytes) {
  uint64_t needed = 0;
  for (const auto& [data, d] : model_->deferred_) needed += d.f32_bytes;
  if (needed > static_cast<uint64_t>(std::max<int64_t>(0, memory_bytes))) {
    char sizes[96];
    std::snprintf(sizes, sizeof(sizes), "%.2f GB, more than the %.2f GB", needed / 1e9,
                  memory_bytes / 1e9);
    return Status::ResourceExhausted(
        model_->source_ + ": expanding its quantized tensors to fp32 needs " + sizes +
        " of memory available; convert it once with `strata convert --model " + model_->source_ +
        " --out DIR --compress-weight` (which expands one tensor at a time) and pass --model DIR");
  }
  std::map<const void*, const float*> expanded;  // a tied head is expanded once
  for (const WeightSlot& slot : WeightSlots(model_->config_, &model_->weights_)) {
    TensorView& v = *slot.view;
    if (!model_->IsDeferred(v)) continue;
    auto [it, fresh] = expanded.try_emplace(v.data, nullptr);
    if (fresh) {
      float* dst = NewBuffer(static_cast<size_t>(v.numel()));
      STRATA_RETURN_IF_ERROR(model_->ExpandDeferred(v, dst));
      it->second = dst;
      const auto blocks = model_->gguf_q4_.find(v.data);
      if (blocks != model_->gguf_q4_.end()) {  // its blocks stay the 4-bit source
        model_->gguf_q4_[dst] = blocks->second;
        model_->gguf_q4_.erase(blocks);
      }
    }
    v.data = it->second;
  }
  model_->deferred_.clear();
  return Status::Ok();
}

Result<const uint8_t*> ModelBuilder::ReserveOnDemand(uint64_t bytes, TensorBytesMaker maker) {
  STRATA_CHECK(model_->reserved_ == nullptr && bytes > 0);
  // PROT_NONE and MAP_NORESERVE: address space only, no memory, and a read of a view faults.
  void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return Status::ResourceExhausted("cannot reserve " + std::to_string(bytes) +
                                     " bytes of address space for weights made on demand: " +
                                     std::strerror(errno));
  }
  model_->reserved_ = p;
  model_->reserved_bytes_ = bytes;
  model_->on_demand_ = std::move(maker);
  return static_cast<const uint8_t*>(p);
}

const Q4Planes* ModelBuilder::AddQ4Planes(Q4Planes planes) {
  return &model_->q4_planes_.emplace_back(planes);
}

TensorView ModelBuilder::Aligned(const TensorView& view) {
  if (reinterpret_cast<uintptr_t>(view.data) % DTypeBytes(view.dtype) == 0) return view;
  const size_t n = static_cast<size_t>(view.numel());
  // Converters may assume element alignment, so the bytes move to aligned storage first.
  std::vector<uint32_t> aligned((n * DTypeBytes(view.dtype) + 3) / 4);
  std::memcpy(aligned.data(), view.data, n * DTypeBytes(view.dtype));
  float* copy = NewBuffer(n);
  ConvertToFloat(view.dtype, aligned.data(), copy, n);
  return TensorView{DType::kF32, view.shape, copy};
}

Status ModelBuilder::CheckShape(const std::string& name, const std::vector<int64_t>& shape,
                                const std::vector<int64_t>& expected) const {
  if (shape == expected) return Status::Ok();
  return Status::Corrupt(model_->source_ + ": tensor '" + name + "' has shape " +
                         ShapeString(shape) + " but the config implies " + ShapeString(expected));
}

Result<std::unique_ptr<Model>> LoadModel(const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return Status::NotFound(path + ": no such model file or directory");
  }
  if (std::filesystem::is_directory(status)) {
    return IsStoreDirectory(path) ? LoadStore(path) : LoadHfModel(path);
  }
  if (!options.expand_gguf) return LoadGgufModel(path, std::nullopt);
  return LoadGgufModel(
      path, options.expand_memory_bytes >= 0 ? options.expand_memory_bytes : AvailableHostBytes());
}

}  // namespace strata
