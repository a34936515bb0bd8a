#include "src/model/store_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "src/io/checksum.h"
#include "src/model/store.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kStagingBytes = size_t{8} << 20;

// Appends extents to tensors.bin through two staging buffers: one fills while the other is
// written. REQUIRES: Finish() before the contents are trusted; the destructor only drains.
class ExtentWriter {
 public:
  ExtentWriter(FileEnv* env, std::unique_ptr<DiskFile> file, AlignedBuffer a, AlignedBuffer b)
      : env_(env), file_(std::move(file)), staging_{std::move(a), std::move(b)} {}
  ~ExtentWriter() {
    for (IoEvent& e : written_) e.Wait();  // no write may outlive its staging buffer
  }

  // Writes `bytes` from `data` at the next aligned offset, zero-padded; describes it in *out.
  Status Append(const void* data, uint64_t bytes, StoreExtent* out) {
    *out = StoreExtent{cursor_, bytes, Checksum64(data, bytes)};
    const auto* src = static_cast<const uint8_t*>(data);
    for (uint64_t at = 0; at < bytes;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kStagingBytes, bytes - at));
      STRATA_RETURN_IF_ERROR(written_[next_].Wait());
      uint8_t* buf = staging_[next_].data();
      std::memcpy(buf, src + at, n);
      const size_t padded = static_cast<size_t>(AlignUp(n));
      std::memset(buf + n, 0, padded - n);
      IoRequest w{IoOp::kWrite, file_.get(), cursor_, padded, buf};
      env_->Submit({&w, 1}, &written_[next_]);
      cursor_ += padded;
      at += n;
      next_ ^= 1;
    }
    return Status::Ok();
  }

  Status Finish() {
    for (IoEvent& e : written_) STRATA_RETURN_IF_ERROR(e.Wait());
    return env_->Sync(file_.get());
  }

  uint64_t bytes() const { return cursor_; }

 private:
  FileEnv* env_;
  std::unique_ptr<DiskFile> file_;
  AlignedBuffer staging_[2];
  IoEvent written_[2];
  int next_ = 0;
  uint64_t cursor_ = 0;
};

std::string ToHex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(v));
  return text;
}

bool IsUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xE  ? 3
                     : (c >> 3) == 0x1E ? 4
                                        : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// JSON cannot carry invalid UTF-8; nlohmann would throw on dump, so refuse such data first.
Status CheckUtf8(const Model& model) {
  const GgufTokenizerData& t = model.gguf_tokenizer();
  for (const std::vector<std::string>* list : {&t.tokens, &t.merges}) {
    for (size_t i = 0; i < list->size(); ++i) {
      if (!IsUtf8((*list)[i])) {
        return Status::Unsupported(model.source() + ": tokenizer entry " + std::to_string(i) +
                                   " is not valid UTF-8, which the store's manifest cannot hold");
      }
    }
  }
  if (!IsUtf8(model.chat_template()) || !IsUtf8(model.source())) {
    return Status::Unsupported(model.source() + ": the chat template or path is not valid UTF-8");
  }
  return Status::Ok();
}

// Writes `text` to `path` durably: a temporary file, fsync, rename.
Status WriteFileAtomically(const fs::path& path, const std::string& text) {
  const std::string tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError("cannot create " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const int err = done == text.size() && ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  if (err != 0) return Status::IoError("cannot write " + tmp + ": " + std::strerror(err));
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::IoError("cannot rename " + tmp + ": " + ec.message());
  return Status::Ok();
}

Status PrepareDirectory(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec))) {
    return Status::InvalidArgument(dir.string() +
                                   " already exists and is not an empty directory; choose a new "
                                   "--out or remove it");
  }
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

