// tests/support/notify_socket.cc — see notify_socket.h.
#include "tests/support/notify_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>

namespace flurry::testing {

NotifySocket::NotifySocket(std::string path) : path_(std::move(path)) {
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path_.copy(address.sun_path, sizeof address.sun_path - 1);
  bound_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
}

NotifySocket::~NotifySocket() {
  if (fd_ >= 0) close(fd_);
  if (bound_) unlink(path_.c_str());
}

bool NotifySocket::wait_for(const std::string& line, int timeout_ms, std::vector<std::string>* seen) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd fd{fd_, POLLIN, 0};
    if (poll(&fd, 1, 50) != 1) continue;
    char buffer[4096];
    const ssize_t got = recv(fd_, buffer, sizeof buffer, 0);
    if (got <= 0) continue;
    seen->emplace_back(buffer, static_cast<std::size_t>(got));
    if (("\n" + seen->back() + "\n").find("\n" + line + "\n") != std::string::npos) return true;
  }
  return false;
}

}  // namespace flurry::testing
