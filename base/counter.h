// base/counter.h — a single-writer statistics counter that another thread may read.
//
// The owning worker increments without a locked instruction (load + store, relaxed); the
// control loop (flurryd's main thread) reads with a relaxed load. Values are monotonic per counter.
#pragma once

#include <atomic>
#include <cstdint>

namespace flurry {

class Counter {
 public:
  void add(std::uint64_t n = 1) {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t get() const { return value_.load(std::memory_order_relaxed); }
  // Back to 0, by the owning worker only (a counter handed to a new owner: core/keys.h slots).
  void reset() { value_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

}  // namespace flurry
