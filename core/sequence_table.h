// core/sequence_table.h — named sequences (GET_SEQ): a fixed table shared by the sequence thread
// (flurry-seq), the control loop and the workers (docs/architecture.md; docs/sequences.md).
//
// Contract:
//   * Capacity is fixed at construction (sequences_max names, `workers` workers); nothing is
//     allocated, locked or called into the kernel afterwards. Workers only read the table and
//     write their own per-sequence state; the rest has one writer at a time: the sequence thread
//     (flurry-seq), or the control loop (create/delete) under SequenceManager's mutex.
//   * Never twice: a worker hands out only numbers of blocks flurry-seq published, and
//     flurry-seq publishes only numbers of blocks that are already durable.
//   * `segment` mode: per worker and sequence a single-producer (flurry-seq) single-consumer
//     (worker) queue of `queue_depth` sub-blocks [first, end); the worker issues from its
//     current sub-block and takes the next one when it runs out. Numbers increase per worker.
//     With nothing left: the caller answers RETRY.
//   * `monotonic` mode: the node's workers share one counter, advanced by compare-and-swap
//     below `limit`, which flurry-seq raises only after the block below it is durable.
//     Numbers increase strictly per node. Only the owner node issues.
//   * A serving deadline per sequence (serve_until, Unix ms on the workers' burst clock, the
//     same now_unix_ms the Snowflake path reads once per burst): at or past it the workers
//     issue nothing of that sequence (monotonic: NOT_OWNER with the owner unknown; segment:
//     RETRY). Cluster mode sets it from this node's etcd lease (a monotonic owner whose lease
//     may have expired must not issue: a new owner may be issuing higher numbers already) and
//     the sequence thread (flurry-seq) moves it forward on every renewal; local mode has none.
//   * A slot is named by a generation (nonzero while it holds a sequence). Deleting a sequence
//     and creating another in the same slot gives it a new generation, so no worker ever
//     issues a number of the old one under the new name: stale sub-blocks are discarded.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "proto/wire.h"

namespace flurry::core {

inline constexpr std::size_t sequences_max = 64;
// Numbers stay below 2^63 like IDs (PROTOCOL.md: ranges reaching 2^63 are rejected).
inline constexpr std::uint64_t seq_value_limit = std::uint64_t{1} << 63;

enum class SeqMode : std::uint8_t { segment = 0, monotonic = 1 };
std::string_view to_string(SeqMode mode);
std::optional<SeqMode> parse_seq_mode(std::string_view text);

// Numbers first .. end - 1.
struct SeqBlock {
  std::uint64_t first = 0;
  std::uint64_t end = 0;
  std::uint64_t size() const { return end - first; }
};

// What a GET_SEQ came to. exhausted: nothing issued now and nothing ever will be (the writer,
// flurry-seq, found no number left below seq_value_limit: set_exhausted; flurryd does not call it yet).
enum class SeqAnswer : std::uint8_t { issued, retry, unknown, not_owner, exhausted };

struct SeqIssued {
  SeqAnswer answer = SeqAnswer::unknown;
  std::uint32_t ids = 0;
  std::uint32_t range_count = 0;
  std::uint32_t owner = proto::not_owner_unknown;  // not_owner: the owner's node id
};

class SequenceTable {
 public:
  static constexpr std::uint32_t queue_depth = 2;  // sub-blocks queued ahead per worker
  static constexpr std::uint32_t workers_max = 256;
  static constexpr std::uint64_t no_deadline = ~std::uint64_t{0};

  // Allocates every per-worker slot now (here, so the hot-path file has no allocation).
  explicit SequenceTable(std::uint32_t workers)
      : workers_(workers < 1 ? 1 : (workers > workers_max ? workers_max : workers)),
        worker_slots_(std::make_unique<WorkerSlot[]>(sequences_max * workers_)) {}
  SequenceTable(const SequenceTable&) = delete;
  SequenceTable& operator=(const SequenceTable&) = delete;

  std::uint32_t workers() const { return workers_; }

  // ---- worker side: no allocation, no lock, no system call ----
  // Issues up to `count` numbers of the named sequence into at most out.size() ranges.
  // `now_unix_ms`: the burst's clock (core::Burst::now_unix_ms), checked against serve_until.
  SeqIssued issue(std::uint32_t worker, std::string_view name, std::uint32_t count,
                  std::span<proto::Range> out, std::uint64_t now_unix_ms);

