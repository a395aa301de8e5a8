// client/clock.cc — the real Clock: std::chrono::steady_clock and ppoll() (see clock.h).
#include "client/clock.h"

#include <ctime>

namespace flurry::client {
namespace {

timespec to_timespec(Clock::duration duration) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count();
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  return ts;
}

class SteadyClock final : public Clock {
 public:
  time_point now() override { return std::chrono::steady_clock::now(); }

  // ppoll may return early (EINTR, or its timeout rounded down): wait again for the rest.
  bool wait_until(time_point deadline, std::span<pollfd> fds) override {
    for (;;) {
      const time_point now = this->now();
      if (now >= deadline) return false;
      const timespec ts = to_timespec(deadline - now);
      if (::ppoll(fds.data(), fds.size(), &ts, nullptr) > 0) return true;
    }
  }

  bool sleep_until(time_point deadline, int wake_fd) override {
    pollfd fd{wake_fd, POLLIN, 0};
    for (;;) {
      if (!wait_until(deadline, std::span<pollfd>(&fd, 1))) return true;
      if ((fd.revents & POLLIN) != 0) return false;
    }
  }
};

}  // namespace

Clock& steady_clock() {
  // Never destroyed, so a Client that outlives static destruction still has its clock.
  static SteadyClock& clock = *new SteadyClock;
  return clock;
}

}  // namespace flurry::client
