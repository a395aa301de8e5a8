// control/timings.cc — see timings.h.
#include "control/timings.h"

#include <fmt/format.h>

#include <algorithm>

namespace flurry::control {

Timings Timings::of_lead(std::uint32_t lead_ms, std::uint32_t time_unit_ms) {
  Timings out;
  out.lead_ms = lead_ms;
  out.lead_t = std::max<std::uint64_t>(lead_ms / std::max<std::uint32_t>(time_unit_ms, 1), 2);
  out.tick_ms = std::clamp<std::uint32_t>(lead_ms / 16, 1, 100);
  out.stall_ms = std::clamp<std::uint32_t>(lead_ms / 4, 100, 1000);
  out.etcd_request_timeout_ms = std::clamp<std::uint32_t>(lead_ms / 6, 100, 1000);
  out.etcd_connect_timeout_ms = std::min<std::uint32_t>(200, out.etcd_request_timeout_ms);
  return out;
}

Result<Timings> derive_timings(std::uint32_t lead_ms, std::uint32_t time_unit_ms,
                               std::optional<std::uint32_t> lease_ttl_s) {
  if (time_unit_ms == 0 || lead_ms / time_unit_ms < 2) {
    return Error{
        fmt::format("--lead-ms {} is less than two {} ms time units; raise it", lead_ms, time_unit_ms)};
  }
  Timings out = Timings::of_lead(lead_ms, time_unit_ms);
  if (!lease_ttl_s) return out;
  const std::uint64_t two_thirds_ttl_ms = std::uint64_t{*lease_ttl_s} * 2000 / 3;
  if (lead_ms > two_thirds_ttl_ms) {
    return Error{fmt::format(
        "--lead-ms {} is more than 2/3 of the lease TTL ({} ms at --lease-ttl-s {}): a node paused past its "
        "lease could still issue IDs on a node id it lost; lower --lead-ms or raise --lease-ttl-s",
        lead_ms, two_thirds_ttl_ms, *lease_ttl_s)};
  }
  out.lease_ttl_s = *lease_ttl_s;
  out.keepalive_timeout_ms = std::clamp<std::uint32_t>(*lease_ttl_s * 1000 / 6, 200, 2000);
  out.sequence_lease_margin_ms = std::max<std::uint64_t>(500, std::uint64_t{*lease_ttl_s} * 1000 / 5);
  return out;
}

}  // namespace flurry::control
