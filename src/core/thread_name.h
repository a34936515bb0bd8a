// Names for threads, so that the tools that list them (top -H, perf sched, gdb) say which of
// strata's threads is which.
#pragma once

#include <string>

namespace strata {

// Names the calling thread `name`; Linux keeps the first 15 characters.
void NameThisThread(const std::string& name);

}  // namespace strata
