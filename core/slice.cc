// core/slice.cc — see slice.h.
#include "core/slice.h"

#include <algorithm>

#include "base/invariant.h"

namespace flurry::core {

Slice::Slice(const SliceConfig& config, Shared& shared)
    : config_(config), shared_(shared), stats_(shared.stats[config.core]) {
  FLURRY_INVARIANT(config.core < shared.workers, "a core slice without its stats slot");
  if (shared.source_limit.enabled()) sources_.emplace(shared.source_limit, stats_.sources);
  rebuild();
}

// At start (the thread that builds the slice) and whenever a new assignment was published
// (flurryd's main thread at start; flurry-renew after a re-claim).
void Slice::rebuild() {
  generation_ = shared_.assignment.current_generation();  // acquire: node and floor below
  HandlerConfig handler_config;
  handler_config.layout = config_.layout;
  handler_config.node_id = shared_.assignment.node_id.load(std::memory_order_acquire);
  handler_config.node_since_unix_ms = shared_.assignment.since_unix_ms.load(std::memory_order_acquire);
  handler_config.core = config_.core;
  handler_config.workers = config_.workers;
  handler_config.retry_hint_us = config_.retry_hint_us;
  handler_config.auth = config_.auth;
  handler_config.sequences = &shared_.sequences;  // this slice's sub-blocks (flurry-seq fills them)
  handler_config.source_limit = sources_ ? &*sources_ : nullptr;
  node_id_ = handler_config.node_id;
  handler_.emplace(handler_config, stats_);
  handler_->start_above(shared_.assignment.floor_t.load(std::memory_order_acquire));
  handler_->publish();
}

Burst Slice::begin(std::uint64_t now_unix_ms) {
  Burst burst;
  burst.now_unix_ms = now_unix_ms;
  burst.now_t = config_.layout.time_from_unix_ms(now_unix_ms);
  burst.ceiling_t = load_ceiling();
  return burst;  // no key table: a typed caller is never signed
}

SourceCharge Slice::charge(const Source& source, std::uint32_t count, const Burst& burst) {
  if (!sources_ || !source.limited || is_fenced(burst.ceiling_t)) return {count, 0, true, nullptr};
  return sources_->take(source, count, burst.now_unix_ms, SourceLimit::Grant::whole_or_owe);
}

Issued Slice::issue(std::uint32_t count, std::span<proto::Range> ranges, std::uint64_t now_unix_ms,
                    const Source& source) {
  FLURRY_INVARIANT(count >= 1 && ranges.size() >= ranges_for(count),
                   "IDs asked without room for their ranges");
  const Burst burst = begin(now_unix_ms);
  const SourceCharge charged = charge(source, count, burst);
  if (!charged.admitted) return handler_->refuse_source(proto::Opcode::get_ids, charged);
  Issued total;
  // As a client would: ask again for the rest after a partial answer, until all came or a
  // status other than OK stopped it (at the ceiling the next ask is answered RETRY). Each ask
  // issues at least one ID or stops, so this runs at most `count` times (twice, in practice).
  while (total.ids < count) {
    const Issued got = handler_->issue_ids(count - total.ids, burst, ranges.subspan(total.range_count));
    total.ids += got.ids;
    total.range_count += got.range_count;
    if (got.status != proto::Status::ok) {
      total.status = got.status;
      total.detail = got.detail;
      break;
    }
  }
  if (sources_) sources_->refund(charged, count - total.ids);
  handler_->publish();
  return total;
}

Issued Slice::issue_seq(std::string_view name, std::uint32_t count, std::span<proto::Range> ranges,
                        std::uint64_t now_unix_ms, const Source& source, bool contiguous) {
  FLURRY_INVARIANT(count >= 1, "no numbers asked");
  if (!proto::valid_seq_name(name)) return {proto::Status::bad_request};
  const Burst burst = begin(now_unix_ms);
  const SourceCharge charged = charge(source, count, burst);
  if (!charged.admitted) return handler_->refuse_source(proto::Opcode::get_seq, charged);
  // A sub-block can end inside a request (the next one is not contiguous with it): so many
  // tries at one range of `count` before the caller is told it cannot come in one piece.
  constexpr int contiguous_tries = 4;
  Issued total;
  std::uint32_t longest_run = 0;
  for (int tries = 0; total.ids < count;) {
    if (total.range_count == ranges.size()) {  // no room for another piece: ask again later
      total.status = proto::Status::retry;
      total.detail = config_.retry_hint_us;
      break;
    }
    const Issued got = handler_->issue_seq(name, count - total.ids, burst, ranges.subspan(total.range_count));
    if (got.status == proto::Status::ok && got.range_count == 0) {  // nothing: as a RETRY
      total.status = proto::Status::retry;
      total.detail = config_.retry_hint_us;
      break;
    }
    if (got.status != proto::Status::ok) {
      total.ids += got.ids;
      total.range_count += got.range_count;
      total.status = got.status;
      total.detail = got.detail;
      break;
    }
    if (!contiguous) {
      total.ids += got.ids;
      total.range_count += got.range_count;
      continue;
    }
    const std::span<const proto::Range> pieces = ranges.first(got.range_count);
    bool one_run = true;
    for (std::size_t i = 1; i < pieces.size(); ++i) {
      if (pieces[i].first != pieces[i - 1].first + pieces[i - 1].count) one_run = false;
    }
    if (one_run && got.ids == count) {
      ranges[0] = {pieces[0].first, count};
      total.ids = count;
      total.range_count = 1;
      break;
    }
    for (const proto::Range& piece : pieces) {
      longest_run = std::max<std::uint32_t>(longest_run, static_cast<std::uint32_t>(piece.count));
    }
    // Those numbers are skipped: never issued again, never handed out. Never a RETRY after the
    // last try: a run longer than a sub-block never comes, and a client would ask forever.
    if (++tries >= contiguous_tries) {
      total.status = proto::Status::bad_request;
      total.detail = longest_run;
      break;
    }
  }
  if (sources_) sources_->refund(charged, count - std::min(count, total.ids));
  handler_->publish();
  return total;
}

}  // namespace flurry::core
