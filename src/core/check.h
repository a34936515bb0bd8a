// STRATA_CHECK: for invariants only a bug can break. It aborts with file:line; it is never used
// for input a user can get wrong (that is a Status).
#pragma once

#include <cstdio>
#include <cstdlib>

#define STRATA_CHECK(cond)                                                          \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

#define STRATA_CHECK_MSG(cond, msg)                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond, msg); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)
