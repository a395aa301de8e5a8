// control/service_notify.h — flurryd's side of systemd's notify protocol (Type=notify), through
// libsystemd's sd_notify: READY=1 once the node serves IDs (the condition /readyz reports),
// STOPPING=1 when it begins to shut down, WATCHDOG=1 from the control loop at half the
// WatchdogSec interval when the unit sets one (sd_watchdog_enabled), STATUS= lines on the way.
// Without $NOTIFY_SOCKET (not started by systemd) every call does nothing. Called from the
// control loop only; never from a worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace flurry::control {

class ServiceNotify {
 public:
  // Reads $NOTIFY_SOCKET and the watchdog interval ($WATCHDOG_USEC / $WATCHDOG_PID).
  ServiceNotify();

  // READY=1 with a STATUS line, the first time it is called; later calls do nothing.
  void ready(const std::string& status);
  bool ready_sent() const { return ready_sent_; }
  // A STATUS= line only (e.g. "drained").
  void status(const std::string& status);
  // STOPPING=1 with a STATUS line, once.
  void stopping(const std::string& status);
  // WATCHDOG=1 when half the watchdog interval passed since the last one (call every loop).
  void watchdog(std::chrono::steady_clock::time_point now);
  // The control loop's poll timeout, lowered so that the watchdog is never late.
  int poll_timeout_ms(int limit_ms) const;

 private:
  void send(const std::string& message);

  bool socket_set_ = false;
  bool ready_sent_ = false;
  bool stopping_sent_ = false;
  std::chrono::microseconds watchdog_interval_{0};  // zero: no watchdog
  std::chrono::steady_clock::time_point last_watchdog_{};
};

}  // namespace flurry::control
