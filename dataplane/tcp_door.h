// dataplane/tcp_door.h — the loop a line-protocol front door runs on its one thread: a listening
// TCP socket and its non-blocking connections in one epoll set, the door's policy (base/door.h:
// admission with the longest-idle shed, idle and request timeouts), input read up to a bound,
// answers sent as the socket takes them, and reading paused while answers back up. The RESP
// and memcached front ends are this loop plus their protocol: process() parses what arrived on
// a connection and appends the answers to its `out`.
//
// Threads: start() spawns the loop's thread; everything below runs on it, except stop(), which
// joins it first. A connection lives in `connections_` from its accept to close_connection().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "base/door.h"
#include "base/status.h"
#include "core/source_limit.h"
#include "dataplane/frontend.h"

namespace flurry::dataplane {

// What the loop keeps of a connection; a front end derives its own (its login, its state).
struct TcpConnection {
  virtual ~TcpConnection() = default;
  int fd = -1;
  std::string in;              // bytes received and not yet parsed
  std::string out;             // answers not yet sent
  bool closing = false;        // close once `out` is sent
  core::Source source;         // its peer, for the per-source bound (docs/fairness.md)
  std::uint32_t watching = 0;  // the epoll events the loop asked for (watch() changes them)
};

class TcpDoor {
 public:
  // Above every command the protocols accept, so a command always fits; their parsers' limits
  // answer first. At output_max unsent bytes the loop stops reading the connection.
  static constexpr std::size_t input_max = 64 * 1024;
  static constexpr std::size_t output_max = 1024 * 1024;

  TcpDoor(const TcpDoor&) = delete;
  TcpDoor& operator=(const TcpDoor&) = delete;

 protected:
  // `flag` names the door in errors (--resp-listen); `stop_all` ends the loop with the node.
  TcpDoor(int listen_fd, std::string flag, Door& door, FrontendCounters& counters,
          const std::atomic<bool>& stop_all);
  virtual ~TcpDoor();  // a derived class calls stop_loop() in its own destructor

  Status start_loop();  // the epoll set, then the thread
  void stop_loop();     // joins the thread, closes every socket (idempotent)

  // The protocol: a new connection's object; parse what `connection.in` holds from its start,
  // answer into `connection.out`, erase what was parsed; true when it consumed input.
  virtual std::unique_ptr<TcpConnection> make_connection() = 0;
  virtual bool process(TcpConnection& connection) = 0;
  // Once a round of the loop (before it waits), and once as it ends.
  virtual void before_wait() {}
  virtual void after_loop() {}

  void close_connection(int fd);
  std::size_t open_connections() const { return connections_.size(); }

 private:
  void run();
  void accept_all();
  void on_event(TcpConnection& connection, std::uint32_t events);
  bool read_input(TcpConnection& connection);  // false: the peer closed or failed
  bool flush(TcpConnection& connection);       // false: the peer failed
  void watch(TcpConnection& connection);       // epoll_ctl only when the events change
  void close_expired(std::uint64_t now_ms);    // the door's timeouts

  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  std::string flag_;
  Door& door_;
  FrontendCounters& counters_;
  const std::atomic<bool>& stop_all_;
  std::atomic<bool> stop_{false};
  std::uint64_t next_expiry_check_ms_ = 0;  // door_now_ms() of the next close_expired()
  std::unordered_map<int, std::unique_ptr<TcpConnection>> connections_;
  std::thread thread_;
};

}  // namespace flurry::dataplane
