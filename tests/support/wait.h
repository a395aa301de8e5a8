// tests/support/wait.h — the clock of the bounded waits of tests that poll real processes:
// CLOCK_MONOTONIC milliseconds (a wall-clock step neither stretches nor cuts a bound) and a
// sleep in the same unit.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace flurry::testing {

inline std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

inline void sleep_ms(std::uint64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace flurry::testing
