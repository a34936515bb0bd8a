#include "src/job/output_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "src/core/check.h"
#include "src/job/decoded_file.h"

namespace strata {
namespace {

using Json = nlohmann::json;

bool IsZstdPath(const std::string& path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".zst") == 0;
}

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  std::string message = what + " " + path + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) {
    return Status::ResourceExhausted(message + "; free disk space and rerun, the job resumes");
  }
  return Status::IoError(std::move(message));
}

std::string DirectoryOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open directory", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  return rc == 0 ? Status::Ok() : ErrnoStatus("cannot fsync directory", dir, err);
}

// Reads one complete output line into the pending sets: a completion by its custom_id, an error
// line by its input line number. Returns Corrupt when the line is neither.
Status ScanOutputLine(const std::string& path, uint64_t line_number, const std::string& line,
                      std::vector<std::string>* ids, std::vector<uint64_t>* error_lines) {
  const Json j = Json::parse(line, nullptr, false);
  const auto bad = [&]() {
    return Status::Corrupt(path + " line " + std::to_string(line_number) +
                           " is not a strata output line (a JSON object with \"custom_id\"); "
                           "the file was not written by strata: move it away or fix that line");
  };
  if (j.is_discarded() || !j.is_object()) return bad();
  const auto id = j.find("custom_id");
  if (id == j.end() || !(id->is_string() || id->is_null())) return bad();
  const auto error = j.find("error");
  if (error != j.end() && !error->is_null()) {
    const auto input_line = j.find("line");
    if (input_line == j.end() || !input_line->is_number_unsigned()) return bad();
    error_lines->push_back(input_line->get<uint64_t>());
    return Status::Ok();
  }
  if (!id->is_string()) return bad();
  ids->push_back(id->get<std::string>());
  return Status::Ok();
}

Status TruncateFile(const std::string& path, uint64_t size_bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path, errno);
  int rc = ::ftruncate(fd, static_cast<off_t>(size_bytes));
  if (rc == 0) rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  return rc == 0 ? Status::Ok() : ErrnoStatus("cannot cut the torn tail of", path, err);
}

// True when a ".zst" output holds only the start of the zstd magic bytes: a crash during the
// first frame's write, which DecodedFile cannot yet tell from a file that is not zstd at all.
bool IsTornZstdMagic(const std::string& path) {
  static constexpr char kMagic[] = {'\x28', '\xB5', '\x2F', '\xFD'};
  struct stat st;
  if (!IsZstdPath(path) || ::stat(path.c_str(), &st) != 0 || st.st_size >= 4) return false;
  char head[4];
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::pread(fd, head, sizeof(head), 0);
  ::close(fd);
  return n == st.st_size && std::memcmp(head, kMagic, static_cast<size_t>(n)) == 0;
}

}  // namespace

Result<OutputJournal> RecoverOutputJournal(const std::string& path) {
  if (IsTornZstdMagic(path)) {
    OutputJournal journal;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("cannot stat", path, errno);
    journal.dropped_bytes = static_cast<uint64_t>(st.st_size);
    if (journal.dropped_bytes > 0) STRATA_RETURN_IF_ERROR(TruncateFile(path, 0));
    return journal;
  }
  Result<std::unique_ptr<DecodedFile>> opened = DecodedFile::Open(path);
  if (!opened.ok() && opened.status().code() == StatusCode::kNotFound) return OutputJournal{};
  if (!opened.ok()) return opened.status();
  DecodedFile& file = **opened;
  if (file.compressed() != IsZstdPath(path)) {
    return Status::Corrupt(path + " is zstd data but its name does not end in .zst; rename it");
  }
  // Lines become part of the journal at a commit point: after each newline of a plain file,
  // at the end of a zstd frame that ends on a line boundary. Everything after the last commit
  // point is the torn tail.
  OutputJournal journal;
  std::vector<std::string> ids;
  std::vector<uint64_t> error_lines;
  uint64_t keep_bytes = 0;
  const auto commit = [&](uint64_t offset) {
    journal.lines += ids.size() + error_lines.size();
    journal.completed_ids.insert(ids.begin(), ids.end());
    journal.error_lines.insert(error_lines.begin(), error_lines.end());
    ids.clear();
    error_lines.clear();
    keep_bytes = offset;
  };
  std::vector<char> buf(256 << 10);
  std::string line;
  uint64_t line_number = 0;
  while (true) {
    Result<size_t> n = file.Read(buf.data(), buf.size());
    if (!n.ok() && n.status().code() == StatusCode::kCorrupt) break;  // a torn or damaged tail
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    const uint64_t read_start = file.file_offset() - *n;  // meaningful for plain files only
    for (size_t i = 0; i < *n; ++i) {
      if (buf[i] != '\n') {
        line.push_back(buf[i]);
        continue;
      }
      ++line_number;
      if (!line.empty()) {
        STRATA_RETURN_IF_ERROR(ScanOutputLine(path, line_number, line, &ids, &error_lines));
      }
      line.clear();
      if (!file.compressed()) commit(read_start + i + 1);
    }
    if (file.compressed() && file.at_frame_end() && line.empty()) commit(file.file_offset());
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("cannot stat", path, errno);
  const uint64_t size_bytes = static_cast<uint64_t>(st.st_size);
  if (size_bytes > keep_bytes) {
    STRATA_RETURN_IF_ERROR(TruncateFile(path, keep_bytes));
    journal.dropped_bytes = size_bytes - keep_bytes;
  }
  return journal;
}

Status CheckOutputPath(const std::string& path) {
  const std::string dir = DirectoryOf(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::NotFound("output directory " + dir + " does not exist; create it first (mkdir "
                            "-p " + dir + ")");
  }
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument(path + " is a directory; give the path of a JSONL file");
    }
    if (::access(path.c_str(), W_OK) != 0) return ErrnoStatus("cannot write output", path, errno);
  } else if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return ErrnoStatus("cannot create the output in directory", dir, errno);
  }
  return Status::Ok();
}

