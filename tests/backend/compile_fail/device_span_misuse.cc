// Compiled three ways by tests/backend/CMakeLists.txt: as it is, which must build (the control),
// and with STRATA_PASS_AS_HOST_SPAN or STRATA_PASS_AS_POINTER, which must not: a device span has
// no address outside its backend, so it cannot be handed to code that reads host memory.
#include <cstdint>
#include <span>

#include "src/backend/memory.h"

namespace strata {

uint64_t ReadsHostBytes(std::span<const uint8_t> bytes) { return bytes.size(); }
uint64_t ReadsPointer(const void* data) { return data != nullptr ? 1 : 0; }

uint64_t Misuse(const DeviceSpan& span) {
#if defined(STRATA_PASS_AS_HOST_SPAN)
  return ReadsHostBytes(span);
#elif defined(STRATA_PASS_AS_POINTER)
  return ReadsPointer(span);
#else
  return span.bytes();
#endif
}

}  // namespace strata
