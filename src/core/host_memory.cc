#include "src/core/host_memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace strata {

int64_t AvailableHostBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return int64_t{sysconf(_SC_AVPHYS_PAGES)} * sysconf(_SC_PAGE_SIZE);
}

}  // namespace strata
