// tests/support/ports.cc — see ports.h.
#include "tests/support/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <system_error>

namespace flurry::testing {
namespace {

std::uint16_t free_port(int type) {
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

}  // namespace

std::uint16_t free_udp_port() { return free_port(SOCK_DGRAM); }
std::uint16_t free_tcp_port() { return free_port(SOCK_STREAM); }

}  // namespace flurry::testing
