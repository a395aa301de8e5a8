// tests/client/manual_clock.h — a client::Clock (client/clock.h) that only moves when told,
// for tests of the client's timing without real sleeps.
//
// Contract:
//   * now() starts at an arbitrary point and moves only through advance() and sleep_until().
//   * sleep_until() takes no real time: unless the wake fd is readable (the client is being
//     destroyed), it steps now() to the deadline, records the step in sleeps(), then runs the
//     on_sleep callback on the sleeping thread, so a test can change the world at a simulated
//     moment ("raise the ceiling 50 ms in").
//   * wait_until() (the wait for an answer) blocks in real time until one of its fds has an
//     event, or until advance() moves now() to its deadline: a timeout happens only when the
//     test says so. waiting() tells a test that a thread is blocked there.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "client/clock.h"

namespace flurry::client::testing {

class ManualClock final : public Clock {
 public:
  time_point now() override;
  bool wait_until(time_point deadline, std::span<pollfd> fds) override;
  bool sleep_until(time_point deadline, int wake_fd) override;

  // Steps now() forward and wakes every wait_until() so it looks at the new time.
  void advance(duration step);
  // Time stepped since construction.
  duration elapsed();
  // Every step sleep_until() took, in order.
  std::vector<duration> sleeps();
  void on_sleep(std::function<void()> callback);
  // Blocks up to `limit` of real time until a thread is inside wait_until(); true if one is.
  bool await_waiter(std::chrono::milliseconds limit);

 private:
  std::mutex mutex_;
  std::condition_variable waiter_cv_;
  duration elapsed_{0};
  std::vector<duration> sleeps_;
  std::function<void()> on_sleep_;
  std::vector<int> waiter_fds_;  // one eventfd per thread inside wait_until()
};

}  // namespace flurry::client::testing
