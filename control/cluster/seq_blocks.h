// control/cluster/seq_blocks.h — the etcd side of a segment sequence in cluster mode: the key
// /flurry/<cluster>/seq/<name> holds the upper bound of the highest block any node reserved,
// and a node reserves the next block with ONE compare-and-put transaction on that key's
// mod_revision (docs/architecture.md; docs/sequences.md).
//
// Contract:
//   * Never twice: reserve() returns a block only when its put is KNOWN to have applied (the
//     transaction answered succeeded). Two nodes can never both advance the key from the same
//     mod_revision, so the blocks handed out are disjoint, whatever the network does.
//   * An answer that never came (unavailable) leaves the outcome unknown: the block is kept as
//     pending and the next reserve() first reads the key; the put applied only if the value
//     still carries this reservation's tag (instance id + counter). Otherwise the block is
//     dropped: at worst its numbers are skipped, never issued.
//   * Bounded: at most compare_attempts_max compare failures (other nodes advancing) per call.
//   * The value is "<upper> <tag>" in decimal ASCII; a value that does not parse is an error.
//   * Incarnation: the key's create_revision. reserve() with an incarnation reads the key and
//     fails not_found when it is another (deleted and created again); its compare-and-put is
//     on the mod_revision read, so it can only apply to that same incarnation.
//   * remove() deletes the key (one transaction on the mod_revision read) and, in the same
//     transaction, puts the floor <key>/floor = "<upper>" (no lease: kept for good, also once
//     the name is created again) and the tombstone <key>/deleted = "<upper>" under a lease of
//     its own (tombstone_ttl_s, renewed once more when the delete took long). create() refuses
//     a start below the floor however long ago the delete was (never twice across a delete; a
//     tombstone of an older flurryd, which kept no floor, counts as one while it lives), and a
//     monotonic sequence at any start while the tombstone lives (its numbers stay strictly
//     increasing across the delete: no node may still serve an old one when the new one
//     begins). Its transaction compares both keys' mod_revision with what it read.
//     list() reads every sequence key under /flurry/<cluster>/seq/ (a key with a '/' after the
//     name is its /mode, /owner, /deleted or /floor), at most list_max.
//   * Exhausted: reserve() fails `refused` once the key's upper is 2^63 (nothing can ever be
//     reserved again); the last block is shortened to end there.
//   * Monotonic: <key>/owner names the one node that reserves blocks, bound to that node's
//     lease (its node id's): claim_owner() puts it only if absent, so one owner at a time.
//   * flurryd's SequenceManager uses it in cluster mode (control/shared_sequences.h); one
//     SeqBlocks is used by one thread at a time (its KvStore's rule).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "control/cluster/kv.h"
#include "control/shared_sequences.h"
#include "core/sequence_table.h"

namespace flurry::control::cluster {

class SeqBlocks final : public SharedSequences {
 public:
  static constexpr int compare_attempts_max = 8;
  // serve_unconfirmed_max and 5 s more: a delete that took longer than 4 s (lease grant to
  // answer) puts the tombstone again under a fresh lease.
  static constexpr std::int64_t tombstone_ttl_s =
      std::chrono::duration_cast<std::chrono::seconds>(serve_unconfirmed_max).count() + 5;

  // `kv` must outlive this. `instance` names this process (unique per start).
  SeqBlocks(KvStore& kv, std::string cluster, std::string instance)
      : kv_(kv), cluster_(std::move(cluster)), instance_(std::move(instance)) {}

  std::string prefix() const { return "/flurry/" + cluster_ + "/seq/"; }
  std::string key(const std::string& name) const { return prefix() + name; }

  // Creates the sequence at `start` if no node did. Errors: refused (it exists, or it was
  // deleted and `start` is below its floor: the message says how far to go; monotonic, deleted
  // lately), unavailable. Monotonic: also <key>/mode = "monotonic" (no such key: segment), in the same
  // transaction.
  Status create(const std::string& name, std::uint64_t start, core::SeqMode mode) override;
  // <key>/owner = "<node id> <instance>" under the lease, if absent and the sequence is still
  // `incarnation` (0: any).
  Result<bool> claim_owner(const std::string& name, std::int64_t incarnation, std::uint32_t node_id,
                           std::int64_t lease_id) override;
  const std::string& tag() const override { return instance_; }
  // Deletes the sequence's keys (with /mode and /owner) and leaves its tombstone. Errors:
  // not_found (no such sequence), unavailable.
  Status remove(const std::string& name) override;
  // The sequences in etcd, in key order: at most list_max (the caller says when it got that
  // many; a sequence left off is not served, which is safe, never wrong).
  Result<std::vector<Listed>> list() override;
  // One block of `step` numbers above everything any node reserved (fewer at 2^63). Errors:
  // unavailable (maybe applied: resolved by the next call), not_found (no such sequence, or
  // not of `incarnation`), refused (exhausted: at 2^63), failed.
  Result<core::SeqBlock> reserve(const std::string& name, std::int64_t incarnation,
                                 std::uint64_t step) override;

 private:
  struct Pending {
    std::string name;
    std::string tag;
    core::SeqBlock block;
  };
  struct Current {
    std::uint64_t upper = 0;
    std::string tag;
    std::int64_t mod_revision = 0;
    std::int64_t create_revision = 0;  // the incarnation
  };
  Result<Current> read(const std::string& name);
  // The tombstone's and the floor's value and mod_revision (0 when absent).
  struct Marks {
    std::uint64_t deleted_upper = 0;
    std::int64_t deleted_revision = 0;
    std::uint64_t floor = 0;
    std::int64_t floor_revision = 0;
  };
  Result<Marks> read_marks(const std::string& name);
  Status put_tombstone(const std::string& name, std::uint64_t upper);
  static void add_detail(const std::string& what, const KeyValue& kv, Listed* listed);
  std::optional<core::SeqBlock> resolve_pending(const std::string& name, const Current& current);

  KvStore& kv_;
  std::string cluster_;
  std::string instance_;
  std::uint64_t reservations_ = 0;
  std::optional<Pending> pending_;
};

}  // namespace flurry::control::cluster
