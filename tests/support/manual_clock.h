// tests/support/manual_clock.h — a Clock that tests move by hand. Wall time may step
// either way; monotonic time only goes forward. Thread-safe (a renew thread may read it while
// the test moves it).
#pragma once

#include <atomic>
#include <cstdint>

#include "base/clock.h"
#include "proto/layout.h"

namespace flurry::testing {

class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::uint64_t wall_ms = proto::default_epoch_ms + 86'400'000ULL * 700)
      : wall_ms_(wall_ms) {}
  std::uint64_t wall_ms() const override { return wall_ms_.load(); }
  std::uint64_t mono_ns() const override { return mono_ns_.load(); }
  // Both clocks move forward together.
  void advance_ms(std::uint64_t ms) {
    wall_ms_ += ms;
    mono_ns_ += ms * 1'000'000;
  }
  // Wall time steps either way; monotonic time does not move.
  void step_wall_ms(std::int64_t ms) {
    wall_ms_ = static_cast<std::uint64_t>(static_cast<std::int64_t>(wall_ms_.load()) + ms);
  }

 private:
  std::atomic<std::uint64_t> wall_ms_;
  std::atomic<std::uint64_t> mono_ns_{1'000'000'000ULL};
};

// One node's view of a shared clock: the same monotonic time, its own wall-clock offset
// (clock steps and skew of one node in a simulated cluster).
class OffsetClock final : public Clock {
 public:
  explicit OffsetClock(const Clock& base) : base_(base) {}
  std::uint64_t wall_ms() const override {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(base_.wall_ms()) + offset_ms);
  }
  std::uint64_t mono_ns() const override { return base_.mono_ns(); }
  std::int64_t offset_ms = 0;

 private:
  const Clock& base_;
};

}  // namespace flurry::testing
