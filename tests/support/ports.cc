// tests/support/ports.cc — see ports.h.
#include "tests/support/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace flurry::testing {
namespace {

// The kernel's ephemeral range (ip_local_port_range): where it places every socket bound to
// port 0 and every socket that sends or connects unbound (each client's socket, every test
// server that binds port 0).
std::pair<int, int> ephemeral_range() {
  int low = 32768, high = 60999;  // Linux's default
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  return {low, high};
}

// A port outside the ephemeral range, at random, that was free a moment ago. Outside, because
// the port is bound later by the server the test starts, and in between the kernel hands
// ephemeral ports to whatever runs beside it (the unit suite runs on every CPU at once: client
// sockets, fake servers on port 0) but never one outside its range: so only another test
// picking the same port at random can take it first. Never twice in one process, for either
// type: a test that starts two servers asks for both ports before either has bound its own (a
// hunt met it once: the second flurryd refused "udp 127.0.0.1:P is already served by flurryd
// pid N", the first one's).
std::uint16_t free_port(int type) {
  static std::mutex mutex;
  static std::set<std::uint16_t> handed_out;
  static std::mt19937 random(std::random_device{}());
  const auto [low, high] = ephemeral_range();
  const auto [first, last] = pick_range(low, high);
  std::uniform_int_distribution<int> pick(first, last);
  for (int tries = 0; tries < 1000; ++tries) {
    const std::lock_guard lock(mutex);
    const auto port = static_cast<std::uint16_t>(pick(random));
    if (handed_out.count(port) == 0 && bindable(type, port)) {
      handed_out.insert(port);
      return port;
    }
  }
  throw std::system_error(EADDRINUSE, std::generic_category(),
                          "1000 ports picked on 127.0.0.1 outside the ephemeral range, none of them free");
}

}  // namespace

std::pair<int, int> pick_range(int low, int high) {
  const std::pair<int, int> below{10000, low - 1}, above{high + 1, 65535};
  const auto size = [](std::pair<int, int> range) { return range.second - range.first + 1; };
  const auto larger = size(below) >= size(above) ? below : above;
  if (size(larger) < 1000) {
    throw std::runtime_error("the kernel's ephemeral port range (net.ipv4.ip_local_port_range) is " +
                             std::to_string(low) + ".." + std::to_string(high) +
                             ": it leaves fewer than 1000 ports for test servers in 10000..65535 "
                             "outside it; narrow it, e.g. sysctl -w net.ipv4.ip_local_port_range="
                             "\"32768 60999\"");
  }
  return larger;
}

bool bindable(int type, std::uint16_t port) {
  const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return bound;
}

std::uint16_t free_udp_port() { return free_port(SOCK_DGRAM); }
std::uint16_t free_tcp_port() { return free_port(SOCK_STREAM); }

}  // namespace flurry::testing
