// control/cluster/seq_blocks.cc — see seq_blocks.h.
#include "control/cluster/seq_blocks.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <string_view>

namespace flurry::control::cluster {
namespace {

std::string value_of(std::uint64_t upper, const std::string& tag) {
  return std::to_string(upper) + " " + tag;
}

std::optional<std::uint64_t> parse_upper(std::string_view text) {
  std::uint64_t upper = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), upper);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return upper;
}

}  // namespace

Status SeqBlocks::create(const std::string& name, std::uint64_t start, core::SeqMode mode) {
  for (int attempt = 0; attempt < compare_attempts_max; ++attempt) {
    Result<Marks> marks = read_marks(name);
    if (!marks.ok()) return marks.status();
    const std::uint64_t deleted_upper = marks->deleted_upper;
    const std::int64_t tombstone_revision = marks->deleted_revision;
    // Never twice across a delete: below the floor numbers of the name may have been issued.
    // (A tombstone left by an older flurryd, which kept no floor, counts as one while it lives.)
    const std::uint64_t floor = std::max(marks->floor, deleted_upper);
    if (start < floor) {
      return Error{"sequence '" + name + "' was deleted, and numbers of it below " + std::to_string(floor) +
                       " may have been issued (its floor, kept in etcd): create it again with --start " +
                       std::to_string(floor) +
                       " or more; a lower start would issue numbers twice and is never accepted",
                   StatusCode::refused};
    }
    // Monotonic: strictly increasing across the cluster, a deleted incarnation's numbers
    // included: nothing of the new one until no node can still serve an old number.
    if (tombstone_revision != 0 && mode == core::SeqMode::monotonic) {
      return Error{"sequence '" + name + "' was deleted less than " + std::to_string(tombstone_ttl_s) +
                       " s ago, and a node may still serve numbers of it: a monotonic sequence of that "
                       "name can be created again once that time has passed",
                   StatusCode::refused};
    }
    Txn txn;
    txn.compares.push_back({key(name), Compare::Target::create_revision, 0, {}});
    txn.compares.push_back({key(name) + "/deleted", Compare::Target::mod_revision, tombstone_revision, {}});
    txn.compares.push_back({key(name) + "/floor", Compare::Target::mod_revision, marks->floor_revision, {}});
    txn.success.push_back(Op::put(key(name), value_of(start, instance_ + "#create")));
    if (mode == core::SeqMode::monotonic) txn.success.push_back(Op::put(key(name) + "/mode", "monotonic"));
    txn.failure.push_back(Op::get(key(name)));
    Result<TxnResult> done = kv_.txn(txn);
    if (!done.ok()) return done.status();
    if (done->succeeded) return {};
    if (!done->results.empty() && !done->results[0].empty()) {
      return Error{"sequence '" + name + "' exists already in etcd (flurryctl seq show " + name + ")",
                   StatusCode::refused};
    }
    // The tombstone or the floor changed (expired, another delete) between the read and the
    // put: again.
  }
  return Error{"sequence '" + name + "': its tombstone kept changing; try again", StatusCode::unavailable};
}

// <key>/deleted and <key>/floor in one read.
Result<SeqBlocks::Marks> SeqBlocks::read_marks(const std::string& name) {
  Txn txn;
  txn.success.push_back(Op::get(key(name) + "/deleted"));
  txn.success.push_back(Op::get(key(name) + "/floor"));
  Result<TxnResult> done = kv_.txn(txn);
  if (!done.ok()) return done.status();
  Marks marks;
  for (std::size_t i = 0; i < 2 && i < done->results.size(); ++i) {
    if (done->results[i].empty()) continue;
    const KeyValue& kv = done->results[i][0];
    const auto upper = parse_upper(kv.value);
    if (!upper) return Error{"etcd key " + kv.key + " holds '" + kv.value.substr(0, 64) + "', not '<upper>'"};
    (i == 0 ? marks.deleted_upper : marks.floor) = *upper;
    (i == 0 ? marks.deleted_revision : marks.floor_revision) = kv.mod_revision;
  }
  return marks;
}

