#include "src/job/merge.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "src/job/decoded_file.h"
#include "src/job/jsonl_reader.h"
#include "src/job/output_writer.h"
#include "src/job/request.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr size_t kMaxListedProblems = 20;
constexpr size_t kFlushBytes = size_t{8} << 20;

// The problems found, the first kMaxListedProblems kept for the message.
class ProblemList {
 public:
  void Add(std::string problem) {
    if (listed_.size() < kMaxListedProblems) listed_.push_back(std::move(problem));
    ++count_;
  }
  bool empty() const { return count_ == 0; }
  Status ToStatus() const {
    std::string m = "merge found " + std::to_string(count_) + " problem" +
                    (count_ == 1 ? "" : "s") + "; nothing was written:";
    for (const std::string& p : listed_) m += "\n  " + p;
    if (count_ > listed_.size()) m += "\n  ... and " + std::to_string(count_ - listed_.size()) + " more";
    return Status::Corrupt(std::move(m));
  }

 private:
  std::vector<std::string> listed_;
  size_t count_ = 0;
};

// Where one result line lies: which shard output, its byte range, its line number there.
struct ResultLoc {
  uint32_t file = 0;
  uint32_t length = 0;  // without the newline
  uint64_t offset = 0;
  uint64_t line = 0;
  bool used = false;
};

// The result lines of every shard output, by key. Owns the descriptors it reads lines through
// and the decoded copies of compressed outputs, which it deletes.
class ResultIndex {
 public:
  ~ResultIndex() {
    for (int fd : fds_) ::close(fd);
    for (const std::string& t : temp_files_) std::remove(t.c_str());
  }

  // Indexes the output at `path`; a compressed one is decoded to `temp_path` first.
  Status Add(const std::string& path, const std::string& temp_path, ProblemList* problems);

  std::string Where(const ResultLoc& loc) const {
    return names_[loc.file] + " line " + std::to_string(loc.line);
  }
  Status Read(const ResultLoc& loc, std::string* out) const;

  std::unordered_map<std::string, ResultLoc> completions;  // by custom_id
  std::unordered_map<uint64_t, ResultLoc> errors;          // by input line number

 private:
  void AddLine(const std::string& line, ResultLoc loc, ProblemList* problems);

  std::vector<int> fds_;
  std::vector<std::string> names_;
  std::vector<std::string> temp_files_;
};

Status Errno(const std::string& what, const std::string& path) {
  return Status::IoError(what + " " + path + ": " + std::strerror(errno));
}

Status WriteAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Errno("cannot write", path);
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status ResultIndex::Add(const std::string& path, const std::string& temp_path,
                        ProblemList* problems) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<DecodedFile> file, DecodedFile::Open(path));
  const uint32_t file_id = static_cast<uint32_t>(fds_.size());
  names_.push_back(path);
  const std::string& readable = file->compressed() ? temp_path : path;
  const int flags = file->compressed() ? O_RDWR | O_CREAT | O_TRUNC : O_RDONLY;
  const int fd = ::open(readable.c_str(), flags | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot open", readable);
  fds_.push_back(fd);
  if (file->compressed()) temp_files_.push_back(temp_path);

  std::vector<char> buf(256 << 10);
  std::string line;
  uint64_t offset = 0, line_start = 0, line_number = 0;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(size_t n, file->Read(buf.data(), buf.size()));
    if (n == 0) break;
    if (file->compressed()) STRATA_RETURN_IF_ERROR(WriteAll(fd, buf.data(), n, temp_path));
    for (size_t i = 0; i < n; ++i, ++offset) {
      if (buf[i] != '\n') {
        line.push_back(buf[i]);
        continue;
      }
      ++line_number;
      if (!line.empty()) {
        AddLine(line, ResultLoc{file_id, static_cast<uint32_t>(line.size()), line_start,
                                line_number, false},
                problems);
      }
      line.clear();
      line_start = offset + 1;
    }
  }
  if (!line.empty()) {
    problems->Add(path + " ends with a torn line (line " + std::to_string(line_number + 1) +
                  "); rerun that shard's job to repair and finish it");
  }
  return Status::Ok();
}

void ResultIndex::AddLine(const std::string& line, ResultLoc loc, ProblemList* problems) {
  const Json j = Json::parse(line, nullptr, false);
  const auto id = j.is_object() ? j.find("custom_id") : j.end();
  const auto error = j.is_object() ? j.find("error") : j.end();
  const auto input_line = j.is_object() ? j.find("line") : j.end();
  if (j.is_object() && error != j.end() && !error->is_null() && input_line != j.end() &&
      input_line->is_number_unsigned()) {
    const auto [it, fresh] = errors.emplace(input_line->get<uint64_t>(), loc);
    if (!fresh) {
      problems->Add("input line " + input_line->dump() + " has two error lines: " +
                    Where(it->second) + " and " + Where(loc));
    }
    return;
  }
  if (id == j.end() || !id->is_string() || (error != j.end() && !error->is_null())) {
    problems->Add(Where(loc) + " is not a strata result line");
    return;
  }
  const auto [it, fresh] = completions.emplace(id->get<std::string>(), loc);
  if (!fresh) {
    problems->Add("custom_id " + id->dump() + " has two completions: " + Where(it->second) +
                  " and " + Where(loc));
  }
}

