// tests/test_seed.h — the seed of a seeded test: FLURRY_TEST_SEED=N replays one run, otherwise
// a fresh random seed. Tests print it with their failures so any run can be replayed.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>

namespace flurry::testing {

inline std::uint64_t test_seed() {
  static const std::uint64_t seed = []() -> std::uint64_t {
    if (const char* env = std::getenv("FLURRY_TEST_SEED"); env != nullptr && *env != '\0') {
      return std::strtoull(env, nullptr, 0);
    }
    return (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  }();
  return seed;
}

}  // namespace flurry::testing
