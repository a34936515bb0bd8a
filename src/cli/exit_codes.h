// The exit codes of every strata command, as documented in README.md.
#pragma once

namespace strata {

inline constexpr int kExitOk = 0;                // finished; every request completed
inline constexpr int kExitSomeFailed = 1;        // finished; some requests got error lines
inline constexpr int kExitUnusable = 2;          // unusable configuration or input; nothing ran
inline constexpr int kExitInterrupted = 75;      // interrupted (EX_TEMPFAIL); rerun to resume

}  // namespace strata