Status ResultIndex::Read(const ResultLoc& loc, std::string* out) const {
  out->resize(loc.length);
  size_t done = 0;
  while (done < loc.length) {
    const ssize_t n = ::pread(fds_[loc.file], out->data() + done, loc.length - done,
                              static_cast<off_t>(loc.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("cannot read", names_[loc.file]);
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

std::string Describe(uint64_t line_number, const std::string& id) {
  return "input line " + std::to_string(line_number) +
         (id.empty() ? "" : " (custom_id " + Json(id).dump() + ")");
}

}  // namespace

Result<MergeReport> MergeShardOutputs(const MergeOptions& o) {
  const auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    return fs::equivalent(a, b, ec);
  };
  for (const std::string& in : o.shard_outputs) {
    if (same(in, o.output) || same(o.input, o.output)) {
      return Status::InvalidArgument("the merged output " + o.output +
                                     " must not be one of the files being merged");
    }
  }
  std::string dir = fs::path(o.output).parent_path().string();
  if (dir.empty()) dir = ".";
  const std::string tag = ".strata-merge-" + std::to_string(::getpid()) + "-";
  const std::string tmp_output = dir + "/" + tag + fs::path(o.output).filename().string();

  ProblemList problems;
  ResultIndex index;
  for (size_t k = 0; k < o.shard_outputs.size(); ++k) {
    const std::string temp = dir + "/" + tag + std::to_string(k) + ".jsonl";
    STRATA_RETURN_IF_ERROR(index.Add(o.shard_outputs[k], temp, &problems).WithContext("merge"));
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<JsonlReader> reader, JsonlReader::Open(o.input));
  std::remove(tmp_output.c_str());
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<OutputWriter> writer, OutputWriter::Open(tmp_output));
  const auto fail = [&](Status s) {
    writer.reset();
    std::remove(tmp_output.c_str());
    return s;
  };

  MergeReport report;
  std::unordered_set<std::string> seen_ids;
  std::string text;
  JsonlLine line;
  size_t pending_bytes = 0;
  while (true) {
    Result<bool> more = reader->Next(&line);
    if (!more.ok()) return fail(more.status().WithContext("input " + o.input));
    if (!*more) break;
    ParsedLine parsed;
    if (!line.too_long) parsed = ParseRequestLine(line.text, line.line_number);
    const std::string id = parsed.request ? parsed.request->custom_id
                           : parsed.error ? parsed.error->custom_id
                                          : "";
    const bool owns_completion = parsed.request && seen_ids.insert(id).second;
    if (!parsed.request && !id.empty()) seen_ids.insert(id);
    auto e = index.errors.find(line.line_number);
    auto c = owns_completion ? index.completions.find(id) : index.completions.end();
    const bool has_error = e != index.errors.end();
    const bool has_completion = c != index.completions.end();
    if (has_error && has_completion) {
      problems.Add(Describe(line.line_number, id) + " has two results: " +
                   index.Where(e->second) + " and " + index.Where(c->second));
    } else if (!has_error && !has_completion) {
      problems.Add(Describe(line.line_number, id) +
                   " has no result in the shard outputs; run (or finish) its shard");
    }
    if (has_error) e->second.used = true;
    if (has_completion) c->second.used = true;
    if (!problems.empty()) continue;  // keep checking, stop writing
    const ResultLoc& loc = has_error ? e->second : c->second;
    if (Status s = index.Read(loc, &text); !s.ok()) return fail(s);
    writer->Append(text);
    ++report.lines;
    ++(has_error ? report.errors : report.completions);
    pending_bytes += text.size() + 1;
    if (pending_bytes >= kFlushBytes) {
      if (Status s = writer->Flush(); !s.ok()) return fail(s);
      pending_bytes = 0;
    }
  }
  for (const auto& [id, loc] : index.completions) {
    if (!loc.used) {
      problems.Add(index.Where(loc) + ": custom_id " + Json(id).dump() +
                   " matches no input line; was it run on another input?");
    }
  }
  for (const auto& [n, loc] : index.errors) {
    if (!loc.used) {
      problems.Add(index.Where(loc) + ": an error line for input line " + std::to_string(n) +
                   ", which has a completion or does not exist");
    }
  }
  if (!problems.empty()) return fail(problems.ToStatus());
  if (Status s = writer->Flush(); !s.ok()) return fail(s);
  writer.reset();
  if (std::rename(tmp_output.c_str(), o.output.c_str()) != 0) {
    return fail(Errno("cannot rename the merged file to", o.output));
  }
  return report;
}

}  // namespace strata
