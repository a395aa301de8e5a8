// dataplane/resp_frontend.h — `flurryd --resp-listen ADDR:PORT`: a Redis-protocol TCP front
// end, so any language's Redis client gets IDs (March's way). One thread running the TCP loop of
// tcp_door.h (epoll, non-blocking sockets, the door's limits), its own core slice.
//
// Commands (names case-insensitive): PING [msg], ECHO msg, FLURRY.ID [n] (one ID as an
// integer; with n, an array of n integers, 1 <= n <= ids_per_call_max), INFO [section], HELLO
// [2|3] (RESP3 only changes the HELLO map), QUIT, CLIENT SETNAME/SETINFO (no-ops), SELECT 0,
// COMMAND (an empty array, for redis-cli's start-up). Named sequences (flurryctl seq create
// NAME), the key being the name: INCR name (the next number), INCRBY name n (n numbers in one
// run, answered with the last, as a Redis counter), FLURRY.SEQ name [n] (an integer, or an
// array of n), GET name (the last number this connection was given, nil before; issues
// nothing). DECR, DECRBY, SET and DEL are refused: a sequence only goes up. Errors: `-ERR
// ...` (bad argument, unknown command or sequence: how to create it), `-TRYAGAIN ...` (the
// ceiling was reached or a sequence's block is not ready: ask again after the hint), `-FENCED
// ...` (this node lost its node id or is draining: ask another node), `-NOTOWNER ...` (a
// monotonic sequence another node serves), `-EXHAUSTED ...` (no number left). Logins
// (--auth optional|required, door_auth.h): AUTH name password, AUTH name:password, HELLO 3
// AUTH name password; `-NOAUTH ...` before one under required (every command but AUTH, HELLO
// AUTH and QUIT), `-WRONGPASS ...` (and the connection closed) for a failed one, `-NOPERM
// ...` and `-TRYAGAIN ...` for a key's permissions and rate. A protocol
// error is answered -ERR and the connection closed. Bounds (config.door, base/door.h): a new
// client is always admitted; at door.connections_max connections the one that has waited
// longest (idle, or a command under way) is closed for it, and an address at
// door.per_peer_max loses its own longest-waiting one; a connection without a command under
// way for door.idle_timeout_ms is closed, and one whose command is still incomplete
// door.request_timeout_ms after its first byte (however slowly its bytes come); 64 KiB of
// unparsed input a connection, and no more input is read from a connection while 1 MiB of
// answers waits to be sent to it (pipelining without limit).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "core/shared.h"
#include "core/slice.h"
#include "dataplane/door_auth.h"
#include "dataplane/frontend.h"
#include "dataplane/tcp_door.h"

namespace flurry::dataplane {

class RespFrontend final : public Frontend, private TcpDoor {
 public:
  // Binds and listens (so a taken port fails flurryd's start); start() serves.
  static Result<std::unique_ptr<Frontend>> open(const FrontendConfig& config, core::Shared& shared);
  ~RespFrontend() override;
  RespFrontend(const RespFrontend&) = delete;
  RespFrontend& operator=(const RespFrontend&) = delete;

  Status start() override;
  void stop() override;  // joins the thread, closes every socket
  std::string_view name() const override { return "resp"; }
  void visit_counters(const CounterVisitor& visit) const override;
  const Door& door() const override { return door_; }
  std::string describe() const override;

 private:
  struct Connection : TcpConnection {
    std::uint64_t id = 0;
    bool resp3 = false;
    std::unordered_map<std::string, std::uint64_t> last;  // GET: the last number of each sequence
    DoorSession session;                                  // its login (AUTH), if any
  };

  RespFrontend(const FrontendConfig& config, core::Shared& shared, int listen_fd);
  // TcpDoor: the loop's connections are Connections; RESP commands parsed and answered.
  std::unique_ptr<TcpConnection> make_connection() override;
  bool process(TcpConnection& connection) override;
  void before_wait() override;
  void after_loop() override;
  void execute(Connection& connection, const std::vector<std::string_view>& args);
  void command_ids(Connection& connection, const std::vector<std::string_view>& args);
  void command_hello(Connection& connection, const std::vector<std::string_view>& args);
  void command_auth(Connection& connection, const std::vector<std::string_view>& args);
  bool logged_in(Connection& connection, std::string_view name, std::string_view password);
  bool admitted(Connection& connection, DoorUse use, std::uint32_t count, std::string_view sequence,
                const core::Key** key);
  void command_seq(Connection& connection, const std::vector<std::string_view>& args);
  void command_get(Connection& connection, std::string_view name);
  // The numbers of ranges_[0, count) as RESP integers.
  void integers(std::string& out, std::uint32_t count);

  FrontendConfig config_;
  core::Shared& shared_;
  core::Slice slice_;
  FrontendCounters counters_;
  Door door_;
  DoorAuth auth_;
  std::uint64_t next_connection_id_ = 1;
  std::vector<proto::Range> ranges_;  // what one command issued; sized at open (frontend.h)
  std::vector<std::string_view> args_;
};

}  // namespace flurry::dataplane
