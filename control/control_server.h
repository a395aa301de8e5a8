// control/control_server.h — the ops control socket: a Unix stream socket speaking JSON, one
// request per line, one response per line.
//
// Request: {"cmd": "status"} (or the bare word `status`); the commands are the table in
// control/commands.h. Response: {"ok": true, ...} or
// {"ok": false, "error": "..."}. Untrusted input: a line longer than line_size_max, bad JSON
// or an unknown command gets an error answer (never a crash).
// Only the owner talks to it: the socket file is created mode 0600 whatever the umask, and
// every connection's peer (SO_PEERCRED) must be flurryd's own uid or root; another is answered
// "permission denied", closed, counted (refused_peers) and logged once.
// Bounded by a door (base/door.h): at most door.connections_max clients (a new client is
// always accepted: when full, the client idle longest is closed for it), a client idle for
// door.idle_timeout_ms, or whose request line is incomplete door.request_timeout_ms after its
// first byte, is closed: idle clients never lock flurryctl out.
// Runs on the control loop (flurryd's main thread): poll_fds() are added to its poll set and serve()
// handles whatever is ready without blocking.
#pragma once

#include <poll.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/door.h"
#include "base/status.h"

namespace flurry::control {

class ControlServer {
 public:
  static constexpr std::size_t line_size_max = 4096;
  static constexpr std::size_t clients_max = 16;

  // Answers a command: fills `reply` (ok is added) or fails with the sentence to answer.
  using Handler =
      std::function<Status(const std::string& cmd, const nlohmann::json& request, nlohmann::json* reply)>;

  ControlServer() = default;
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Binds `path` (replacing a stale socket file, refusing one a live server answers on).
  // `limits.per_peer_max` counts per uid.
  Status open(const std::string& path, Handler handler,
              const DoorLimits& limits = DoorLimits{static_cast<std::uint32_t>(clients_max),
                                                    static_cast<std::uint32_t>(clients_max), 60'000, 10'000});
  // Appends this server's descriptors to `fds`.
  void poll_fds(std::vector<pollfd>* fds) const;
  // Accepts, reads and answers whatever is ready; never blocks.
  void serve();
  std::uint64_t bad_requests() const { return bad_requests_; }
  std::uint64_t refused_peers() const { return refused_peers_; }  // not flurryd's uid nor root
  const Door& door() const { return door_; }

 private:
  struct Client {
    int fd = -1;
    std::string buffer;
  };
  void answer(Client& client, const std::string& line);
  void accept_all();
  bool peer_allowed(int fd);
  void drop(int fd);  // closes a client and forgets it

  int listen_fd_ = -1;
  std::string path_;
  Handler handler_;
  std::vector<Client> clients_;
  std::uint64_t bad_requests_ = 0;
  std::uint64_t refused_peers_ = 0;
  Door door_{DoorLimits{}};
};

// Sends one command to a control socket and returns the parsed reply (flurryctl, tests, DPDK
// telemetry). The control loop answers within milliseconds when it runs, but a flurryd on a
// loaded host (or a sanitizer build beside other work) was seen to take longer than 2 s: the
// default wait is 10 s.
inline constexpr int control_timeout_ms_default = 10'000;
Result<nlohmann::json> control_request(const std::string& path, const std::string& cmd,
                                       int timeout_ms = control_timeout_ms_default);
// The same with a whole request object ({"cmd": ..., and the command's own fields}).
Result<nlohmann::json> control_request_object(const std::string& path, const nlohmann::json& request,
                                              int timeout_ms = control_timeout_ms_default);

}  // namespace flurry::control
