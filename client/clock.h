// client/clock.h — the client's time source (Options::clock), injectable so that tests step
// time instead of sleeping.
//
// Contract:
//   * now() is monotonic: it never goes back.
//   * wait_until() is the wait for an answer: it returns true as soon as one of `fds` has an
//     event (revents set), false once now() has reached `deadline` with none. It may return
//     true early for an event the caller then finds spurious; the caller loops.
//   * sleep_until() is the back-off after a RETRY answer, a failed send or a failed refill:
//     true once now() has reached `deadline`, false at once if `wake_fd` is (or becomes)
//     readable. The client writes its wake fd only when it is being destroyed.
//   * A Clock may be called from several threads at once (a caller and the prefetch thread).
#pragma once

#include <poll.h>

#include <chrono>
#include <span>

namespace flurry::client {

class Clock {
 public:
  using duration = std::chrono::steady_clock::duration;
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual time_point now() = 0;
  virtual bool wait_until(time_point deadline, std::span<pollfd> fds) = 0;
  virtual bool sleep_until(time_point deadline, int wake_fd) = 0;
};

// std::chrono::steady_clock and ppoll(): the clock a Client uses when Options::clock is null.
// One instance for the process; never destroyed before a Client that uses it.
Clock& steady_clock();

}  // namespace flurry::client
