// control/renew_loop.h — the renew thread: runs the watermark scheduler's tick (and cluster
// mode's fence / re-claim step) every tick_ms on a thread of its own, so that a disk sync or
// an etcd call that hangs never blocks the control loop that answers the control socket and
// /metrics (docs/architecture.md section 2, Threads). The step may block for as long as the I/O
// takes; the control loop reads WatermarkScheduler::snapshot(), which never waits for it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace flurry::control {

class RenewLoop {
 public:
  // `thread_name` (at most 15 characters) is what top -H and /proc/<pid>/task show.
  RenewLoop(std::uint32_t tick_ms, std::function<void()> step, const char* thread_name = "flurry-renew")
      : tick_ms_(tick_ms), step_(std::move(step)), thread_name_(thread_name) {}
  RenewLoop(const RenewLoop&) = delete;
  RenewLoop& operator=(const RenewLoop&) = delete;
  ~RenewLoop() { stop(); }

  void start();
  // Asks the thread to stop and joins it: returns once the step in progress (if any) has
  // returned, which may take as long as its I/O.
  void stop();

 private:
  void run();

  std::uint32_t tick_ms_;
  std::function<void()> step_;
  const char* thread_name_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_requested_ = false;
  std::thread thread_;
};

}  // namespace flurry::control
