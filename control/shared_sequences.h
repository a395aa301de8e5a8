// control/shared_sequences.h — where named sequences live in cluster mode: a store every node
// of the cluster shares (etcd: control/cluster/seq_blocks.h), behind the few calls the
// SequenceManager needs, so the manager (and its simulation) need not link the etcd client.
//
// Contract (each implementation's own header says how it keeps it):
//   * reserve() returns a block only when the store has granted it to this node alone: no
//     other node (and no later call) can be granted any of its numbers.
//   * Errors carry StatusCode::unavailable (no answer: retry later, nothing was granted that
//     could be issued), not_found (no such sequence), refused (create: it exists) or failed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/sequence_table.h"
#include "core/status.h"

namespace flurry::control {

class SharedSequences {
 public:
  // A sequence as the store lists it. `incarnation` changes when a name is deleted and
  // created again (etcd: the key's create_revision).
  struct Listed {
    std::string name;
    std::int64_t incarnation = 0;
  };
  // list() names at most this many sequences (the table's capacity, with room to say more).
  static constexpr std::size_t list_max = core::sequences_max * 2;

  virtual ~SharedSequences() = default;
  virtual Status create(const std::string& name, std::uint64_t start) = 0;
  virtual Status remove(const std::string& name) = 0;
  virtual Result<core::SeqBlock> reserve(const std::string& name, std::uint64_t step) = 0;
  virtual Result<std::vector<Listed>> list() = 0;
};

}  // namespace flurry::control
