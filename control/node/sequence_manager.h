// control/node/sequence_manager.h — named sequences on flurry-seq and the control loop: create / delete /
// list / show, and the refill step that keeps every worker's sub-block queue full
// (docs/sequences.md, docs/architecture.md). Local mode keeps the durable bounds in the local sequence
// store; cluster mode (a SharedSequences, i.e. etcd) keeps them where every node shares them.
//
// Contract:
//   * Never twice: a block [upper, upper + step) is reserved by making `upper + step` durable
//     in the sequence store BEFORE any number of it is handed to a worker (segment) or
//     published as the limit (monotonic). After a restart every sequence starts at its
//     durable upper bound, so at most the unissued rest of the last reserved block (and the
//     sub-blocks queued from the one before) is skipped, never reissued.
//   * Refill ahead of need: step() tops every worker's queue up to SequenceTable::queue_depth
//     sub-blocks, so a worker only waits (RETRY) when it drains two sub-blocks between steps.
//   * Dynamic step (Leaf): a block that lasted less than block_target doubles the next step,
//     one that lasted more than 8 x block_target halves it, within [step_min, step_max].
//   * A request never creates a sequence; only create() does.
//   * Never twice across a delete: a deleted name keeps its floor, the durable upper bound it
//     had (every number below may have been issued). create() refuses that name below its
//     floor, in both modes and however long ago the delete was; at or above it, it is created
//     at once. Local mode: the floor is the deleted record left in the sequence store (a
//     tombstone, persist/sequence_store.h), which keeps its entry until the name is created
//     again there; so the table's sequences_max entries hold live names and deleted names'
//     floors together (full: the error lists the floors). Cluster mode: etcd keeps the floor
//     (control/cluster/seq_blocks.h). There is no override: a lower start is never accepted.
//   * Exhausted: a sequence whose next block would pass seq_value_limit (2^63) reserves no
//     more; the table is told (SequenceTable::set_exhausted), so once the numbers already held
//     are gone its workers answer EXHAUSTED, not RETRY. show/list say "exhausted", and
//     exhausted() (status, health, metrics) names every exhausted sequence.
//   * Thread-safe: step() runs on the sequence thread, the commands on the control loop; one
//     mutex serializes them (never touched by a worker). A command waits for it at most
//     command_wait (a reservation's disk write may hold it), then fails saying the store is
//     busy, so a stalled disk never hangs the control loop on list or show. create and delete
//     make their record durable on the control loop itself (bounded like any SlotWriter write).
//     Known limit: a disk that hangs inside that write hangs the control loop with it.
//   * Cluster mode (`shared` given): a block is
//     one SharedSequences::reserve() (one compare-and-put in etcd), granted to this node alone,
//     before any of it is queued; the local store is not used. The sequences are those the
//     shared store lists: step() lists them at start and every sync_period, serves the new
//     ones and drops (at once, queued sub-blocks included) those deleted or deleted and made
//     again; a reservation answered "no such sequence" drops it too. On this node, delete
//     drops at once; other nodes stop serving the name within sync_period. Store unreachable:
//     the workers issue what they hold, then answer RETRY; a failed reservation is retried
//     after shared_retry (an unanswered one holds every reservation back that long, so a
//     dead etcd costs one timeout per shared_retry, not one per sequence), a failed listing
//     after sync_period (show: etcd_reachable; metrics_text()).
//   * Cluster mode, serving deadline: a sequence's blocks are served only until
//     SharedSequences::serve_unconfirmed_max after etcd last confirmed its incarnation (a
//     listing that shows it, or a reservation, counted from when the request was sent), and a
//     monotonic owner's only until its lease deadline too (Holder); step() publishes both into
//     the table on every step. So a node cut off from etcd (or paused) stops serving a
//     sequence that may have been deleted and created again below its blocks; etcd keeps the
//     deleted name's tombstone longer than that (control/shared_sequences.h). Reservations and
//     owner claims name the incarnation served: one of another incarnation drops the name
//     here (with its queued sub-blocks), the next listing serves the new one afresh.
//   * Cluster mode, monotonic: one owner per name (SharedSequences::claim_owner under this
//     node's node-id lease, taken on a listing that shows no owner). Only the owner reserves
//     and publishes; its first block lies above everything reserved before, so a new owner
//     starts above the old owner's bound. A block that does not continue the last one (another
//     node reserved in between) is never published: the node stops owning. The owner stops
//     at once when holder() is gone or changed, or a listing names another owner; the others
//     answer NOT_OWNER with the listed owner's node id. A process paused past its lease
//     (SIGSTOP, a long stall) cannot issue from its published block on waking: the owner's
//     workers stop at Holder::serve_until_unix_ms (the table's serving deadline, checked per
//     burst), which only the step that follows a lease renewal moves forward; so numbers
//     stay strictly increasing across a move, whatever the old owner's pause.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "control/shared_sequences.h"
#include "core/sequence_table.h"
#include "persist/sequence_store.h"

