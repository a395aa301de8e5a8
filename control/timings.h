// control/timings.h — every period and timeout flurryd derives from --lead-ms and
// --lease-ttl-s, computed and cross-checked in one place (derive_timings, called by
// parse_config) and handed down in Config::timings: the scheduler (tick, stall), the state dir
// (a new node's floor), cluster mode (etcd timeouts, the keep-alive's, the sequences' lease
// margin). A combination that cannot keep the invariant is refused there, with the flags to
// change, before any file is touched.
#pragma once

#include <cstdint>
#include <optional>

#include "base/status.h"

namespace flurry::control {

struct Timings {
  std::uint32_t lead_ms = 3000;  // --lead-ms: how far ahead of the clock the ceiling is made durable
  std::uint64_t lead_t = 3000;   // the lead in the layout's time units: max(lead_ms / unit, 2)
  // flurry-renew's period: clamp(lead/16, 1 ms, 100 ms). The scheduler renews when less than
  // 3/4 of the lead is left, so a tick this short leaves many chances before the ceiling.
  std::uint32_t tick_ms = 100;
  // A watermark write hanging this long shows as degraded (and counts as stalled once done):
  // clamp(lead/4, 100 ms, 1 s).
  std::uint32_t stall_ms = 750;

  // Cluster mode (lease_ttl_s 0: local mode, the rest unused).
  std::uint32_t lease_ttl_s = 0;  // --lease-ttl-s
  // One etcd request, per endpoint: a renew (up to endpoints × this) must fit well inside the
  // quarter-lead margin the scheduler keeps. clamp(lead/6, 100 ms, 1 s).
  std::uint32_t etcd_request_timeout_ms = 500;
  std::uint32_t etcd_connect_timeout_ms = 200;  // min(200 ms, the request timeout)
  // The lease keeper's calls may take longer: a keep-alive only has to land within the TTL.
  // clamp(TTL/6, 200 ms, 2 s).
  std::uint32_t keepalive_timeout_ms = 1666;
  // Monotonic sequences' owners stop this long before their lease can end: max(500 ms,
  // TTL/5), which covers the drift between the monotonic and the workers' wall clock and a
  // wall-clock step between two sequence steps (ClusterMode::serve_until_unix_ms).
  std::uint64_t sequence_lease_margin_ms = 2000;

  // The lead's share alone (local mode; a test's scheduler): no cross-check.
  static Timings of_lead(std::uint32_t lead_ms, std::uint32_t time_unit_ms);
};

// All of it, cross-checked: the lead must span two time units, and in cluster mode
// (lease_ttl_s set) it must be at most 2/3 of the TTL: a node paused (SIGSTOP, a VM freeze)
// past its lease may resume and let its workers answer before the control loop sees the lease
// gone; they cannot issue then only if the held ceiling (at most `lead` ahead of the last
// renewal) is already in the past, and the lease ends at the earliest 2/3 TTL after the last
// keep-alive before the pause. Fails with a sentence naming the flags to change.
Result<Timings> derive_timings(std::uint32_t lead_ms, std::uint32_t time_unit_ms,
                               std::optional<std::uint32_t> lease_ttl_s);

}  // namespace flurry::control
