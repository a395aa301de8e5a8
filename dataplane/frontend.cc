// dataplane/frontend.cc — see frontend.h.
#include "dataplane/frontend.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace flurry::dataplane {

std::string_view to_string(FrontendCount count) {
  switch (count) {
    case FrontendCount::connections_accepted:
      return "connections_accepted";
    case FrontendCount::requests_ids:
      return "requests_ids";
    case FrontendCount::requests_other:
      return "requests_other";
    case FrontendCount::ids_issued:
      return "ids_issued";
    case FrontendCount::answered_retry:
      return "answered_retry";
    case FrontendCount::answered_fenced:
      return "answered_fenced";
    case FrontendCount::bad_request:
      return "bad_request";
    case FrontendCount::protocol_error:
      return "protocol_error";
    case FrontendCount::count_:
      break;
  }
  return "unknown";
}

void FrontendCounters::visit(std::string_view counter_name, std::uint32_t core, const Door& door,
                             const CounterVisitor& visit) const {
  for (std::size_t i = 0; i < values.size(); ++i) {
    visit(counter_name, to_string(static_cast<FrontendCount>(i)), core, values[i].get());
  }
  door.visit([&](std::string_view event, std::uint64_t value) { visit(counter_name, event, core, value); });
}

Result<int> listen_tcp(const std::string& address, std::uint16_t port, std::string_view flag) {
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &where.sin_addr) != 1) {
    return Error{std::string(flag) + ": '" + address + "' is not an IPv4 address"};
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error{std::string(flag) + ": socket: " + std::strerror(errno)};
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&where), sizeof where) != 0 || listen(fd, 128) != 0) {
    const int err = errno;
    close(fd);
    return Error{std::string(flag) + " " + address + ":" + std::to_string(port) + ": cannot listen (" +
                 std::strerror(err) + "): is another server on that port? Pick another with " +
                 std::string(flag)};
  }
  return fd;
}

}  // namespace flurry::dataplane
