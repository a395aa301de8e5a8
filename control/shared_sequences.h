// control/shared_sequences.h — where named sequences live in cluster mode: a store every node
// of the cluster shares (etcd: control/cluster/seq_blocks.h), behind the few calls the
// SequenceManager needs, so the manager (and its simulation) need not link the etcd client.
//
// Contract (each implementation's own header says how it keeps it):
//   * reserve() returns a block only when the store has granted it to this node alone: no
//     other node (and no later call) can be granted any of its numbers.
//   * Errors carry StatusCode::unavailable (no answer: retry later, nothing was granted that
//     could be issued), not_found (no such sequence), refused (create: it exists, or below a
//     deleted name's floor; reserve: exhausted, no number left below 2^63) or failed.
//   * Monotonic sequences have one owner at a time, named in the store under a lease: only
//     it reserves blocks; a new owner's first block lies above every block reserved before.
//   * Incarnations: a name deleted and created again is a new incarnation (Listed::incarnation).
//     reserve() and claim_owner() name the incarnation the caller serves and fail (not_found /
//     false) for any other, so a block of one incarnation is never served under another.
//   * Never twice across a delete: the store keeps a deleted name's bound (its floor) for
//     good and refuses to create the name again below it; at or above it is allowed at once
//     (it cannot meet an old block), except for a monotonic sequence while the delete is
//     recent (an old owner's late numbers would come after the new ones).
//   * Delete, then create again: a node cut off from the store (or paused) may still hold
//     blocks of the deleted incarnation. It serves them at most serve_unconfirmed_max after
//     the store last confirmed that incarnation (a listing or a reservation, counted from when
//     it was sent; the SequenceManager publishes it as the table's serving deadline). The
//     store keeps a recent-delete mark (a tombstone) longer than that after the delete.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/sequence_table.h"

namespace flurry::control {

class SharedSequences {
 public:
  // A sequence as the store lists it. `incarnation` changes when a name is deleted and
  // created again (etcd: the key's create_revision).
  struct Listed {
    std::string name;
    std::int64_t incarnation = 0;
    core::SeqMode mode = core::SeqMode::segment;
    // monotonic: the owner's node id and tag while a node owns it (its lease alive).
    std::optional<std::uint32_t> owner_node;
    std::string owner_tag;
    std::int64_t owner_lease = 0;
  };
  // list() names at most this many sequences (the table's capacity, with room to say more).
  static constexpr std::size_t list_max = core::sequences_max * 2;
  // How long a node serves held blocks of a sequence the store has not confirmed since.
  static constexpr std::chrono::milliseconds serve_unconfirmed_max{10'000};

  virtual ~SharedSequences() = default;
  virtual Status create(const std::string& name, std::uint64_t start, core::SeqMode mode) = 0;
  virtual Status remove(const std::string& name) = 0;
  // `incarnation` 0: whichever incarnation the name has now.
  virtual Result<core::SeqBlock> reserve(const std::string& name, std::int64_t incarnation,
                                         std::uint64_t step) = 0;
  virtual Result<std::vector<Listed>> list() = 0;
  // Monotonic: makes this node the owner of `name` under `lease_id` (gone with the lease) if
  // no node owns it; true when this node owns it now. tag() names this node in owner_tag.
  virtual Result<bool> claim_owner(const std::string& name, std::int64_t incarnation, std::uint32_t node_id,
                                   std::int64_t lease_id) = 0;
  virtual const std::string& tag() const = 0;
};

}  // namespace flurry::control
