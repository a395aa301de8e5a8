// dataplane/poll_governor.h — how long a socket worker keeps polling after a burst before it
// sleeps (--poll-spin-us is the most it will poll).
//
// A worker that sleeps in recvmmsg between bursts is woken by the kernel when the next request
// arrives: on a VM that wakeup (an inter-processor interrupt to a halted vCPU) costs 15-25 µs,
// more than everything else on a loopback round trip. Polling a little after each burst keeps
// the worker awake for a client that sends again soon (a ping-pong client, a pipelined batch
// client), and costs CPU only while it polls.
//
// The window adapts to the gaps the worker sees, as the kernel's haltpoll governor does for
// idle CPUs: a gap that polling covered leaves it alone; a gap that ended in a short sleep
// (no longer than the most) doubles it, starting from a quarter of the most; a gap longer than
// the most halves it, and below that quarter it falls to 0 (no polling at all). So sparse
// traffic (a request every millisecond) soon costs nothing, while a client that comes back
// within the window never waits for a wakeup. Requests arriving steadily just beyond the
// window's reach keep the worker polling up to the most after each burst: at worst one core
// per worker, which is what a DPDK worker always spends.
//
// Pure logic, no clock and no system call: the worker measures each gap (tests/dataplane).
#pragma once

#include <algorithm>
#include <cstdint>

namespace flurry::dataplane {

class PollGovernor {
 public:
  explicit constexpr PollGovernor(std::uint64_t max_ns)
      : max_ns_(max_ns), start_ns_(std::max<std::uint64_t>(max_ns / 4, 1)) {}

  // Poll this long after a burst before sleeping (0: sleep at once).
  constexpr std::uint64_t window_ns() const { return window_ns_; }

  // The gap from the end of one burst to the arrival of the next; true if polling covered it.
  constexpr bool on_gap(std::uint64_t gap_ns) {
    if (max_ns_ == 0) return false;
    if (window_ns_ != 0 && gap_ns <= window_ns_) return true;
    if (gap_ns <= max_ns_) {
      window_ns_ = window_ns_ == 0 ? start_ns_ : std::min(max_ns_, window_ns_ * 2);
    } else {
      window_ns_ = window_ns_ / 2 < start_ns_ ? 0 : window_ns_ / 2;
    }
    return false;
  }

 private:
  std::uint64_t max_ns_;
  std::uint64_t start_ns_;
  std::uint64_t window_ns_ = 0;
};

}  // namespace flurry::dataplane
