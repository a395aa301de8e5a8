// control/cluster/etcd_client.h — KvStore over etcd v3's JSON gateway (/v3/kv/txn,
// /v3/lease/grant|keepalive|revoke), with libcurl over HTTP/1.1 keep-alive, plain (http://) or
// TLS (https://: etcd's certificate verified against a CA file, optionally a client certificate),
// optionally as an etcd user (/v3/auth/authenticate; the token goes in the Authorization header).
//
// Contract:
//   * every call is bounded: each endpoint is tried at most once per call, and on it at most
//     the request, an authentication and the request again, each bounded by
//     `request_timeout_ms` (an authentication by max(request_timeout_ms,
//     authenticate_timeout_ms)); so one call takes at most endpoints × (2 × request +
//     authentication), endpoints × request_timeout_ms without a user;
//   * failover: a call starts at the endpoint that answered last; on a transport failure or
//     an "unavailable" answer (no leader, 503) it moves on to the next endpoint;
//   * a token etcd refuses (it expired after --auth-token-ttl without use, etcd restarted and
//     forgot its simple tokens, or etcd's auth was enabled after we started) is replaced by a
//     new authentication and the request repeated once: etcd refuses such a request before it
//     does anything, so repeating it cannot apply it twice. The password is read from its file
//     at every authentication (a new password needs no restart);
//   * failures the local configuration decides (etcd's certificate not verified by the CA
//     file, our certificate or key unreadable, a password file that is unreadable, the password
//     or user refused, permission denied) are `failed` with a message naming the flag to fix:
//     nothing was applied and retrying alone will not help. etcd closing a TLS connection
//     (e.g. it wants a client certificate we did not send or does not trust ours) looks like any
//     dropped connection to curl: `unavailable`, with a hint in the message;
//   * keys and values travel base64-encoded, int64 fields as JSON strings (gateway rules);
//   * one EtcdClient is used by one thread at a time (curl easy handles are not shared);
//     give each thread its own client. The counters may be read from any thread.
// Used by flurryd's control threads, never by a worker, each client by one thread at a time: the
// membership client by the main thread (claim at start, release at stop) and flurry-renew (renew,
// re-claim); the SeqBlocks client by flurry-seq and the control loop (under SequenceManager's
// mutex); the lease keeper's own client by the lease keeper.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/cluster/kv.h"

namespace flurry::control::cluster {

// The token of one etcd user, shared by the EtcdClients of a process that authenticate as that
// user (EtcdConfig::session): one authentication serves them all, and a token etcd refuses is
// replaced once, by the first client that meets the refusal, while the others wait for it and
// take the new one. So etcd checks flurryd's password (bcrypt) once per token, not once per
// client, and the lease keeper finds a token ready when it needs one. Used by EtcdClient only.
struct EtcdSession {
  std::mutex mutex;   // held across an authentication: the others wait for its token
  std::string token;  // guarded; "" none yet, or etcd said auth is off
  // +1 at each authentication, under the mutex; read without it (a client with the current
  // token never waits on another's authentication).
  std::atomic<std::uint64_t> generation{0};
  bool server_auth_off = false;                     // guarded; etcd answered "authentication is not enabled"
  std::atomic<std::uint64_t> authentications{0};    // tokens got
  std::atomic<std::uint64_t> reauthentications{0};  // of them, after etcd refused the token in use
};

struct EtcdConfig {
  std::vector<std::string> endpoints;  // "http://127.0.0.1:2379" or "https://...", no trailing slash
  std::uint32_t request_timeout_ms = 1000;
  std::uint32_t connect_timeout_ms = 300;
  // TLS, for https:// endpoints (--etcd-cacert, --etcd-cert, --etcd-key). ca_file empty:
  // libcurl's default CA bundle. cert_file and key_file go together.
  std::string ca_file{};
  std::string cert_file{};
  std::string key_file{};
  // etcd authentication (--etcd-user, --etcd-password-file); user empty: none.
  std::string user{};
  std::string password_file{};
  // etcd checks a password with bcrypt (cost 10 by default: tens of ms on an idle server,
  // half a second and more seen on a busy 2-vCPU one, where an authentication given up on
  // still costs etcd its bcrypt), so an authentication may take this long.
  std::uint32_t authenticate_timeout_ms = 5000;
  // Shared with the other clients of this user (see EtcdSession); null: a session of its own.
  std::shared_ptr<EtcdSession> session{};
};

// Splits "URL[,URL...]" and checks each is http://host:port or https://host:port; fails on a
// malformed list.
Result<std::vector<std::string>> parse_endpoints(std::string_view list);

// Everything about a config that can be checked without etcd, naming the flag to fix: the
// endpoints (one scheme for all); TLS files only with https://, each a readable file; https://
// without ca_file only when libcurl has a default CA bundle; cert and key together; user and
// password file together; the password file private (control/private_file.h) and not empty.
Status check_config(const EtcdConfig& config);

// The password in `path`: the file read as control/private_file.h says, without its final line
// break; refused when empty or longer than 1 KiB.
Result<std::string> read_password_file(const std::string& path);

std::string base64_encode(std::string_view bytes);
std::optional<std::string> base64_decode(std::string_view text);

class EtcdClient final : public KvStore {
 public:
  // Fails only on a bad config or when libcurl cannot be initialised; does not contact etcd.
  static Result<std::unique_ptr<EtcdClient>> create(const EtcdConfig& config);
  ~EtcdClient() override;
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  Result<TxnResult> txn(const Txn& txn) override;
  Result<LeaseGrant> lease_grant(std::int64_t ttl_s) override;
  Result<std::int64_t> lease_keepalive(std::int64_t lease_id) override;
  Status lease_revoke(std::int64_t lease_id) override;
  std::string endpoint() const override;

  // Endpoint switches so far (failovers), for metrics.
  std::uint64_t failovers() const { return failovers_; }
  // Authentications that gave a token, of this client's session (shared or its own): all of
  // them, and those after etcd refused the token in use (expired, etcd restarted). Any thread
  // may read them.
  std::uint64_t authentications() const;
  std::uint64_t reauthentications() const;

  struct Impl;

 private:
  explicit EtcdClient(const EtcdConfig& config);
  std::unique_ptr<Impl> impl_;
  std::uint64_t failovers_ = 0;
};

}  // namespace flurry::control::cluster
