// control/sequence_manager.h — the control core's side of named sequences (local mode):
// create / delete / list / show, and the refill step that keeps every worker's sub-block
// queue full (DESIGN.md "Named sequences and ID forms").
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
//   * Thread-safe: step() runs on the sequence thread, the commands on the control loop; one
//     mutex serializes them (never touched by a worker). A command waits for it at most
//     command_wait (a reservation's disk write may hold it), then fails saying the store is
//     busy, so a stalled disk never hangs the control loop on list or show. create and delete
//     make their record durable on the control loop itself (bounded like any SlotWriter write).
//     Known limit: a disk that hangs inside that write hangs the control loop with it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/sequence_table.h"
#include "core/status.h"
#include "persist/sequence_store.h"

namespace flurry::control {

struct SequenceOptions {
  std::uint64_t step_initial = 10'000;
  std::uint64_t step_min = 1'000;
  std::uint64_t step_max = std::uint64_t{1} << 26;
  std::chrono::milliseconds block_target{15'000};  // 60 s / 4, as Leaf
  std::uint32_t refill_ms = 1;                     // the sequence thread's period
};

class SequenceManager {
 public:
  using Clock = std::chrono::steady_clock;

  // `table` and `store` must outlive the manager.
  SequenceManager(core::SequenceTable& table, persist::SequenceStore& store, const SequenceOptions& options);

  // Puts every stored sequence into the table, starting at its durable upper bound.
  void load();
  // The control socket's "seq" command: {"op": "create"|"delete"|"list"|"show", ...}.
  Status command(const nlohmann::json& request, nlohmann::json* reply);
  // Refills the workers' queues and the monotonic limits; reserves blocks as needed.
  void step();

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
  nlohmann::json describe(std::size_t slot) const;

  core::SequenceTable& table_;
  persist::SequenceStore& store_;
  SequenceOptions options_;
  // A plain mutex, waited for with try_lock in lock_for_command: std::timed_mutex's timed wait
  // is pthread_mutex_clocklock, which ThreadSanitizer (GCC 12) does not see, so it reported
  // every unlock of a lock taken that way as an unlock of an unlocked mutex.
  mutable std::mutex mutex_;
  std::array<Live, core::sequences_max> live_;
  std::uint64_t next_generation_ = 1;
};

}  // namespace flurry::control
