#include "src/backend/memory.h"

#include "src/core/check.h"

namespace strata {

SpanType SpanTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kF32: return SpanType::kF32;
    case DType::kF16: return SpanType::kF16;
    case DType::kBF16: return SpanType::kBF16;
    case DType::kQ4: return SpanType::kQ4;
  }
  STRATA_CHECK(false);
  return SpanType::kBytes;
}

const char* SpanTypeName(SpanType type) {
  switch (type) {
    case SpanType::kBytes: return "bytes";
    case SpanType::kF32: return "f32";
    case SpanType::kF16: return "f16";
    case SpanType::kBF16: return "bf16";
    case SpanType::kQ4: return "q4";
  }
  return "?";
}

uint64_t SpanElementBytes(SpanType type) {
  STRATA_CHECK_MSG(type == SpanType::kF32 || type == SpanType::kF16 || type == SpanType::kBF16,
                   "not a dense element type");
  return type == SpanType::kF32 ? 4 : 2;
}

DeviceSpan DeviceSpan::Sub(uint64_t offset, uint64_t bytes) const {
  return Sub(offset, bytes, type_);
}

DeviceSpan DeviceSpan::Sub(uint64_t offset, uint64_t bytes, SpanType type) const {
  STRATA_CHECK(offset <= bytes_ && bytes <= bytes_ - offset);
  return DeviceSpan(arena_, offset_ + offset, bytes, type);
}

bool DeviceSpan::Overlaps(const DeviceSpan& other) const {
  return arena_ != nullptr && arena_ == other.arena_ && !empty() && !other.empty() &&
         offset_ < other.offset_ + other.bytes_ && other.offset_ < offset_ + bytes_;
}

bool DeviceSpan::StartsAt(const DeviceSpan& base, uint64_t offset) const {
  return arena_ != nullptr && arena_ == base.arena_ && offset_ == base.offset_ + offset;
}

DeviceSpan DeviceArena::Span(uint64_t offset, uint64_t bytes, SpanType type) const {
  STRATA_CHECK(offset <= capacity_ && bytes <= capacity_ - offset);
  return DeviceSpan(this, offset, bytes, type);
}

const DeviceArena& DeviceArena::ArenaOf(const DeviceSpan& span, const char* backend) {
  STRATA_CHECK_MSG(span.arena_ != nullptr && span.arena_->backend_ == backend,
                   "a device span given to a backend that did not make its arena");
  return *span.arena_;
}

}  // namespace strata
