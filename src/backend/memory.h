// Memory and order through the backend: the device tier's arena, typed handles into it, streams
// that copy asynchronously, and events that order streams (ggml's buffer and backend split, and
// CUDA's streams and events, in strata's terms). Each of the executor's lanes (load, compute,
// store) gives its work to a stream of its own.
//
// A DeviceSpan names bytes of a device arena and what they hold. It is a value with no address:
// no function outside the backend that made the arena turns it into one, so code above
// src/backend can place, slice and copy device memory but never read or write it by hand (a
// span passed where a pointer or a host span is expected does not compile;
// tests/backend/compile_fail/). Host memory is plain std::span.
//
// A Stream runs work in the order it is given, asynchronously to the host (a CUDA stream; in the
// CPU backend the calling thread, or a worker thread in the test mode of cpu_memory.h). Order
// between streams comes only from events: Record(e) marks the point after all work given so far,
// and Wait(e) on another stream holds that stream's later work until the point is reached.
// Nothing waits for the whole device.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "src/core/dtype.h"

namespace strata {

// What a device extent holds: raw bytes (a staging slot, a cache slice's planes) or elements of
// one dense or 4-bit type.
enum class SpanType : uint8_t { kBytes, kF32, kF16, kBF16, kQ4 };
SpanType SpanTypeOf(DType dtype);
const char* SpanTypeName(SpanType type);
// Bytes of one element of a dense type (kF32, kF16, kBF16). REQUIRES: such a type.
uint64_t SpanElementBytes(SpanType type);

class DeviceArena;

// Bytes [offset, offset + bytes) of one device arena, holding `type`. Copyable; the default
// span is empty and belongs to no arena.
class DeviceSpan {
 public:
  DeviceSpan() = default;

  uint64_t bytes() const { return bytes_; }
  SpanType type() const { return type_; }
  bool empty() const { return bytes_ == 0; }
  // The elements of a span. REQUIRES (checked): a dense type (SpanElementBytes).
  int64_t elements() const { return static_cast<int64_t>(bytes_ / SpanElementBytes(type_)); }
  // Bytes [offset, offset + bytes) of this span, as `type` (default: this span's).
  // REQUIRES: offset + bytes <= this->bytes().
  DeviceSpan Sub(uint64_t offset, uint64_t bytes) const;
  DeviceSpan Sub(uint64_t offset, uint64_t bytes, SpanType type) const;
  // True when both spans lie in one arena and overlap.
  bool Overlaps(const DeviceSpan& other) const;
  // True when both spans lie in one arena and this one begins `offset` bytes after `base` does.
  bool StartsAt(const DeviceSpan& base, uint64_t offset) const;
  friend bool operator==(const DeviceSpan& a, const DeviceSpan& b) = default;

 private:
  friend class DeviceArena;
  DeviceSpan(const DeviceArena* arena, uint64_t offset, uint64_t bytes, SpanType type)
      : arena_(arena), offset_(offset), bytes_(bytes), type_(type) {}

  const DeviceArena* arena_ = nullptr;
  uint64_t offset_ = 0;
  uint64_t bytes_ = 0;
  SpanType type_ = SpanType::kBytes;
};

// The device tier's memory: one allocation made when a run starts (docs/DESIGN.md, rule 2),
// owned by the backend that made it (Backend::AllocateDeviceArena). Thread-safe (immutable).
class DeviceArena {
 public:
  virtual ~DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  uint64_t capacity_bytes() const { return capacity_; }
  // Bytes [offset, offset + bytes) of the arena. REQUIRES: offset + bytes <= capacity_bytes().
  DeviceSpan Span(uint64_t offset, uint64_t bytes, SpanType type = SpanType::kBytes) const;
  // True when `span` is of this arena.
  bool Holds(const DeviceSpan& span) const { return span.arena_ == this; }

 protected:
  // `backend` names the backend that made the arena (a string of static storage whose address
  // is its identity), so that it can tell its spans from another backend's.
  DeviceArena(uint64_t capacity, const char* backend) : capacity_(capacity), backend_(backend) {}
  // For the backend that made the arena: the arena `span` belongs to and where it begins there.
  // REQUIRES (checked): `span` belongs to an arena made by `backend`.
  static const DeviceArena& ArenaOf(const DeviceSpan& span, const char* backend);
  static uint64_t OffsetOf(const DeviceSpan& span) { return span.offset_; }

 private:
  uint64_t capacity_ = 0;
  const char* backend_ = nullptr;
};

// Host memory pinned for one backend's copies (page-locked, so that a device's copy engines
// read and write it directly and copies run asynchronously): pinned while this object lives.
class PinnedHost {
 public:
  virtual ~PinnedHost() = default;
};

// A point in a stream's work. Made by Backend::MakeEvent; recorded on one stream, waited for on
// others or by the host. Thread-safe. REQUIRES: it outlives the stream work that records or waits
// on it.
class Event {
 public:
  virtual ~Event() = default;
  // True once the work before the latest Record has finished (true before any Record). Never
  // blocks.
  virtual bool Query() const = 0;
  // Blocks the calling thread until Query() would return true for the latest Record so far.
  virtual void HostWait() const = 0;
};

// An ordered stream of work. Thread-compatible: one thread gives a stream its work.
// Copies read and write their host memory after they return: it must stay valid, and a copy's
// source unchanged, until an event recorded after the copy has completed.
class Stream {
 public:
  virtual ~Stream() = default;

  // REQUIRES (all copies): equal sizes; dst and src do not overlap; spans of this backend.
  virtual void CopyToDevice(DeviceSpan dst, std::span<const uint8_t> src) = 0;
  virtual void CopyToHost(std::span<uint8_t> dst, DeviceSpan src) = 0;
  virtual void CopyOnDevice(DeviceSpan dst, DeviceSpan src) = 0;
  // Sets the span's bytes to `byte`.
  virtual void Fill(DeviceSpan dst, uint8_t byte) = 0;

  // Marks `event` at the end of the work given so far (a later Record moves the mark).
  virtual void Record(Event& event) = 0;
  // Work given after this waits until `event`'s latest Record so far has completed. The host
  // does not block.
  virtual void Wait(const Event& event) = 0;
  // Blocks the host until this stream's work so far has finished (this stream only).
  virtual void Synchronize() = 0;
};

}  // namespace strata
