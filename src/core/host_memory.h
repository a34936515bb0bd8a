// How much host memory the machine can still give: what `strata profile` records as the CPU
// tier's capacity, and what loading a model that must be expanded is checked against.
#pragma once

#include <cstdint>

namespace strata {

// MemAvailable from /proc/meminfo, in bytes (free pages when the kernel does not report it).
int64_t AvailableHostBytes();

}  // namespace strata
