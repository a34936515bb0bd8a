#include "src/io/fault_env.h"

#include <cerrno>

#include "src/io/transfer.h"

namespace strata {

FaultInjectingEnv::FaultInjectingEnv(std::unique_ptr<FileEnv> base) : base_(std::move(base)) {}

void FaultInjectingEnv::AddRule(const FaultRule& rule) {
  std::lock_guard<std::mutex> lock(mu_);
  rules_.push_back(rule);
}

int FaultInjectingEnv::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

namespace {

// Reads meet kShortRead and kReadError; writes kWriteError and kNoSpace; Allocate() kNoSpace.
bool CanHit(IoFault fault, bool read, bool allocate) {
  if (allocate) return fault == IoFault::kNoSpace;
  const bool read_fault = fault == IoFault::kShortRead || fault == IoFault::kReadError;
  return read_fault == read;
}

}  // namespace

bool FaultInjectingEnv::Match(Target target, const std::string& path, uint64_t offset,
                              uint64_t length, IoFault* fault) {
  std::lock_guard<std::mutex> lock(mu_);
  for (FaultRule& r : rules_) {
    if (r.count == 0 || !CanHit(r.fault, target == Target::kRead, target == Target::kAllocate)) {
      continue;
    }
    if (path.find(r.path_contains) == std::string::npos) continue;
    if (offset >= r.offset_end || offset + length <= r.offset_begin) continue;
    if (r.count > 0) --r.count;
    ++fired_;
    *fault = r.fault;
    return true;
  }
  return false;
}

Status FaultInjectingEnv::Allocate(DiskFile* file, uint64_t bytes) {
  IoFault fault;
  if (Match(Target::kAllocate, file->path(), 0, bytes, &fault)) {
    return AllocateError(file->path(), bytes, ENOSPC);
  }
  return base_->Allocate(file, bytes);
}

void FaultInjectingEnv::Submit(std::span<const IoRequest> requests, IoEvent* event) {
  for (const IoRequest& r : requests) {
    const Target target = r.op == IoOp::kRead ? Target::kRead : Target::kWrite;
    IoFault fault;
    if (!Match(target, r.file->path(), r.offset, r.length, &fault)) {
      base_->Submit({&r, 1}, event);
      continue;
    }
    // Counted before the partial transfer below can complete, so Wait() sees both.
    event->AddPending(1);
    if (fault == IoFault::kShortRead) {
      IoRequest half = r;
      half.length =
          r.file->direct() ? r.length / 2 / kDirectIoAlignment * kDirectIoAlignment : r.length / 2;
      if (half.length > 0) base_->Submit({&half, 1}, event);
      event->Complete(ShortReadError(r.file->path(), r.offset, r.length, half.length));
    } else {
      event->Complete(TransferError(r.op, r.file->path(), r.offset, r.length,
                                    fault == IoFault::kNoSpace ? ENOSPC : EIO));
    }
  }
}

}  // namespace strata
