// dataplane/memcache_frontend.h — `flurryd --memcache-listen ADDR:PORT`: the memcached text
// protocol, so katsubushi's users (and any memcached client library) get IDs the way they
// already do. One thread running the TCP loop the RESP front end runs too (tcp_door.h), its
// own core slice.
//
// Commands (the parser: memcache.h; verbs case-insensitive, as katsubushi's):
//   get KEY...    one fresh ID for every key, whatever the key (katsubushi's `get id`;
//                 `get id id id` answers three distinct IDs), as `VALUE KEY 0 BYTES` lines
//                 and END; at most ids_per_call_max keys
//   gets KEY...   the same with memcached's cas field (the ID itself)
//   incr NAME N [noreply]   N numbers of the named sequence NAME (flurryctl seq create NAME)
//                 in one run, answered with the last (the caller owns last-N+1 .. last, as
//                 memcached answers the new value); 1 <= N <= ids_per_call_max; NOT_FOUND for
//                 an unknown sequence
//   version       VERSION <flurry's version>
//   stats         katsubushi's STAT lines (pid, uptime, time, version, curr_connections,
//                 total_connections, cmd_get, get_hits, get_misses), then this front end's
//                 counters and door events (frontend.h) and its node and core, END
//   quit          closes the connection
// Login (--auth optional|required, docs/authentication.md): memcached's ASCII authentication
// (memcached -Y): `set <any key> <flags> <exptime> <bytes>` whose data is `<key name> <door
// password>` logs the connection in as that key (one hash verification) and answers STORED;
// a wrong one answers `CLIENT_ERROR authentication failure: <why>` and closes the connection.
// Under required every other command but quit is refused before a login (`CLIENT_ERROR
// unauthenticated ...`, as memcached answers); a logged-in connection meets its key's
// permissions and rate (door_auth.h) as RESP's and HTTP's do.
// Refused: decr (a sequence only goes up), set/add/replace/append/prepend/cas (their data is
// read and dropped; a set is a login under --auth optional|required), delete and touch:
// `CLIENT_ERROR <why>` (nothing with noreply). An unknown
// command or the wrong number of arguments: ERROR. The ceiling reached, a sequence's block not
// ready, the node fenced or draining, a sequence exhausted or served by another node:
// `SERVER_ERROR <refusal_text>` (frontend.h: the words RESP uses) and a get's IDs are dropped
// (never issued again). A line longer than memcached's limits (2048 bytes, a get line 48 KiB)
// or a storage command whose data cannot be skipped: `CLIENT_ERROR <why>` and the connection
// is closed. Bounds (config.door, base/door.h), as RESP's: a new client is always admitted; at
// door.connections_max the connection that has waited longest is closed for it, and an address
// at door.per_peer_max loses its own longest-waiting one; door.idle_timeout_ms without a
// command under way, door.request_timeout_ms from a command's first byte to its end; 64 KiB of
// unparsed input a connection, and no more input is read while 1 MiB of answers waits.
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
#include "dataplane/memcache.h"
#include "dataplane/tcp_door.h"

namespace flurry::dataplane {

class MemcacheFrontend final : public Frontend, private TcpDoor {
 public:
  // Binds and listens (so a taken port fails flurryd's start); start() serves.
  static Result<std::unique_ptr<Frontend>> open(const FrontendConfig& config, core::Shared& shared);
  ~MemcacheFrontend() override;
  MemcacheFrontend(const MemcacheFrontend&) = delete;
  MemcacheFrontend& operator=(const MemcacheFrontend&) = delete;

  Status start() override;
  void stop() override;  // joins the thread, closes every socket
  std::string_view name() const override { return "memcache"; }
  void visit_counters(const CounterVisitor& visit) const override;
  const Door& door() const override { return door_; }
  std::string describe() const override;

 private:
  struct Connection : TcpConnection {
    DoorSession session;  // its login (memcached's ASCII authentication), if any
  };

  MemcacheFrontend(const FrontendConfig& config, core::Shared& shared, int listen_fd);
  // TcpDoor: memcached commands parsed and answered.
  std::unique_ptr<TcpConnection> make_connection() override;
  bool process(TcpConnection& connection) override;
  void before_wait() override;
  void after_loop() override;
  void execute(Connection& connection, const memcache::Parsed& parsed);
  void command_login(Connection& connection, const memcache::Parsed& parsed);
  // The session's key may do this now (door_auth.h admit); otherwise the refusal is answered
  // (unless `reply` is false: noreply).
  bool admitted(Connection& connection, DoorUse use, std::uint32_t count, std::string_view sequence,
                bool reply, const core::Key** key);
  void command_get(Connection& connection, bool cas);
  void command_incr(Connection& connection, const memcache::Parsed& parsed);
  void command_stats(Connection& connection);

  FrontendConfig config_;
  core::Slice slice_;
  FrontendCounters counters_;
  Door door_;
  DoorAuth auth_;
  std::string version_;           // from config.info's flurry_version
  std::uint64_t started_ms_ = 0;  // door_now_ms() at start: stats' uptime
  // katsubushi's stats (this thread only): keys of get and gets answered, and refused.
  std::uint64_t cmd_get_ = 0;
  std::uint64_t get_hits_ = 0;
  std::uint64_t get_misses_ = 0;
  std::vector<proto::Range> ranges_;      // what one command issued; sized at open (frontend.h)
  std::vector<std::string_view> tokens_;  // reserved at open for a get of ids_per_call_max keys
};

}  // namespace flurry::dataplane
