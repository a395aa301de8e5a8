// dataplane/http_frontend.h — `flurryd --http-listen ADDR:PORT`: IDs over HTTP/1.1 for any
// stack with an HTTP client (Leaf's way), served by libmicrohttpd (external polling, epoll) on
// one thread of this class's that owns its own core slice.
//
//   GET /v1/ids?n=N        200 {"ids":[...],"node":K} (n: 1..ids_per_call_max, default 1);
//                          `&format=text` (or Accept: text/plain): one ID a line;
//                          `&format=strings`: {"ids":["...",...],...} (JavaScript cannot hold
//                          an ID above 2^53 as a number)
//   GET /v1/seq/NAME?n=N   200 {"name":"NAME","numbers":[...]}: n numbers of the named
//                          sequence (flurryctl seq create NAME); format=text and strings too
//   GET /v1/info           200 JSON: the INFO fields (version, layout, node, limits), strings
//   GET /api/snowflake/get/KEY   200 text: one ID (Leaf's snowflake API; KEY is ignored)
//   GET /api/segment/get/KEY     200 text: the next number of sequence KEY (Leaf's segment API)
// Errors: 400 a bad n or name, 404 another path or an unknown sequence (saying how to create
// it), 405 a method other than GET/HEAD, 503 with Retry-After (seconds, at least 1) when the
// ceiling is reached or a sequence's block is not ready, 503 when the node id is lost or the
// node drains (fenced: ask another node), 409 a monotonic sequence another node serves (the
// body names it), 410 a sequence with no number left. Logins (--auth optional|required,
// door_auth.h): `Authorization: Bearer NAME:PASSWORD`, verified once per connection while it
// repeats the same token; 401 + WWW-Authenticate: Bearer without one under required or for a
// wrong one (then the connection closes), 403 and 429 for a key's permissions and rate, 400
// for a token under --auth off. HTTPS with config.tls_cert_pem / tls_key_pem (libmicrohttpd's
// TLS). HTTP/1.1 keep-alive. Bounds
// (config.door, base/door.h): a new client is always admitted; at door.connections_max
// connections the one that has waited longest (idle, or a request head under way) is closed
// for it, and an address at door.per_peer_max loses its own longest-waiting one;
// door.idle_timeout_ms without a request, door.request_timeout_ms from a request line to its
// whole head (a slow trickle is closed). libmicrohttpd tells nothing of bytes before a whole
// request line: a connection trickling its request line counts as idle since it connected
// (closed after door.idle_timeout_ms, whatever it sends).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "core/shared.h"
#include "core/slice.h"
#include "dataplane/door_auth.h"
#include "dataplane/frontend.h"

struct MHD_Daemon;

namespace flurry::dataplane {

class HttpFrontend final : public Frontend {
 public:
  // Binds and listens (a taken port fails flurryd's start); start() serves.
  static Result<std::unique_ptr<Frontend>> open(const FrontendConfig& config, core::Shared& shared);
  ~HttpFrontend() override;
  HttpFrontend(const HttpFrontend&) = delete;
  HttpFrontend& operator=(const HttpFrontend&) = delete;

  Status start() override;
  void stop() override;
  std::string_view name() const override { return "http"; }
  void visit_counters(const CounterVisitor& visit) const override;
  const Door& door() const override { return door_; }
  std::string describe() const override;

  struct Answer {
    unsigned status = 200;
    std::string body;
    const char* content_type = "text/plain; charset=utf-8";
    unsigned retry_after_s = 0;              // 503 / 429 with Retry-After when not 0
    const char* www_authenticate = nullptr;  // 401's WWW-Authenticate
    bool close = false;                      // Connection: close (after a failed login)
  };
  // A connection's login: the bearer token that verified last on it, so that keep-alive
  // requests carrying the same token are not verified (hashed) again.
  struct Session {
    DoorSession door;
    std::string token;
  };
  // One request, on libmicrohttpd's thread; `n` and `format` are the query's values (null
  // when absent), `accept` the Accept header, `authorization` the Authorization header.
  Answer answer(std::string_view method, std::string_view url, const char* n, const char* format,
                const char* accept, const char* authorization, Session& session);

 private:
  struct Callbacks;  // libmicrohttpd's C callbacks, defined in http_frontend.cc

  HttpFrontend(const FrontendConfig& config, core::Shared& shared, int listen_fd);
  // The request's caller: the session to admit it under (the connection's, logged in, or an
  // empty one), or the refusal (401, 400).
  std::optional<Answer> caller(const char* authorization, Session& session, DoorSession** door);
  // The door's refusal of a verdict other than served (door_auth.h), nullopt when served.
  std::optional<Answer> admit(DoorSession& door, DoorUse use, std::uint32_t count, std::string_view sequence,
                              const core::Key** key);
  Answer ids(DoorSession& door, const char* n, bool text, bool one_plain, bool strings);
  Answer seq(DoorSession& door, std::string_view name, const char* n, bool text, bool one_plain,
             bool strings);
  Answer refused(const core::Issued& issued, std::string_view name);
  // The numbers of ranges_[0, count): one a line, or a JSON array (of strings with `strings`).
  void text_lines(std::string& out, std::uint32_t count) const;
  void json_array(std::string& out, std::uint32_t count, bool strings) const;
  Answer info() const;
  void run();  // the serving thread: libmicrohttpd's epoll, MHD_run, the door's timeouts

  FrontendConfig config_;
  core::Slice slice_;
  FrontendCounters counters_;
  Door door_;  // the serving thread's; its counters are read by the control loop
  DoorAuth auth_;
  DoorSession anonymous_;  // a request without a login: served as unsigned UDP is (or 401)
  int listen_fd_ = -1;
  int epoll_fd_ = -1;  // libmicrohttpd's
  MHD_Daemon* daemon_ = nullptr;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<proto::Range> ranges_;  // what one request issued; sized at open (frontend.h)
  core::Source source_;               // the peer of the request being answered (set by access)
};

}  // namespace flurry::dataplane
