// core/slice.h — one core slice: the issuing unit of one thread (a socket worker, a DPDK
// worker lcore, a front end), and the one place its Handler is built and kept paired with the
// node's assignment.
//
// A slice owns its core index's generator (inside its core::Handler), its WorkerStats slot
// (shared.stats[core]) and its sub-blocks of every named sequence (SequenceTable slot `core`).
// One thread calls it, and only that thread. Contract:
//   * once per burst, load_ceiling() reads the ceiling and then the assignment generation
//     (core::load_burst_ceiling); when a new assignment was published it first rebuilds the
//     handler in place (the new node id and since_unix_ms, start_above(floor_t), last_t
//     published), so a ceiling is never paired with another assignment's handler;
//   * UDP: ceiling once per burst, handle() each datagram, publish() after the burst;
//   * typed callers (the front ends): issue() and issue_seq() are each a burst of their own
//     (ceiling, issue, publish) with the checks and counters of an unsigned GET_IDS / GET_SEQ
//     datagram, the numbers written as ranges: nothing is encoded or decoded;
//   * the per-source bound (core/source_limit.h, Shared::source_limit): a slice owns its own
//     table of sources, built with it; handle() charges a datagram's sender, issue() and
//     issue_seq() the `source` their caller names (a front door: the connection's peer;
//     Source::none() for a request its door authenticated);
//   * no allocation, lock or system call after construction; never waits for the ceiling: a
//     call returns what it got and the status that stopped it (RETRY, FENCED, EXHAUSTED, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/assignment.h"
#include "core/handler.h"
#include "core/shared.h"
#include "proto/layout.h"
#include "proto/wire.h"

namespace flurry::core {

struct SliceConfig {
  proto::Layout layout;       // validated, core_bits counting every slice
  std::uint32_t core = 0;     // this slice's index: core bits, WorkerStats slot, sequence sub-blocks
  std::uint32_t workers = 1;  // the count INFO answers (HandlerConfig::workers)
  std::uint32_t retry_hint_us = 1000;
  AuthConfig auth;  // the UDP workers' --auth; a front end's is off
};

class Slice {
 public:
  // `shared` outlives the slice; config.core < shared.workers.
  Slice(const SliceConfig& config, Shared& shared);
  Slice(const Slice&) = delete;
  Slice& operator=(const Slice&) = delete;

  // ---- UDP: once per burst, then handle() each datagram, then publish() ----
  // The ceiling to issue under, paired with this slice's assignment (core::load_burst_ceiling):
  // the handler is rebuilt first if the assignment moved. Two loads and a compare when it did not.
  std::uint64_t load_ceiling() {
    return load_burst_ceiling(shared_.ceiling, shared_.assignment, generation_, [this] { rebuild(); });
  }
  // Rebuilds now if a new assignment was published (a poll loop's tick between bursts).
  void refresh() {
    if (shared_.assignment.current_generation() != generation_) rebuild();
  }
  // One datagram (core::Handler::handle): the answer's size in `out`, 0 when dropped.
  std::size_t handle(std::span<const std::uint8_t> in, std::span<std::uint8_t> out, const Burst& burst,
                     const Source& source = Source::none()) {
    return handler_->handle(in, out, burst, source);
  }
  // The handler itself, for a transport that wraps handle() (dataplane/frame.h).
  Handler& handler() { return *handler_; }
  // After a burst: last_t for the watermark scheduler.
  void publish() { handler_->publish(); }

  // ---- typed callers: one call, one burst (ceiling, issue, publish) ----
  // `now_unix_ms`: the caller's wall clock. Up to `count` (>= 1) IDs into `ranges`, which holds
  // at least ranges_for(count). OK when all `count` were issued; otherwise the status that
  // stopped it (RETRY at the ceiling, FENCED, EXHAUSTED), and the IDs issued before it are in
  // `ranges` all the same (counted, never issued again). `source`: who asks; all of `count`
  // is charged to its bucket first or nothing is issued (RETRY, Issued::source_limited).
  Issued issue(std::uint32_t count, std::span<proto::Range> ranges, std::uint64_t now_unix_ms,
               const Source& source);
  // Up to `count` (>= 1) numbers of the named sequence `name` into `ranges`, in the order
  // issued: OK when all `count` came; otherwise UNKNOWN_SEQUENCE, NOT_OWNER (detail: the owner),
  // RETRY (nothing queued for this slice, or `ranges` full), EXHAUSTED, FENCED or BAD_REQUEST
  // (not a sequence name). With `contiguous`, the numbers come as one range of exactly `count`:
  // an answer in several pieces is dropped (those numbers are skipped, never issued again) and
  // asked again, a few times; then BAD_REQUEST with the longest run seen in `detail` (`count`
  // is more than one sub-block holds).
  // `source` as for issue().
  Issued issue_seq(std::string_view name, std::uint32_t count, std::span<proto::Range> ranges,
                   std::uint64_t now_unix_ms, const Source& source, bool contiguous = false);
  // Ranges that `count` IDs can take from one generator: the rest of a unit, then whole units
  // (proto::ranges_for_ids without the datagram's limit).
  std::size_t ranges_for(std::uint32_t count) const {
    const std::uint32_t capacity = config_.layout.counter_capacity();
    return (std::size_t{count} + capacity - 1) / capacity + 1;
  }

  std::uint32_t node_id() const { return node_id_; }
  std::uint32_t core() const { return config_.core; }
  // Its per-source bound (null: off), for tests and reports.
  SourceLimit* source_limit() { return sources_ ? &*sources_ : nullptr; }

 private:
  void rebuild();
  Burst begin(std::uint64_t now_unix_ms);
  // A typed call's charge: all of `count` (a door's answer is all of it or an error).
  SourceCharge charge(const Source& source, std::uint32_t count, const Burst& burst);

  SliceConfig config_;
  Shared& shared_;
  WorkerStats& stats_;
  std::uint64_t generation_ = 0;
  std::uint32_t node_id_ = 0;
  std::optional<SourceLimit> sources_;  // built once with the slice; kept across rebuilds
  std::optional<Handler> handler_;      // in place: rebuilding never allocates
};

}  // namespace flurry::core
