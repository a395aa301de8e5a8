// client/transport.h — internal: the client's UDP sockets, one per server, and the wake fd.
//
// Contract:
//   * open() resolves every "HOST:PORT" once (getaddrinfo, IPv4), opens one UDP socket per
//     server, connected to it, and one eventfd; on failure it sets *error (invalid_argument,
//     resolve_failed or system, as Client::create documents) and the Transport must not be used.
//   * A connected socket receives only datagrams whose source is its server's address and port:
//     the kernel drops everything else, so an answer is only ever read from the server asked
//     (PROTOCOL.md "What a client can be sure of"). An ICMP port unreachable for it shows as a
//     socket error on that socket alone.
//   * The wake fd becomes readable once wake() is called and stays readable: every wait that
//     watches it (Clock::wait_until, Clock::sleep_until) ends at once. Only destruction wakes.
//   * send() and receive() never block; the caller waits on socket_fd() through its Clock.
//     Not thread-safe: the exchange serializes them under its caller's mutex. wake() may be
//     called from any thread.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "client/client.h"

namespace flurry::client {

class Transport {
 public:
  Transport() = default;
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  bool open(const std::vector<std::string>& servers, Error* error);

  std::size_t server_count() const { return servers_.size(); }
  // "HOST:PORT" as given in Options::servers.
  const std::string& name(std::size_t server) const { return servers_[server].name; }
  // The socket connected to `server`.
  int socket_fd(std::size_t server) const { return servers_[server].socket_fd; }
  int wake_fd() const { return wake_fd_; }

  // Sends one datagram to `server` (retrying EINTR); 0, or the errno of the failure.
  int send(std::size_t server, std::span<const std::uint8_t> datagram);
  // One datagram from `server` into `buffer` (its size, truncated to the buffer), or nullopt
  // when none is queued. Errors other than EINTR (a refused port's ECONNREFUSED) end the drain
  // like EAGAIN: they are reported by the next wait, not here.
  std::optional<std::size_t> receive(std::size_t server, std::span<std::uint8_t> buffer);
  // Clears a queued socket error (an ICMP port unreachable) so a wait does not spin on it.
  void clear_socket_error(std::size_t server);
  void wake();
  // True once wake() was called (a polling wait checks it instead of the wake fd).
  bool woken() const { return woken_.load(std::memory_order_acquire); }

 private:
  struct Server {
    std::string name;
    sockaddr_in address{};
    int socket_fd = -1;
  };
  static std::optional<Server> resolve(const std::string& text, Error* error);

  std::vector<Server> servers_;
  int wake_fd_ = -1;
  std::atomic<bool> woken_{false};
};

}  // namespace flurry::client
