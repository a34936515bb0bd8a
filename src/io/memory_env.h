// MemoryEnv: a FileEnv whose files live in process memory, for tests of code above src/io
// (LevelDB's in-memory Env). Paths are plain keys: there are no directories, so creating a file
// never fails for want of one.
#pragma once

#include <memory>

#include "src/io/file_env.h"

namespace strata {

// Thread-safe. Transfers complete inside Submit(). Files are never direct(), so requests need no
// alignment. A removed file lives on while a DiskFile holds it, as on POSIX.
std::unique_ptr<FileEnv> NewMemoryEnv();

}  // namespace strata
