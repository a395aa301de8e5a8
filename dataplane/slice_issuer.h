// dataplane/slice_issuer.h — IDs and named-sequence numbers for a front end that is not a
// packet worker (the RESP and HTTP listeners): one core slice of its own, driven by one thread.
//
// It runs the same core::Handler as a worker, fed with a GET_IDS request built here, so every
// rule a worker follows holds for it too: the ceiling and its assignment read together
// (core::load_burst_ceiling), last_t published for the scheduler, outcomes counted in its own
// WorkerStats slot. issue() is called by that one thread only; never blocks, never waits for
// the ceiling: it returns what it got and the status that stopped it (RETRY, FENCED).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/clock.h"
#include "core/handler.h"
#include "core/shared.h"
#include "proto/layout.h"
#include "proto/wire.h"

namespace flurry::dataplane {

struct SliceConfig {
  proto::Layout layout;  // validated, core_bits counting this slice
  std::uint32_t core = 0;
  std::uint32_t slices = 1;  // workers + front ends
  std::uint32_t retry_hint_us = 1000;
  const Clock* clock = nullptr;  // outlives the issuer
};

struct Issued {
  proto::Status status = proto::Status::ok;  // ok when all `n` were issued
  std::uint32_t retry_hint_us = 0;           // with RETRY
  std::uint32_t owner = 0;                   // with NOT_OWNER: the owner's node id (or unknown)
};

class SliceIssuer {
 public:
  // `stats` is this slice's slot in shared.worker_stats().
  SliceIssuer(const SliceConfig& config, core::Shared& shared, core::WorkerStats& stats);

  // Appends up to `n` new IDs (n >= 1) to `ids`; fewer only when the status is not ok.
  Issued issue(std::uint32_t n, std::vector<std::uint64_t>& ids);
  // Appends up to `n` numbers (n >= 1) of the named sequence `name` (valid) to `ranges`, in
  // the order issued, through the same handler as a GET_SEQ (this slice's sub-blocks of the
  // sequence table); fewer only when the status is not ok (unknown_sequence, retry,
  // not_owner, exhausted, fenced). With `contiguous`, the numbers come as one range of
  // exactly n: an answer in several pieces is dropped (those numbers are skipped, never
  // issued again) and asked again, a few times; then BAD_REQUEST with the longest run seen
  // in retry_hint_us (n is more than one sub-block holds).
  Issued issue_seq(std::string_view name, std::uint32_t n, std::vector<proto::Range>& ranges,
                   bool contiguous = false);
  std::uint32_t node_id() const { return handler_config_.node_id; }

 private:
  void rebuild();
  // One request through the handler: the answer's view (status, ranges) in answer_.
  proto::ResponseView exchange(const proto::Request& request, std::size_t padded);

  SliceConfig config_;
  core::Shared& shared_;
  core::WorkerStats& stats_;
  core::HandlerConfig handler_config_;
  std::uint64_t generation_ = 0;
  std::optional<core::Handler> handler_;
  std::uint64_t request_id_ = 0;
  std::array<std::uint8_t, proto::datagram_size_max> request_{};
  std::array<std::uint8_t, proto::datagram_size_max> answer_{};
};

}  // namespace flurry::dataplane
