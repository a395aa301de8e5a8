// client/transport.cc — see transport.h for the contract.
#include "client/transport.h"

#include <netdb.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>
#include <system_error>

#include "client/errors.h"

namespace flurry::client {

Transport::~Transport() {
  for (const Server& server : servers_) {
    if (server.socket_fd >= 0) ::close(server.socket_fd);
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::optional<Transport::Server> Transport::resolve(const std::string& text, Error* error) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    set_error(error, ErrorCode::invalid_argument,
              "server '" + text + "' is not HOST:PORT, e.g. 127.0.0.1:7420");
    return std::nullopt;
  }
  const std::string host = text.substr(0, colon);
  const std::string_view port_text = std::string_view(text).substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port == 0 || port > 65535) {
    set_error(error, ErrorCode::invalid_argument, "server '" + text + "': port must be a number 1..65535");
    return std::nullopt;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* result = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    const std::string why = rc == EAI_SYSTEM ? errno_text(errno) : ::gai_strerror(rc);
    set_error(error, ErrorCode::resolve_failed,
              "server '" + text + "': cannot resolve '" + host + "' to an IPv4 address: " + why);
    if (result != nullptr) ::freeaddrinfo(result);
    return std::nullopt;
  }
  Server server;
  server.name = text;
  std::memcpy(&server.address, result->ai_addr, sizeof server.address);
  server.address.sin_port = htons(static_cast<std::uint16_t>(port));
  ::freeaddrinfo(result);
  return server;
}

bool Transport::open(const std::vector<std::string>& servers, Error* error) {
  for (const std::string& text : servers) {
    std::optional<Server> server = resolve(text, error);
    if (!server) return false;
    servers_.push_back(std::move(*server));
  }
  for (Server& server : servers_) {
    server.socket_fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (server.socket_fd < 0) {
      set_error(error, ErrorCode::system, "cannot open a UDP socket: " + errno_text(errno));
      return false;
    }
    // Connected: the kernel delivers only this server's datagrams to it. Sends nothing.
    if (::connect(server.socket_fd, reinterpret_cast<const sockaddr*>(&server.address),
                  sizeof server.address) != 0) {
      set_error(error, ErrorCode::system,
                "cannot connect a UDP socket to server '" + server.name + "': " + errno_text(errno));
      return false;
    }
  }
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    set_error(error, ErrorCode::system, "cannot create an eventfd: " + errno_text(errno));
    return false;
  }
  return true;
}

int Transport::send(std::size_t server, std::span<const std::uint8_t> datagram) {
  ssize_t n = -1;
  do {
    n = ::send(servers_[server].socket_fd, datagram.data(), datagram.size(), 0);
  } while (n < 0 && errno == EINTR);
  return n < 0 ? errno : 0;
}

std::optional<std::size_t> Transport::receive(std::size_t server, std::span<std::uint8_t> buffer) {
  for (;;) {
    const ssize_t n = ::recv(servers_[server].socket_fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) return std::nullopt;
  }
}

void Transport::clear_socket_error(std::size_t server) {
  int pending = 0;
  socklen_t length = sizeof pending;
  ::getsockopt(servers_[server].socket_fd, SOL_SOCKET, SO_ERROR, &pending, &length);
}

void Transport::wake() {
  woken_.store(true, std::memory_order_release);
  if (wake_fd_ < 0) return;
  const std::uint64_t one = 1;
  // Cannot fail short of a bug: the counter is far from overflowing.
  [[maybe_unused]] const ssize_t written = ::write(wake_fd_, &one, sizeof one);
}

}  // namespace flurry::client
