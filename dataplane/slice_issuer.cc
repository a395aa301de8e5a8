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
  rebuild();
}

void SliceIssuer::rebuild() {
  generation_ = shared_.assignment.current_generation();  // acquire: node and floor below
  handler_config_.node_id = shared_.assignment.node_id.load(std::memory_order_acquire);
  handler_config_.node_since_unix_ms = shared_.assignment.since_unix_ms.load(std::memory_order_acquire);
  handler_.emplace(handler_config_, stats_);
  handler_->start_above(shared_.assignment.floor_t.load(std::memory_order_acquire));
}

Issued SliceIssuer::issue(std::uint32_t n, std::vector<std::uint64_t>& ids) {
  std::uint32_t remaining = n;
  while (remaining > 0) {
    core::Burst burst;
    burst.now_t = config_.layout.time_from_unix_ms(config_.clock->wall_ms());
    burst.ceiling_t =
        core::load_burst_ceiling(shared_.ceiling, shared_.assignment, generation_, [this] { rebuild(); });
    proto::Request get;
    get.opcode = proto::Opcode::get_ids;
    get.count = std::min<std::uint32_t>(remaining, proto::count_max);
    get.request_id = ++request_id_;
    // Padded as PROTOCOL.md says a client pads (one range per time unit of this slice), so
    // the answer may carry every range the count needs and no byte more is built or read.
    const std::size_t padded = std::min<std::size_t>(
        proto::datagram_size_max, proto::request_size_for_ids(get.count, config_.layout.counter_capacity()));
    const std::size_t size = proto::encode_request(get, request_, padded);
    const std::size_t written = handler_->handle(std::span(request_.data(), size), answer_, burst);
    handler_->publish();
    const proto::ResponseView view = proto::decode_response(std::span(answer_.data(), written));
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

}  // namespace flurry::dataplane
