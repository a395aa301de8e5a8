// tests/cluster/cluster_harness.h — processes for the cluster integration tests: a real etcd
// on loopback (free ports, data directory under the test's TempDir, stopped by PID) and real
// flurryd instances, plus a small UDP client that collects every ID it receives. Child
// processes, temporary directories and ports come from tests/support.
// Every wait is bounded; everything started is stopped by PID in destructors.
#pragma once

#include <csignal>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proto/layout.h"
#include "proto/wire.h"
#include "tests/support/child_process.h"
#include "tests/support/wait.h"

namespace flurry::test {

using testing::now_ms;
using testing::sleep_ms;

// An etcd served over TLS (PEM files; empty ca_file: plain http://). Peers stay on http://
// (one member on loopback).
struct EtcdTls {
  std::string ca_file;    // --trusted-ca-file: the CA of client certificates, and of etcd's own
  std::string cert_file;  // etcd's certificate (--cert-file), 127.0.0.1 in its subjectAltName
  std::string key_file;   // --key-file
  bool client_cert_auth = true;
  // What the harness's own readiness check connects with: a client certificate (no Common
  // Name: etcd's JSON gateway refuses one with). It needs no user: with auth enabled, etcd's
  // "user name is empty" is answer enough.
  std::string client_cert;
  std::string client_key;
};

class Etcd {
 public:
  // Data in dir/etcd-data; `tls` for https://, `extra_args` appended to etcd's command line
  // (e.g. --auth-token-ttl).
  explicit Etcd(const std::string& dir, EtcdTls tls = {}, std::vector<std::string> extra_args = {});
  ~Etcd();
  // Starts and waits (bounded) until it answers. On the first start only, a port another
  // process took between free_tcp_port() and etcd's bind (etcd exits with "address already in
  // use") is replaced by a fresh one, up to twice: no flurryd knows the URL yet.
  bool start(std::string* error);
  void stop();  // SIGTERM, bounded wait, SIGKILL
  void pause() { process_.signal(19 /*SIGSTOP*/); }
  void resume() { process_.signal(18 /*SIGCONT*/); }
  std::string url() const;
  // What etcd still has in hand, "" when nothing: a request sent to its client port that it has
  // not read yet (the sender's socket still holds bytes, or etcd's does), a gRPC call started
  // and not finished (its own /metrics: grpc_server_started_total against
  // grpc_server_handled_total, unary calls), a Raft proposal not yet applied
  // (etcd_server_proposals_pending). With the only client stopped (SIGSTOP), "" means every
  // request it sent has been answered or refused: what etcd holds now is final. Plain http://
  // only.
  std::string in_hand() const;

 private:
  bool start_once(std::string* error);

  std::string dir_;
  EtcdTls tls_;
  std::vector<std::string> extra_args_;
  bool started_ = false;  // once: url() is fixed from then on (flurryds were given it)
  std::uint16_t client_port_ = 0;
  std::uint16_t peer_port_ = 0;
  testing::ChildProcess process_;
};

// Reads a key through the gateway (test-side oracle); nullopt when absent, or when etcd gave no
// answer for 10 s (asked again meanwhile).
std::optional<std::string> etcd_get(const std::string& url, const std::string& key);

struct FlurrydOptions {
  std::string etcd_url;
  std::string cluster = "test";
  std::string layout;  // empty: default
  std::uint32_t lease_ttl_s = 10;
  std::uint32_t lead_ms = 3000;
  std::int64_t clock_offset_ms = 0;
  std::uint32_t clock_skew_ms_max = 0;  // 0: default
  std::vector<std::string> extra_args;
  std::vector<std::string> env;
};

class Flurryd {
 public:
  // Starts flurryd ($FLURRYD) with its state in dir/<name>.
  Flurryd(const std::string& dir, const std::string& name, const FlurrydOptions& options);
  bool start();
  // The bound ends only a wait for a node that never serves: a sanitizer build on a loaded
  // machine may take many seconds to start and claim its node id.
  bool wait_serving(std::uint64_t timeout_ms = 60000) {
    return process_.wait_for_log("serving IDs on udp", timeout_ms);
  }
  // SIGKILL, then reaped: it holds its state dir's lock until then, so a test reuses the dir
  // only after this is true. Bounded at 20 s as every exit here, not by how fast a loaded
  // machine reaps it.
  [[nodiscard]] bool kill_and_reap() {
    process_.signal(SIGKILL);
    return process_.wait(20000).has_value();
  }
  testing::ChildProcess& process() { return process_; }
  std::uint16_t port() const { return port_; }
  const std::string& state_dir() const { return state_dir_; }
  std::string control_socket() const { return state_dir_ + "/flurryd.sock"; }

 private:
  std::string binary_;
  std::vector<std::string> args_;
  std::vector<std::string> env_;
  std::string state_dir_;
  std::string log_path_;
  std::uint16_t port_ = 0;
  testing::ChildProcess process_;
};

struct Answer {
  proto::Status status = proto::Status::ok;
  std::uint16_t node = 0;
  std::uint32_t detail = 0;  // e.g. NOT_OWNER: the owner's node id
  std::vector<proto::Range> ranges;
};

class UdpClient {
 public:
  explicit UdpClient(std::uint16_t port);
  ~UdpClient();
  UdpClient(const UdpClient&) = delete;
  UdpClient& operator=(const UdpClient&) = delete;
  // One GET_IDS; nullopt when no answer came within timeout_ms.
  std::optional<Answer> get_ids(std::uint32_t count, std::uint32_t timeout_ms = 200);
  // One GET_SEQ of the named sequence; nullopt when no answer came within timeout_ms.
  std::optional<Answer> get_seq(const std::string& name, std::uint32_t count, std::uint32_t timeout_ms = 200);
  // Sends one GET_SEQ and does not wait (e.g. to a paused server: it waits in the socket).
  bool send_get_seq(const std::string& name, std::uint32_t count);
  // Every answer that arrives within timeout_ms, late ones included.
  std::vector<Answer> receive_all(std::uint32_t timeout_ms);

 private:
  std::optional<Answer> exchange(proto::Request request, std::uint32_t timeout_ms);
  std::uint64_t send_request(proto::Request request);  // the request id; 0: not sent
  std::optional<Answer> receive(std::uint64_t request_id, std::uint64_t deadline_ms);  // 0: any id

  int fd_ = -1;
  std::uint64_t next_request_id_ = 1;
};

// Every range must be disjoint from every other: returns "" or a description of the overlap.
std::string find_overlap(std::vector<proto::Range> ranges);

}  // namespace flurry::test