  // ---- writer side (one thread at a time: flurry-seq; create/remove on the control loop) ----
  // Puts a sequence into a free slot with `generation` (nonzero, unique per process); the
  // slot index, or nullopt when the table is full. The name must be valid (proto rule).
  std::optional<std::size_t> create(std::string_view name, SeqMode mode, std::uint64_t generation);
  // The same into slot `slot`; false when it is taken.
  bool create_at(std::size_t slot, std::string_view name, SeqMode mode, std::uint64_t generation);
  // Frees the slot: workers stop finding the name at once.
  void remove(std::size_t slot);
  std::uint64_t generation(std::size_t slot) const;
  // Segment: queues a sub-block for `worker`; false when its queue is full.
  bool push(std::size_t slot, std::uint32_t worker, SeqBlock block);
  // Segment: sub-blocks queued for `worker` and not yet taken.
  std::uint32_t queued(std::size_t slot, std::uint32_t worker) const;
  // Monotonic: makes this node the owner, issuing from `next` (the new owner's start, above
  // everything any owner issued), nothing yet: raise_limit() publishes durable numbers.
  void take_ownership(std::size_t slot, std::uint64_t next);
  // Monotonic: numbers below `limit` are durable and may be issued. Only ever rises.
  void raise_limit(std::size_t slot, std::uint64_t limit);
  // Monotonic: this node stops issuing; requests are told `owner` (or not_owner_unknown).
  void set_not_owner(std::size_t slot, std::uint32_t owner);
  // The sequence can never issue again (its durable bound reached seq_value_limit): once the
  // numbers already queued or below the limit are gone, workers answer exhausted, not retry.
  void set_exhausted(std::size_t slot);
  bool exhausted(std::size_t slot) const;
  // Workers issue nothing of the sequence once their burst clock reaches `unix_ms`
  // (no_deadline: never; the default of a new slot). May move either way.
  void set_serve_until(std::size_t slot, std::uint64_t unix_ms);
  std::uint64_t serve_until(std::size_t slot) const;
  // Monotonic: the next number the workers would issue, and the published limit.
  std::uint64_t monotonic_next(std::size_t slot) const;
  std::uint64_t monotonic_limit(std::size_t slot) const;

 private:
  struct QueueEntry {
    std::atomic<std::uint64_t> first{0};
    std::atomic<std::uint64_t> end{0};
    std::atomic<std::uint64_t> generation{0};
  };
  // One worker's state for one sequence: the queue and the current sub-block.
  struct alignas(64) WorkerSlot {
    std::array<QueueEntry, queue_depth> queue;
    std::atomic<std::uint64_t> tail{0};              // written by flurry-seq
    alignas(64) std::atomic<std::uint64_t> head{0};  // written by the worker
    // Worker-private: the current sub-block and the generation it belongs to.
    std::uint64_t next = 0;
    std::uint64_t end = 0;
    std::uint64_t generation = 0;
  };
  struct alignas(64) Entry {
    std::atomic<std::uint64_t> generation{0};  // 0: free
    std::array<std::atomic<std::uint64_t>, proto::seq_name_size_max / 8> name_words{};
    std::atomic<std::uint8_t> name_size{0};
    std::atomic<std::uint8_t> mode{0};
    std::atomic<std::uint64_t> serve_until_ms{no_deadline};
    std::atomic<bool> exhausted{false};
    // monotonic
    std::atomic<bool> owned{false};
    std::atomic<std::uint32_t> owner{proto::not_owner_unknown};
    alignas(64) std::atomic<std::uint64_t> next{0};
    std::atomic<std::uint64_t> limit{0};
  };

  // The slot holding `name` and its generation, or nullopt.
  std::optional<std::pair<std::size_t, std::uint64_t>> find(std::string_view name) const;
  SeqIssued issue_segment(WorkerSlot& slot, std::uint64_t generation, std::uint32_t count,
                          std::span<proto::Range> out);
  SeqIssued issue_monotonic(Entry& entry, std::uint32_t count, std::span<proto::Range> out,
                            std::uint64_t now_unix_ms);
  static bool past_deadline(const Entry& entry, std::uint64_t now_unix_ms);
  WorkerSlot& worker_slot(std::size_t slot, std::uint32_t worker) const {
    return worker_slots_[slot * workers_ + worker];
  }

  std::uint32_t workers_;
  std::array<Entry, sequences_max> entries_;
  std::unique_ptr<WorkerSlot[]> worker_slots_;  // sequences_max x workers_, allocated at start
};

}  // namespace flurry::core
