// Stopping a job cleanly on SIGTERM, SIGINT and SIGUSR1 (Slurm's preemption, Ctrl-C and the
// `--signal=B:USR1@T` time-limit warning). The first signal sets a flag that the job checks at
// every token step and between blocks: it then stops with the journal consistent and exits 75.
// A second signal exits 75 at once (the journal's recovery handles a block cut mid-write).
#pragma once

#include <atomic>

namespace strata {

// Installs the handlers (idempotent) and returns the flag they set. Async-signal-safe: the
// handlers only store to lock-free atomics, write(2) a note and _exit(2).
const std::atomic<bool>& InstallInterruptHandlers();

// The first signal received ("SIGTERM", "SIGINT", "SIGUSR1"), or "" when none.
const char* InterruptSignalName();

}  // namespace strata