Result<StoreWriteSummary> WriteStore(const Model& model, const std::string& dir,
                                     const StoreWriteOptions& options) {
  if (model.has_q4_weights()) {
    return Status::InvalidArgument(model.source() +
                                   " is a 4-bit strata store already; convert the model it was "
                                   "converted from instead");
  }
  STRATA_RETURN_IF_ERROR(CheckUtf8(model));
  const fs::path root(dir);
  STRATA_RETURN_IF_ERROR(PrepareDirectory(root));
  std::unique_ptr<FileEnv> own_env;
  FileEnv* env = options.env;
  if (env == nullptr) {
    STRATA_ASSIGN_OR_RETURN(own_env, NewFileEnv());
    env = own_env.get();
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<DiskFile> file,
                          env->Open((root / kStoreDataName).string(), {FileMode::kCreate}));
  STRATA_ASSIGN_OR_RETURN(AlignedBuffer a, AlignedBuffer::Allocate(kStagingBytes));
  STRATA_ASSIGN_OR_RETURN(AlignedBuffer b, AlignedBuffer::Allocate(kStagingBytes));
  ExtentWriter writer(env, std::move(file), std::move(a), std::move(b));

  StoreWriteSummary summary;
  ModelWeights weights = model.weights();  // WeightSlots wants mutable views; this is a copy
  json tensors = json::array();
  std::map<const void*, std::string> stored;  // data -> name: shared tensors are stored once
  std::vector<float> expanded;  // a deferred GGUF tensor's values, one tensor at a time
  const int group = model.q4_group();
  for (const WeightSlot& slot : WeightSlots(model.config(), &weights)) {
    TensorView v = *slot.view;
    auto [it, fresh] = stored.try_emplace(v.data, slot.name);
    if (!fresh) {
      tensors.push_back({{"name", slot.name}, {"same_as", it->second}});
      continue;
    }
    const auto expand = [&]() -> Status {
      if (!model.IsDeferred(v)) return Status::Ok();
      expanded.resize(static_cast<size_t>(v.numel()));
      STRATA_RETURN_IF_ERROR(model.ExpandDeferred(v, expanded.data()));
      v.data = expanded.data();
      return Status::Ok();
    };
    json entry = {{"name", slot.name}, {"dtype", DTypeName(v.dtype)}, {"shape", v.shape}};
    StoreExtent data, params;
    const bool matrix = v.shape.size() == 2;
    if (options.quantize_q4 && matrix && v.shape[1] % group == 0) {
      std::vector<uint8_t> codes(static_cast<size_t>(v.numel() / 2));
      std::vector<uint16_t> halves(static_cast<size_t>(v.numel() / group * 2));
      if (model.GgufQ4Planes(v, codes.data(), halves.data())) {
        ++summary.q4_blocks_kept;
      } else {
        STRATA_RETURN_IF_ERROR(expand());
        options.quantize_q4(v, group, codes.data(), halves.data());
      }
      STRATA_RETURN_IF_ERROR(writer.Append(codes.data(), codes.size(), &data));
      STRATA_RETURN_IF_ERROR(writer.Append(halves.data(), halves.size() * 2, &params));
      entry["encoding"] = "q4";
      entry["q4_group"] = group;
      entry["q4_params"] = {
          {"offset", params.offset}, {"bytes", params.bytes}, {"checksum", ToHex(params.checksum)}};
      ++summary.q4_tensors;
    } else {
      STRATA_RETURN_IF_ERROR(expand());
      STRATA_RETURN_IF_ERROR(writer.Append(v.data, v.bytes(), &data));
      entry["encoding"] = "raw";
      summary.raw_matrices += options.quantize_q4 && matrix;
    }
    entry["offset"] = data.offset;
    entry["bytes"] = data.bytes;
    entry["checksum"] = ToHex(data.checksum);
    tensors.push_back(std::move(entry));
    ++summary.tensors;
  }
  STRATA_RETURN_IF_ERROR(writer.Finish().WithContext("writing store " + dir));
  summary.data_bytes = writer.bytes();

  json tokenizer = json::object();
  if (!model.tokenizer_json_path().empty()) {
    std::error_code ec;
    fs::copy_file(model.tokenizer_json_path(), root / kStoreTokenizerName, ec);
    if (ec) {
      return Status::IoError("cannot copy " + model.tokenizer_json_path() + " into " + dir + ": " +
                             ec.message());
    }
    tokenizer["json"] = kStoreTokenizerName;
    const fs::path spm =
        fs::path(model.tokenizer_json_path()).parent_path() / kSentencePieceModelName;
    if (fs::is_regular_file(spm, ec)) {
      fs::copy_file(spm, root / kSentencePieceModelName, ec);
      if (ec) {
        return Status::IoError("cannot copy " + spm.string() + " into " + dir + ": " +
                               ec.message());
      }
    }
  }
  if (!model.gguf_tokenizer().tokens.empty()) {
    tokenizer["gguf"] = GgufTokenizerToJson(model.gguf_tokenizer());
  }
  const json manifest = {{"format", kStoreFormat},   {"version", kStoreVersion},
                         {"source", model.source()}, {"config", ModelConfigToJson(model.config())},
                         {"tokenizer", tokenizer},   {"chat_template", model.chat_template()},
                         {"tensors", tensors}};
  STRATA_RETURN_IF_ERROR(WriteFileAtomically(root / kStoreManifestName, manifest.dump(1)));
  return summary;
}

}  // namespace strata
