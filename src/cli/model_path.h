// Where models live: an explicit --model path, or the default model that scripts/setup.sh
// fetches into the cache.
#pragma once

#include <string>

#include "src/core/status.h"

namespace strata {

// The cache directory: $STRATA_CACHE, else $XDG_CACHE_HOME/strata, else ~/.cache/strata.
std::string CacheDirectory();

// `flag` when non-empty, else the default model's path in the cache. Fails with NotFound and a
// message saying to run scripts/setup.sh (or pass --model) when the path does not exist.
Result<std::string> ResolveModelPath(const std::string& flag);

}  // namespace strata
