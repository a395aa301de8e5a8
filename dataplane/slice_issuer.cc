// dataplane/slice_issuer.cc — see slice_issuer.h.
#include "dataplane/slice_issuer.h"

#include <algorithm>

namespace flurry::dataplane {

SliceIssuer::SliceIssuer(const SliceConfig& config, core::Shared& shared, core::WorkerStats& stats)
    : config_(config), shared_(shared), stats_(stats) {
  handler_config_.layout = config.layout;
  handler_config_.core = config.core;
  handler_config_.workers = config.slices;
  handler_config_.retry_hint_us = config.retry_hint_us;
  handler_config_.sequences = &shared.sequences;  // this slice's sub-blocks (flurry-seq fills them)
  rebuild();
}

void SliceIssuer::rebuild() {
  generation_ = shared_.assignment.current_generation();  // acquire: node and floor below
  handler_config_.node_id = shared_.assignment.node_id.load(std::memory_order_acquire);
  handler_config_.node_since_unix_ms = shared_.assignment.since_unix_ms.load(std::memory_order_acquire);
  handler_.emplace(handler_config_, stats_);
  handler_->start_above(shared_.assignment.floor_t.load(std::memory_order_acquire));
}

proto::ResponseView SliceIssuer::exchange(const proto::Request& request, std::size_t padded) {
  core::Burst burst;
  const std::uint64_t now_ms = config_.clock->wall_ms();
  burst.now_t = config_.layout.time_from_unix_ms(now_ms);
  burst.now_unix_ms = now_ms;
  burst.ceiling_t =
      core::load_burst_ceiling(shared_.ceiling, shared_.assignment, generation_, [this] { rebuild(); });
  const std::size_t size = proto::encode_request(request, request_, padded);
  const std::size_t written = handler_->handle(std::span(request_.data(), size), answer_, burst);
  handler_->publish();
  return proto::decode_response(std::span(answer_.data(), written));
}

Issued SliceIssuer::issue(std::uint32_t n, std::vector<std::uint64_t>& ids) {
  std::uint32_t remaining = n;
  while (remaining > 0) {
    proto::Request get;
    get.opcode = proto::Opcode::get_ids;
    get.count = std::min<std::uint32_t>(remaining, proto::count_max);
    get.request_id = ++request_id_;
    // Padded as PROTOCOL.md says a client pads (one range per time unit of this slice), so
    // the answer may carry every range the count needs and no byte more is built or read.
    const std::size_t padded = std::min<std::size_t>(
        proto::datagram_size_max, proto::request_size_for_ids(get.count, config_.layout.counter_capacity()));
    const proto::ResponseView view = exchange(get, padded);
    if (view.error != proto::ResponseError::ok) return {proto::Status::bad_request, 0};
    if (view.header.status != proto::Status::ok) return {view.header.status, view.header.detail};
    for (std::size_t i = 0; i < view.header.range_count; ++i) {
      const proto::Range range = view.range(i);
      for (std::uint64_t k = 0; k < range.count; ++k) ids.push_back(range.first + k);
      remaining -= static_cast<std::uint32_t>(range.count);
    }
  }
  return {};
}

Issued SliceIssuer::issue_seq(std::string_view name, std::uint32_t n, std::vector<proto::Range>& ranges,
                              bool contiguous) {
  proto::Request get;
  get.opcode = proto::Opcode::get_seq;
  get.name.size = static_cast<std::uint8_t>(std::min(name.size(), get.name.bytes.size()));
  std::copy_n(name.data(), get.name.size, get.name.bytes.data());
  // A sub-block can end inside a request (the next one is not contiguous with it): so many
  // tries at one range of n before the caller is told to retry.
  constexpr int contiguous_tries = 4;
  std::uint32_t remaining = n;
  std::uint32_t longest_run = 0;
  for (int tries = 0; remaining > 0;) {
    get.count = std::min<std::uint32_t>(remaining, proto::count_max);
    get.request_id = ++request_id_;
    const proto::ResponseView view = exchange(get, proto::datagram_size_max);
    if (view.error != proto::ResponseError::ok) return {proto::Status::bad_request, 0};
    if (view.header.status == proto::Status::not_owner) {
      return {view.header.status, 0, view.header.detail};
    }
    if (view.header.status != proto::Status::ok) return {view.header.status, view.header.detail};
    if (view.header.range_count == 0) return {proto::Status::retry, config_.retry_hint_us};
    if (contiguous) {
      bool one_run = true;
      std::uint64_t got = 0;
      for (std::size_t i = 0; i < view.header.range_count; ++i) {
        const proto::Range range = view.range(i);
        if (i > 0 && range.first != view.range(i - 1).first + view.range(i - 1).count) one_run = false;
        got += range.count;
      }
      if (one_run && got == n && view.header.range_count > 0) {
        ranges.push_back({view.range(0).first, n});
        return {};
      }
      for (std::size_t i = 0; i < view.header.range_count; ++i) {
        longest_run = std::max<std::uint32_t>(longest_run, view.range(i).count);
      }
      // Never a RETRY here: a run longer than a sub-block never comes, and a client would
      // ask again forever. BAD_REQUEST with the longest run seen (the caller says so).
      if (++tries >= contiguous_tries) return {proto::Status::bad_request, longest_run};
      continue;  // these numbers are skipped: never issued again, never handed out
    }
    for (std::size_t i = 0; i < view.header.range_count; ++i) {
      const proto::Range range = view.range(i);
      ranges.push_back(range);
      remaining -= range.count;
    }
  }
  return {};
}

}  // namespace flurry::dataplane
