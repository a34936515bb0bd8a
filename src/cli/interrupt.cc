#include "src/cli/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "src/cli/exit_codes.h"

namespace strata {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "signal handlers may only touch lock-free atomics");

template <size_t N>
void Note(const char (&text)[N]) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, N - 1);
  (void)ignored;
}

void OnSignal(int sig) {
  if (g_stop.exchange(true)) {
    Note("strata: second signal; exiting now, rerun the same command to resume\n");
    ::_exit(kExitInterrupted);
  }
  g_signal.store(sig);
  Note("strata: signal received; stopping at the next token step (send another to exit now)\n");
}

}  // namespace

const std::atomic<bool>& InstallInterruptHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) sigaction(sig, &sa, nullptr);
  return g_stop;
}

const char* InterruptSignalName() {
  switch (g_signal.load()) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "";
  }
}

}  // namespace strata
