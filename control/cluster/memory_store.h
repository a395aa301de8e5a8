// control/cluster/memory_store.h — an in-memory, linearizable KvStore with etcd's semantics
// for the operations flurry uses, for the lease-protocol simulation and unit tests.
//
// Semantics copied from etcd v3: a compare on a missing key sees a zero KeyValue (so
// create_revision == 0 holds) except a value compare, which fails; a put under a lease that
// does not exist fails the whole transaction (not_found) and applies nothing; leases expire
// by the injected clock's monotonic time and take their keys with them; every write bumps
// one store-wide revision. Single-threaded: the simulation calls it from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/clock.h"
#include "control/cluster/kv.h"

namespace flurry::control::cluster {

class MemoryStore final : public KvStore {
 public:
  explicit MemoryStore(const Clock& clock) : clock_(clock) {}

  Result<TxnResult> txn(const Txn& txn) override;
  Result<LeaseGrant> lease_grant(std::int64_t ttl_s) override;
  Result<std::int64_t> lease_keepalive(std::int64_t lease_id) override;
  Status lease_revoke(std::int64_t lease_id) override;
  std::string endpoint() const override { return "memory"; }

  // Oracle access for checks (expires leases first, like any read).
  std::optional<KeyValue> get(const std::string& key);
  // false: every call answers unavailable and applies nothing (etcd down).
  void set_available(bool available) { available_ = available; }
  std::int64_t revision() const { return revision_; }

 private:
  struct Lease {
    std::int64_t ttl_s = 0;
    std::uint64_t expires_ns = 0;
  };
  void expire();
  void apply_get(const Op& op, std::vector<KeyValue>* out) const;

  const Clock& clock_;
  bool available_ = true;
  std::map<std::string, KeyValue> kvs_;
  std::map<std::int64_t, Lease> leases_;
  std::int64_t revision_ = 1;
  std::int64_t next_lease_id_ = 0x1000;
};

}  // namespace flurry::control::cluster