namespace flurry::control {

struct SequenceOptions {
  std::uint64_t step_initial = 10'000;
  std::uint64_t step_min = 1'000;
  std::uint64_t step_max = std::uint64_t{1} << 26;
  std::chrono::milliseconds block_target{15'000};  // 60 s / 4, as Leaf
  std::uint32_t refill_ms = 1;                     // the sequence thread's period
  std::chrono::milliseconds sync_period{1'000};    // cluster mode: how often the list is read
  std::chrono::milliseconds shared_retry{250};     // cluster mode: after a failed reservation
};

class SequenceManager {
 public:
  using Clock = std::chrono::steady_clock;

  // `table`, `store`, `shared` and `clock` must outlive the manager. `shared` null: local
  // mode. `clock`: the workers' (their burst clock's wall time is what serving deadlines are
  // published in); null: the system clock.
  SequenceManager(core::SequenceTable& table, persist::SequenceStore& store, const SequenceOptions& options,
                  SharedSequences* shared = nullptr, const flurry::Clock* clock = nullptr);

  // Puts every stored sequence into the table, starting at its durable upper bound.
  void load();
  // The control socket's "seq" command: {"op": "create"|"delete"|"list"|"show", ...}.
  Status command(const nlohmann::json& request, nlohmann::json* reply);
  // Refills the workers' queues and the monotonic limits; reserves blocks as needed.
  void step();

  // Cluster mode, monotonic sequences: who this node is while it holds its node id's lease
  // (nullopt: not held, or known expired). Polled on every step; an owner that finds it
  // nullopt or changed stops issuing at once. Set before the first step().
  // serve_until_unix_ms: the owner's workers issue nothing once their burst clock (Unix ms)
  // reaches it, a point safely before the lease can expire in etcd (flurryd: the lease's
  // monotonic deadline less a margin, in wall-clock terms, recomputed on every step so a
  // renewal moves it forward and a wall-clock step is followed). Not part of the identity.
  struct Holder {
    std::uint32_t node_id = 0;
    std::int64_t lease_id = 0;
    std::uint64_t serve_until_unix_ms = core::SequenceTable::no_deadline;
    bool operator==(const Holder& other) const {
      return node_id == other.node_id && lease_id == other.lease_id;
    }
  };
  void set_holder(std::function<std::optional<Holder>()> holder) { holder_ = std::move(holder); }

  // The Prometheus families flurry_seq_exhausted_sequences and flurry_seq_exhausted (gauges;
  // one sample per exhausted sequence) and, in cluster mode, flurry_seq_etcd_reachable (gauge)
  // and flurry_seq_etcd_failures_total (counter). Never waits for the mutex.
  std::string metrics_text() const;
  // The names of the sequences that can reserve no block again (their numbers reached 2^63).
  // Never waits for the mutex (its own small lock, never held across I/O).
  std::vector<std::string> exhausted() const;

  Status create(const std::string& name, std::uint64_t start, core::SeqMode mode);
  Status remove(const std::string& name);
  Result<nlohmann::json> list() const;
  Result<nlohmann::json> show(const std::string& name) const;

 private:
  struct Live {
    bool active = false;
    std::string name;
    core::SeqMode mode = core::SeqMode::segment;
    std::uint64_t cursor = 0;  // the next number not yet handed out
    std::uint64_t upper = 0;   // durable: nothing at or above it was handed out
    std::uint64_t step = 0;
    std::uint64_t start = 0;
    std::uint64_t blocks = 0;  // reserved since start
    std::uint64_t reserve_failures = 0;
    Clock::time_point block_started{};
    std::uint64_t last_reserve_ns = 0;
    std::int64_t incarnation = 0;         // cluster mode: the shared store's
    std::uint64_t confirmed_mono_ns = 0;  // cluster mode: when etcd last confirmed it (sent)
    Clock::time_point retry_at{};         // cluster mode: no reservation before
    bool owned = false;                   // cluster mode, monotonic: this node owns it (etcd says so)
    bool serving = false;                 // ... and has published its first block
    std::optional<Holder> owned_as;
    std::uint32_t owner_node = proto::not_owner_unknown;  // not owned: whom NOT_OWNER names
    bool exhausted = false;                               // no block can be reserved again
  };

  static constexpr std::chrono::milliseconds command_wait{200};
  using Lock = std::unique_lock<std::mutex>;

  // The mutex for a command, or the sentence saying why not (busy).
  Result<Lock> lock_for_command() const;
  std::optional<std::size_t> find(const std::string& name) const;
  Status reserve(std::size_t slot);
  void refill_segment(std::size_t slot);
  void refill_monotonic(std::size_t slot);
  void adapt_step(Live& live) const;
  // Cluster mode (shared_ set), with the mutex held.
  Status create_shared(const std::string& name, std::uint64_t start, core::SeqMode mode);
  Status remove_shared(const std::string& name);
  Status reserve_shared(std::size_t slot);
  void sync_shared();
  void adopt(const SharedSequences::Listed& listed, std::uint64_t listed_mono_ns);
  // The table's serving deadline for the slot: confirmed + serve_unconfirmed_max, and for a
  // monotonic sequence the holder's lease deadline too; in wall-clock terms now.
  void publish_deadline(std::size_t slot, const std::optional<Holder>& holder);
  void drop(std::size_t slot);
  // The sequence can reserve nothing again: tells the table, the log and exhausted().
  void mark_exhausted(std::size_t slot);
  void publish_exhausted();
  // Local mode: the store entry holding `name`'s tombstone (a deleted name's floor), if any.
  std::optional<std::size_t> find_tombstone(const std::string& name) const;
  void settle_owner(std::size_t slot, const SharedSequences::Listed& listed);
  void lose_owner(std::size_t slot, std::uint32_t owner);
  void refill_monotonic_shared(std::size_t slot, const std::optional<Holder>& holder);
  nlohmann::json describe(std::size_t slot) const;

  core::SequenceTable& table_;
  persist::SequenceStore& store_;
  const flurry::Clock& clock_;
  SequenceOptions options_;
  // A plain mutex, waited for with try_lock in lock_for_command: std::timed_mutex's timed wait
  // is pthread_mutex_clocklock, which ThreadSanitizer (GCC 12) does not see, so it reported
  // every unlock of a lock taken that way as an unlock of an unlocked mutex.
  mutable std::mutex mutex_;
  std::array<Live, core::sequences_max> live_;
  std::uint64_t next_generation_ = 1;
  SharedSequences* shared_ = nullptr;
  Clock::time_point next_sync_{};
  Clock::time_point shared_retry_at_{};            // no reservation before (etcd did not answer)
  std::atomic<bool> shared_reachable_{true};       // the last listing or reservation was answered
  std::atomic<std::uint64_t> shared_failures_{0};  // listings and reservations that failed
  std::uint64_t sync_failures_ = 0;
  bool table_full_logged_ = false;
  mutable std::mutex exhausted_mutex_;  // guards exhausted_names_ only
  std::vector<std::string> exhausted_names_;
  std::function<std::optional<Holder>()> holder_;
};

}  // namespace flurry::control
