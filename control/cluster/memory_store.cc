// control/cluster/memory_store.cc — see memory_store.h.
#include "control/cluster/memory_store.h"

namespace flurry::control::cluster {
namespace {

Error unavailable() { return Error{"memory store unavailable", StatusCode::unavailable}; }
Error lease_not_found() { return Error{"etcdserver: requested lease not found", StatusCode::not_found}; }

bool compare_holds(const Compare& c, const KeyValue* kv) {
  const KeyValue zero;
  if (kv == nullptr) {
    if (c.target == Compare::Target::value) return false;  // etcd: a missing value never equals
    kv = &zero;
  }
  switch (c.target) {
    case Compare::Target::create_revision:
      return kv->create_revision == c.number;
    case Compare::Target::mod_revision:
      return kv->mod_revision == c.number;
    case Compare::Target::value:
      return kv->value == c.value;
    case Compare::Target::lease:
      return kv->lease == c.number;
  }
  return false;
}

}  // namespace

void MemoryStore::expire() {
  const std::uint64_t now = clock_.mono_ns();
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.expires_ns > now) {
      ++it;
      continue;
    }
    bool deleted = false;
    for (auto kv = kvs_.begin(); kv != kvs_.end();) {
      if (kv->second.lease == it->first) {
        kv = kvs_.erase(kv);
        deleted = true;
      } else {
        ++kv;
      }
    }
    if (deleted) ++revision_;
    it = leases_.erase(it);
  }
}

void MemoryStore::apply_get(const Op& op, std::vector<KeyValue>* out) const {
  if (op.kind == Op::Kind::get) {
    if (const auto it = kvs_.find(op.key); it != kvs_.end()) out->push_back(it->second);
    return;
  }
  for (auto it = kvs_.lower_bound(op.key);
       it != kvs_.end() && it->first.compare(0, op.key.size(), op.key) == 0; ++it) {
    out->push_back(it->second);
  }
}

Result<TxnResult> MemoryStore::txn(const Txn& txn) {
  if (!available_) return unavailable();
  expire();
  bool holds = true;
  for (const Compare& c : txn.compares) {
    const auto it = kvs_.find(c.key);
    holds = holds && compare_holds(c, it == kvs_.end() ? nullptr : &it->second);
  }
  const std::vector<Op>& ops = holds ? txn.success : txn.failure;
  for (const Op& op : ops) {
    if (op.kind == Op::Kind::put && op.lease != 0 && leases_.count(op.lease) == 0) return lease_not_found();
  }
  TxnResult result;
  result.succeeded = holds;
  result.results.resize(ops.size());
  bool wrote = false;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.kind == Op::Kind::get || op.kind == Op::Kind::get_prefix) {
      apply_get(op, &result.results[i]);
      continue;
    }
    if (op.kind == Op::Kind::del && kvs_.count(op.key) == 0) continue;  // etcd: no revision
    if (!wrote) ++revision_;  // one revision per transaction, like etcd
    wrote = true;
    if (op.kind == Op::Kind::del) {
      kvs_.erase(op.key);
      continue;
    }
    KeyValue& kv = kvs_[op.key];
    if (kv.create_revision == 0) {
      kv.key = op.key;
      kv.create_revision = revision_;
    }
    kv.mod_revision = revision_;
    kv.value = op.value;
    kv.lease = op.lease;
  }
  result.revision = revision_;
  return result;
}

Result<LeaseGrant> MemoryStore::lease_grant(std::int64_t ttl_s) {
  if (!available_) return unavailable();
  expire();
  const std::int64_t id = next_lease_id_++;
  leases_[id] = Lease{ttl_s, clock_.mono_ns() + static_cast<std::uint64_t>(ttl_s) * 1'000'000'000ULL};
  return LeaseGrant{id, ttl_s};
}

Result<std::int64_t> MemoryStore::lease_keepalive(std::int64_t lease_id) {
  if (!available_) return unavailable();
  expire();
  const auto it = leases_.find(lease_id);
  if (it == leases_.end()) return Error{"lease expired", StatusCode::not_found};
  it->second.expires_ns = clock_.mono_ns() + static_cast<std::uint64_t>(it->second.ttl_s) * 1'000'000'000ULL;
  return it->second.ttl_s;
}

Status MemoryStore::lease_revoke(std::int64_t lease_id) {
  if (!available_) return unavailable();
  expire();
  if (leases_.count(lease_id) == 0) return lease_not_found();
  leases_[lease_id].expires_ns = 0;
  expire();
  return {};
}

std::optional<KeyValue> MemoryStore::get(const std::string& key) {
  expire();
  const auto it = kvs_.find(key);
  if (it == kvs_.end()) return std::nullopt;
  return it->second;
}

}  // namespace flurry::control::cluster