// The delete and the tombstone in one transaction on the mod_revision read, so the tombstone
// holds the bound of exactly what was deleted (a reservation that applied in between makes
// the compare fail: read again).
Status SeqBlocks::remove(const std::string& name) {
  for (int attempt = 0; attempt < compare_attempts_max; ++attempt) {
    Result<Current> current = read(name);
    if (!current.ok()) return current.status();
    Result<Marks> marks = read_marks(name);
    if (!marks.ok()) return marks.status();
    // The floor only rises (a create below it is refused, so upper >= floor already).
    const std::uint64_t floor = std::max(current->upper, marks->floor);
    const auto began = std::chrono::steady_clock::now();
    Result<LeaseGrant> lease = kv_.lease_grant(tombstone_ttl_s);
    if (!lease.ok()) return lease.status();
    Txn txn;
    txn.compares.push_back({key(name), Compare::Target::mod_revision, current->mod_revision, {}});
    txn.success.push_back(Op::del(key(name)));
    txn.success.push_back(Op::del(key(name) + "/mode"));
    txn.success.push_back(Op::del(key(name) + "/owner"));
    txn.success.push_back(Op::put(key(name) + "/deleted", std::to_string(current->upper), lease->lease_id));
    txn.success.push_back(Op::put(key(name) + "/floor", std::to_string(floor)));  // no lease: kept
    Result<TxnResult> done = kv_.txn(txn);
    if (!done.ok()) return done.status();
    if (!done->succeeded) {
      (void)kv_.lease_revoke(lease->lease_id);  // unused; it would expire anyway
      continue;
    }
    // The tombstone's TTL runs from the grant, the nodes' serving deadlines from before the
    // delete: a slow delete leaves less than serve_unconfirmed_max of it, so put it again.
    if (std::chrono::steady_clock::now() - began >
        std::chrono::seconds(tombstone_ttl_s) - serve_unconfirmed_max - std::chrono::seconds(1)) {
      if (Status again = put_tombstone(name, current->upper); !again.ok()) return again;
    }
    return {};
  }
  return Error{"sequence '" + name + "': " + std::to_string(compare_attempts_max) +
                   " deletes in a row lost to block reservations; try again",
               StatusCode::unavailable};
}

// The tombstone again under a fresh lease, unless the name was created again meanwhile.
Status SeqBlocks::put_tombstone(const std::string& name, std::uint64_t upper) {
  Result<LeaseGrant> lease = kv_.lease_grant(tombstone_ttl_s);
  if (!lease.ok()) return lease.status();
  Txn txn;
  txn.compares.push_back({key(name), Compare::Target::create_revision, 0, {}});
  txn.success.push_back(Op::put(key(name) + "/deleted", std::to_string(upper), lease->lease_id));
  Result<TxnResult> done = kv_.txn(txn);
  return done.ok() ? Status{} : done.status();
}

Result<std::vector<SharedSequences::Listed>> SeqBlocks::list() {
  Txn txn;
  txn.success.push_back(Op::get_prefix(prefix()));
  Result<TxnResult> done = kv_.txn(txn);
  if (!done.ok()) return done.status();
  std::vector<Listed> out;
  if (done->results.empty()) return out;
  // Key order puts a sequence before its /mode and /owner, but not always right before: "a/mode"
  // sorts after "a-b" and "a.b" ('/' is above '-' and '.'), so the entry is looked up by name.
  for (const KeyValue& kv : done->results[0]) {
    const std::string name = kv.key.substr(prefix().size());
    const std::size_t slash = name.find('/');
    if (slash != std::string::npos) {
      const std::string base = name.substr(0, slash);
      const auto entry =
          std::find_if(out.rbegin(), out.rend(), [&](const Listed& listed) { return listed.name == base; });
      if (entry != out.rend()) add_detail(name.substr(slash + 1), kv, &*entry);
      continue;
    }
    if (name.empty()) continue;
    if (out.size() == list_max) break;  // the rest is not served (dropped if served): never unsafe
    out.push_back({name, kv.create_revision, core::SeqMode::segment, std::nullopt, {}, 0});
  }
  return out;
}

// <name>/mode and <name>/owner ("<node id> <tag>") into the sequence's entry.
void SeqBlocks::add_detail(const std::string& what, const KeyValue& kv, Listed* listed) {
  if (what == "mode") {
    listed->mode = kv.value == "monotonic" ? core::SeqMode::monotonic : core::SeqMode::segment;
    return;
  }
  if (what != "owner") return;
  const std::size_t space = kv.value.find(' ');
  std::uint32_t node = 0;
  const auto [end, error] =
      std::from_chars(kv.value.data(), kv.value.data() + std::min(space, kv.value.size()), node);
  if (error != std::errc() || space == std::string::npos) return;  // not understood: no owner known
  listed->owner_node = node;
  listed->owner_tag = kv.value.substr(space + 1);
  listed->owner_lease = kv.lease;
}

