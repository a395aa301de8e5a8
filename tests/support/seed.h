// tests/support/seed.h — the seeds of seeded tests and simulations, one convention for all:
//   FLURRY_TEST_SEED=N   replays exactly seed N;
//   FLURRY_TEST_SEEDS=K  runs K seeds (simulations; each test has its own default);
//   FLURRY_TEST_SCALE=P  runs P percent of a large test's repetitions (scaled(), at least one);
// otherwise fresh random seeds. Every test prints the seeds it ran and the line to replay one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace flurry::testing {

inline std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  return std::strtoull(text, nullptr, 0);
}

inline std::uint64_t random_seed() {
  std::random_device random;
  return (std::uint64_t{random()} << 32) | random();
}

// One seed per process: FLURRY_TEST_SEED, or a random one.
inline std::uint64_t test_seed() {
  static const std::uint64_t seed =
      env_u64("FLURRY_TEST_SEED", 0) != 0 ? env_u64("FLURRY_TEST_SEED", 0) : random_seed();
  return seed;
}

// The seeds a simulation runs: FLURRY_TEST_SEED alone, or FLURRY_TEST_SEEDS (default
// `count`) consecutive seeds from a random one.
inline std::vector<std::uint64_t> test_seeds(std::uint64_t count) {
  if (const std::uint64_t fixed = env_u64("FLURRY_TEST_SEED", 0); fixed != 0) return {fixed};
  const std::uint64_t first = random_seed();
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t i = 0; i < env_u64("FLURRY_TEST_SEEDS", count); ++i) seeds.push_back(first + i);
  return seeds;
}

// A test's repetition count (random IDs, rounds) times FLURRY_TEST_SCALE percent (default 100),
// at least 1. The sanitizer trees set 10 (tests/meson.build): code there runs 10 to 50 times
// slower, and the default tree runs every repetition of the same test on every change.
inline std::uint64_t scaled(std::uint64_t count) {
  const std::uint64_t percent = env_u64("FLURRY_TEST_SCALE", 100);
  const std::uint64_t n = count * percent / 100;
  return n == 0 ? 1 : n;
}

inline std::string replay_hint(std::uint64_t seed) { return "FLURRY_TEST_SEED=" + std::to_string(seed); }

}  // namespace flurry::testing
