// base/clock.h — time sources of the control threads (control loop, flurry-renew, flurry-seq, lease
// keeper) and the socket backend's workers, injectable so tests can step wall time backwards while
// monotonic time only goes forward.
#pragma once

#include <cstdint>
#include <ctime>

namespace flurry {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::uint64_t wall_ms() const = 0;  // Unix milliseconds; may step either way
  virtual std::uint64_t mono_ns() const = 0;  // never goes back
};

// CLOCK_REALTIME (+ a test-only offset) and CLOCK_MONOTONIC.
class SystemClock final : public Clock {
 public:
  explicit SystemClock(std::int64_t offset_ms = 0) : offset_ms_(offset_ms) {}
  std::uint64_t wall_ms() const override {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000 +
                                      offset_ms_);
  }
  std::uint64_t mono_ns() const override {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
  }

 private:
  std::int64_t offset_ms_;
};

}  // namespace flurry
