// core/shared.h — the state shared between the control threads (control loop, flurry-renew, flurry-seq)
// and the workers (and front ends), owned by the Node (control/node/node.h, whose thread table says
// which thread writes what here): the issue ceiling, the assignment it belongs to, the stop flag and
// one stats block per core slice (workers, then front ends). Every backend and the watermark scheduler
// see it; none of them owns it. Workers read the ceiling and assignment once per burst
// (core::load_burst_ceiling) and write only their own WorkerStats.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "core/assignment.h"
#include "core/ceiling.h"
#include "core/handler.h"
#include "core/keys.h"
#include "core/sequence_table.h"
#include "core/source_limit.h"

namespace flurry::core {

struct Shared {
  Ceiling ceiling;
  Assignment assignment;
  std::atomic<bool> stop{false};
  std::unique_ptr<WorkerStats[]> stats;  // one per core slice (workers, then front ends)
  std::uint32_t workers = 0;
  // The authentication keys (null until a key file is loaded); workers quiesce between bursts.
  KeyTableSlot keys;
  // Named sequences: one slot per core slice, filled by the sequence thread (flurry-seq); sequences
  // are created and deleted on the control loop (under SequenceManager's mutex).
  SequenceTable sequences;
  // The per-source bound of unsigned requests (--source-share): set by the node before any
  // slice is built, read by each slice when it is built (its own table); off by default.
  SourceLimitConfig source_limit;

  explicit Shared(std::uint32_t worker_count)
      : stats(new WorkerStats[worker_count]),
        workers(worker_count),
        keys(worker_count),
        sequences(worker_count) {}
  std::span<WorkerStats> worker_stats() { return {stats.get(), workers}; }
  std::span<const WorkerStats> worker_stats() const { return {stats.get(), workers}; }
};

}  // namespace flurry::core