Result<bool> SeqBlocks::claim_owner(const std::string& name, std::int64_t incarnation, std::uint32_t node_id,
                                    std::int64_t lease_id) {
  const std::string owner = key(name) + "/owner";
  Txn txn;
  txn.compares.push_back({owner, Compare::Target::create_revision, 0, {}});
  if (incarnation != 0)
    txn.compares.push_back({key(name), Compare::Target::create_revision, incarnation, {}});
  txn.success.push_back(Op::put(owner, std::to_string(node_id) + " " + instance_, lease_id));
  txn.failure.push_back(Op::get(owner));
  Result<TxnResult> done = kv_.txn(txn);
  if (!done.ok()) return done.status();
  if (done->succeeded) return true;
  return !done->results.empty() && !done->results[0].empty() &&
         done->results[0][0].value == std::to_string(node_id) + " " + instance_;
}

Result<SeqBlocks::Current> SeqBlocks::read(const std::string& name) {
  Txn txn;
  txn.success.push_back(Op::get(key(name)));
  Result<TxnResult> done = kv_.txn(txn);
  if (!done.ok()) return done.status();
  if (done->results.empty() || done->results[0].empty()) {
    return Error{"no sequence '" + name + "' in etcd", StatusCode::not_found};
  }
  const KeyValue& kv = done->results[0][0];
  Current current;
  const std::size_t space = kv.value.find(' ');
  const char* end = kv.value.data() + (space == std::string::npos ? kv.value.size() : space);
  const auto [parsed, error] = std::from_chars(kv.value.data(), end, current.upper);
  if (error != std::errc() || parsed != end || space == std::string::npos) {
    return Error{"etcd key " + key(name) + " holds '" + kv.value.substr(0, 64) + "', not '<upper> <tag>'"};
  }
  current.tag = kv.value.substr(space + 1);
  current.mod_revision = kv.mod_revision;
  current.create_revision = kv.create_revision;
  return current;
}

// An earlier put whose answer was lost applied only if the key still carries its tag.
std::optional<core::SeqBlock> SeqBlocks::resolve_pending(const std::string& name, const Current& current) {
  if (!pending_ || pending_->name != name) return std::nullopt;
  const Pending pending = *pending_;
  pending_.reset();
  if (current.tag == pending.tag && current.upper == pending.block.end) return pending.block;
  return std::nullopt;  // not applied, or superseded: its numbers are skipped, never issued
}

Result<core::SeqBlock> SeqBlocks::reserve(const std::string& name, std::int64_t incarnation,
                                          std::uint64_t step) {
  for (int attempt = 0; attempt < compare_attempts_max; ++attempt) {
    Result<Current> current = read(name);
    if (!current.ok()) return current.status();
    if (incarnation != 0 && current->create_revision != incarnation) {
      if (pending_ && pending_->name == name) pending_.reset();  // it was the old incarnation's
      return Error{"sequence '" + name + "' was deleted and created again in etcd", StatusCode::not_found};
    }
    if (auto resolved = resolve_pending(name, *current)) return *resolved;
    if (current->upper >= core::seq_value_limit) {
      return Error{"sequence '" + name + "' is exhausted: its numbers have reached 2^63 - 1",
                   StatusCode::refused};
    }
    // The last block may be shorter: it ends at 2^63.
    const core::SeqBlock block{current->upper,
                               current->upper + std::min(step, core::seq_value_limit - current->upper)};
    const std::string tag = instance_ + "#" + std::to_string(++reservations_);
    Txn txn;
    txn.compares.push_back({key(name), Compare::Target::mod_revision, current->mod_revision, {}});
    txn.success.push_back(Op::put(key(name), value_of(block.end, tag)));
    Result<TxnResult> done = kv_.txn(txn);
    if (!done.ok()) {
      if (done.code() == StatusCode::unavailable) pending_ = Pending{name, tag, block};
      return done.status();
    }
    if (done->succeeded) return block;
    // Another node advanced the key first: read again.
  }
  return Error{"sequence '" + name + "': " + std::to_string(compare_attempts_max) +
                   " reservations in a row lost to other nodes; try again",
               StatusCode::unavailable};
}

}  // namespace flurry::control::cluster
