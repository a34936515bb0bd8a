#include "src/core/thread_name.h"

#include <pthread.h>

namespace strata {

void NameThisThread(const std::string& name) {
  constexpr size_t kMaxChars = 15;  // TASK_COMM_LEN less the terminating NUL
  pthread_setname_np(pthread_self(), name.substr(0, kMaxChars).c_str());
}

}  // namespace strata