Result<std::unique_ptr<OutputWriter>> OutputWriter::Open(const std::string& path,
                                                         const OutputWriterOptions& options) {
  STRATA_RETURN_IF_ERROR(CheckOutputPath(path));
  const std::string dir = DirectoryOf(path);
  struct stat st;
  const bool existed = ::stat(path.c_str(), &st) == 0;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("cannot open output", path, errno);
  std::unique_ptr<OutputWriter> writer(new OutputWriter(path, fd, options));
  if (!existed) STRATA_RETURN_IF_ERROR(SyncDirectory(dir));
  if (::fstat(fd, &st) != 0) return ErrnoStatus("cannot stat", path, errno);
  writer->flushed_bytes_ = static_cast<uint64_t>(st.st_size);
  if (IsZstdPath(path)) {
    writer->cctx_ = ZSTD_createCCtx();
    if (writer->cctx_ == nullptr) return Status::ResourceExhausted("cannot allocate zstd context");
  } else if (st.st_size > 0) {
    char last = 0;
    const int rfd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const bool read_ok = rfd >= 0 && ::pread(rfd, &last, 1, st.st_size - 1) == 1;
    if (rfd >= 0) ::close(rfd);
    if (!read_ok) return ErrnoStatus("cannot read", path, errno);
    if (last != '\n') {
      return Status::Corrupt(path + " ends with a partial line from an interrupted run; "
                                    "recover it (RecoverOutputJournal) before appending");
    }
  }
  return writer;
}

OutputWriter::~OutputWriter() {
  ZSTD_freeCCtx(cctx_);
  ::close(fd_);
}

void OutputWriter::Append(std::string_view line) {
  STRATA_CHECK(line.find('\n') == std::string_view::npos);
  pending_.append(line);
  pending_.push_back('\n');
}

Status OutputWriter::Flush() {
  if (!status_.ok()) return status_;
  if (pending_.empty()) return Status::Ok();
  std::string frame;
  std::string_view data = pending_;
  if (cctx_ != nullptr) {
    frame.resize(ZSTD_compressBound(pending_.size()));
    const size_t n = ZSTD_compressCCtx(cctx_, frame.data(), frame.size(), pending_.data(),
                                       pending_.size(), options_.zstd_level);
    if (ZSTD_isError(n)) {
      status_ = Status::IoError("zstd compression for " + path_ + " failed: " +
                                ZSTD_getErrorName(n));
      return status_;
    }
    data = std::string_view(frame.data(), n);
  }
  Status s = WriteAll(data);
  if (s.ok() && ::fsync(fd_) != 0) s = ErrnoStatus("cannot fsync", path_, errno);
  if (!s.ok()) {
    // Best effort: cut a half-written block so that the file stays readable to its last flush.
    if (::ftruncate(fd_, static_cast<off_t>(flushed_bytes_)) == 0) ::fsync(fd_);
    status_ = s;
    return s;
  }
  flushed_bytes_ += data.size();
  pending_.clear();
  return Status::Ok();
}

Status OutputWriter::WriteAll(std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("cannot write", path_, errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace strata
