// control/cluster/etcd_client.h — KvStore over etcd v3's JSON gateway (/v3/kv/txn,
// /v3/lease/grant|keepalive|revoke), with libcurl over HTTP/1.1 keep-alive.
//
// Contract:
//   * every call is bounded: at most `request_timeout_ms` per endpoint tried, and each
//     endpoint is tried at most once per call, so one call takes at most
//     endpoints × request_timeout_ms;
//   * failover: a call starts at the endpoint that answered last; on a transport failure or
//     an "unavailable" answer (no leader, 503) it moves on to the next endpoint;
//   * keys and values travel base64-encoded, int64 fields as JSON strings (gateway rules);
//   * one EtcdClient is used by one thread at a time (curl easy handles are not shared);
//     give each thread its own client.
// Used by flurryd's control threads, never by a worker, each client by one thread at a time: the
// membership client by the main thread (claim at start, release at stop) and flurry-renew (renew,
// re-claim); the SeqBlocks client by flurry-seq and the control loop (under SequenceManager's
// mutex); the lease keeper's own client by the lease keeper.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/cluster/kv.h"

namespace flurry::control::cluster {

struct EtcdConfig {
  std::vector<std::string> endpoints;  // "http://127.0.0.1:2379", no trailing slash
  std::uint32_t request_timeout_ms = 1000;
  std::uint32_t connect_timeout_ms = 300;
};

// Splits "URL[,URL...]" and checks each is http://host:port; fails on a malformed list.
Result<std::vector<std::string>> parse_endpoints(std::string_view list);

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

  struct Impl;

 private:
  explicit EtcdClient(const EtcdConfig& config);
  std::unique_ptr<Impl> impl_;
  std::uint64_t failovers_ = 0;
};

}  // namespace flurry::control::cluster
