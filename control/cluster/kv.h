// control/cluster/kv.h — the few key-value operations the lease protocol needs.
//
// A small model of etcd v3's KV and lease API: single-key compares (EQUAL only), puts, gets
// and prefix gets inside one transaction, and lease grant / keep-alive / revoke. It is
// implemented by EtcdClient (the real store, over the JSON gateway) and by MemoryStore (an
// in-memory linearizable store for the simulation), so Membership's protocol logic runs
// unchanged against both.
//
// Error taxonomy (KvStatus):
//   ok          — the store answered; a transaction's compare outcome is in `succeeded`.
//   unavailable — no answer (connect refused, timeout, no leader, every endpoint down). For a
//                 write the outcome is UNKNOWN: it may or may not have been applied. Callers
//                 must stay safe either way.
//   not_found   — the store answered that the lease does not exist (expired or revoked).
//   failed      — the store answered with another error, or an answer we cannot parse.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace flurry::control::cluster {

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;  // 0: not bound to a lease
};

// One compare of a transaction; always "target EQUAL operand".
struct Compare {
  enum class Target : std::uint8_t { create_revision, mod_revision, value, lease };
  std::string key;
  Target target = Target::create_revision;
  std::int64_t number = 0;  // create_revision, mod_revision, lease
  std::string value;        // value
};

struct Op {
  enum class Kind : std::uint8_t { put, get, get_prefix, del };
  Kind kind = Kind::get;
  std::string key;         // for get_prefix: the prefix; del: one key
  std::string value;       // put
  std::int64_t lease = 0;  // put: 0 = no lease

  static Op put(std::string key, std::string value, std::int64_t lease = 0) {
    return Op{Kind::put, std::move(key), std::move(value), lease};
  }
  static Op get(std::string key) { return Op{Kind::get, std::move(key), {}, 0}; }
  static Op get_prefix(std::string prefix) { return Op{Kind::get_prefix, std::move(prefix), {}, 0}; }
  static Op del(std::string key) { return Op{Kind::del, std::move(key), {}, 0}; }
};

struct Txn {
  std::vector<Compare> compares;  // all must hold for `success` to run
  std::vector<Op> success;
  std::vector<Op> failure;
};

struct TxnResult {
  bool succeeded = false;
  std::int64_t revision = 0;  // store revision after the transaction
  // One entry per executed op, in order; puts and deletes leave theirs empty.
  std::vector<std::vector<KeyValue>> results;
};

struct LeaseGrant {
  std::int64_t lease_id = 0;
  std::int64_t ttl_s = 0;  // as granted
};

// Failures carry StatusCode::unavailable (no endpoint answered: retry later), not_found (a
// lease that no longer exists, a NotFound answer) or failed (an answer that says no, or one
// not understood), and one sentence.
class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual Result<TxnResult> txn(const Txn& txn) = 0;
  virtual Result<LeaseGrant> lease_grant(std::int64_t ttl_s) = 0;
  // The remaining TTL after the refresh, in seconds.
  virtual Result<std::int64_t> lease_keepalive(std::int64_t lease_id) = 0;
  virtual Status lease_revoke(std::int64_t lease_id) = 0;
  // Where requests go now (an endpoint URL, or a name for a fake).
  virtual std::string endpoint() const = 0;
};

}  // namespace flurry::control::cluster
