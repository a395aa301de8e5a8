// base/invariant.h — always-on checks of the invariants that make IDs unique.
//
// FLURRY_INVARIANT(condition, "what broke") aborts the process, naming the file, line, the
// condition and the sentence, when the condition is false. It is on in every build type
// (NDEBUG does not remove it): a broken invariant means an ID may be issued twice, and
// crashing is the only safe answer. Keep the conditions cheap (a compare or two): they run
// on the hot path. Untrusted input never reaches one of these; it is counted and rejected
// before (CONTRIBUTING.md, errors). The fuzzer and the simulations hit them on every path.
//
// What is checked, and where:
//   core/generator.h   no ID above the ceiling or the layout's end; last_t never decreases
//   core/handler.cc    an answer is never more than 3x the request that caused it
//   control/scheduler  a ceiling is published only after make_durable acknowledged it; a
//                      watermark asked for is never below one asked for before
#pragma once

#include <cstdio>
#include <cstdlib>

namespace flurry {

[[noreturn]] inline void invariant_failed(const char* condition, const char* what, const char* file,
                                          int line) {
  std::fprintf(stderr, "flurry: invariant broken at %s:%d: %s (%s); aborting so no ID is issued twice\n",
               file, line, what, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace flurry

#define FLURRY_INVARIANT(condition, what)                               \
  do {                                                                  \
    if (!(condition)) [[unlikely]] {                                    \
      ::flurry::invariant_failed(#condition, what, __FILE__, __LINE__); \
    }                                                                   \
  } while (false)
