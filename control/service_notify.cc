// control/service_notify.cc — see service_notify.h. A failed sd_notify is logged once and
// otherwise ignored: the notify socket is systemd's, and losing it must not stop the node.
#include "control/service_notify.h"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/log.h"

namespace flurry::control {

ServiceNotify::ServiceNotify() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  socket_set_ = socket != nullptr && socket[0] != '\0';
  std::uint64_t interval_us = 0;
  if (sd_watchdog_enabled(0, &interval_us) > 0) {
    watchdog_interval_ = std::chrono::microseconds(interval_us);
    log_info("systemd watchdog every {} ms: WATCHDOG=1 every {} ms from the control loop", interval_us / 1000,
             interval_us / 2000);
  }
}

void ServiceNotify::send(const std::string& message) {
  if (!socket_set_) return;
  if (const int sent = sd_notify(0, message.c_str()); sent < 0) {
    log_warn("sd_notify to $NOTIFY_SOCKET failed: {}; systemd does not hear this flurryd",
             std::strerror(-sent));
    socket_set_ = false;  // once: the socket is gone for good
  }
}

void ServiceNotify::ready(const std::string& status) {
  if (ready_sent_) return;
  ready_sent_ = true;
  send("READY=1\nSTATUS=" + status);
}

void ServiceNotify::status(const std::string& status) { send("STATUS=" + status); }

void ServiceNotify::stopping(const std::string& status) {
  if (stopping_sent_) return;
  stopping_sent_ = true;
  send("STOPPING=1\nSTATUS=" + status);
}

void ServiceNotify::watchdog(std::chrono::steady_clock::time_point now) {
  if (watchdog_interval_.count() == 0 || now - last_watchdog_ < watchdog_interval_ / 2) return;
  last_watchdog_ = now;
  send("WATCHDOG=1");
}

int ServiceNotify::poll_timeout_ms(int limit_ms) const {
  if (watchdog_interval_.count() == 0) return limit_ms;
  const auto half_ms = std::chrono::duration_cast<std::chrono::milliseconds>(watchdog_interval_ / 4).count();
  return std::min(limit_ms, static_cast<int>(std::max<std::int64_t>(1, half_ms)));
}

}  // namespace flurry::control
