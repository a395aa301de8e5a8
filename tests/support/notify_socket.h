// tests/support/notify_socket.h — a unix datagram socket standing in for systemd's
// $NOTIFY_SOCKET: a test binds it, starts flurryd with NOTIFY_SOCKET=path() and reads what
// flurryd sends (READY=1, STOPPING=1, WATCHDOG=1, STATUS=...). Every wait is bounded.
#pragma once

#include <string>
#include <vector>

namespace flurry::testing {

class NotifySocket {
 public:
  explicit NotifySocket(std::string path);
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  // False when socket() or bind() failed (errno says why).
  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }
  // "NOTIFY_SOCKET=<path>", for ChildProcess::spawn's env.
  std::string env() const { return "NOTIFY_SOCKET=" + path_; }

  // Reads messages until one holds the line `line` (e.g. "READY=1"); every message read is
  // appended to `seen`. False after timeout_ms without it.
  bool wait_for(const std::string& line, int timeout_ms, std::vector<std::string>* seen);

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

}  // namespace flurry::testing
