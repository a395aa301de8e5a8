// tests/support/ports.cc — see ports.h.
#include "tests/support/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <set>
#include <system_error>

namespace flurry::testing {
namespace {

// The kernel's pick, bound and released at once. Never twice in one process, for either type:
// a test that starts two servers asks for both ports before either has bound its own, and the
// kernel, picking at random, may hand the first one out again (a hunt met it once: the second
// flurryd refused "udp 127.0.0.1:P is already served by flurryd pid N", the first one's).
std::uint16_t kernel_pick(int type) {
  const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int error = errno;
    close(fd);
    throw std::system_error(error, std::generic_category(), "bind 127.0.0.1:0");
  }
  close(fd);
  return ntohs(address.sin_port);
}

std::uint16_t free_port(int type) {
  static std::mutex mutex;
  static std::set<std::uint16_t> handed_out;
  for (int tries = 0; tries < 1000; ++tries) {
    const std::uint16_t port = kernel_pick(type);
    const std::lock_guard lock(mutex);
    if (handed_out.insert(port).second) return port;
  }
  throw std::system_error(EADDRINUSE, std::generic_category(),
                          "1000 ports picked on 127.0.0.1, each one this process had handed out before");
}

}  // namespace

std::uint16_t free_udp_port() { return free_port(SOCK_DGRAM); }
std::uint16_t free_tcp_port() { return free_port(SOCK_STREAM); }

}  // namespace flurry::testing
