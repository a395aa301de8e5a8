// control/report.h — what the control socket and the metrics show, built from one snapshot of
// the workers' counters, the scheduler and the store. Control loop (flurryd's main thread) only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/counter_source.h"
#include "base/door.h"
#include "control/config.h"
#include "control/scheduler.h"
#include "core/shared.h"

namespace flurry::control {

struct ReportSources {
  const Config* config = nullptr;
  const core::Shared* shared = nullptr;
  const CounterSource* backend = nullptr;        // the packet backend: its name and counters
  std::vector<const CounterSource*> front_ends;  // --resp-listen, --http-listen, --memcache-listen
  SchedulerSnapshot scheduler;                   // taken once per report (never waits for I/O)
  std::string store_method;                      // "io_uring" or "pwrite+fdatasync"
  std::uint64_t store_writes = 0;
  std::uint64_t store_failures = 0;
  std::uint64_t durable_watermark_t = 0;
  std::uint64_t started_unix_ms = 0;
  std::uint64_t control_bad_requests = 0;
  std::uint64_t control_refused_peers = 0;  // control-socket clients of another uid
  // The front doors (base/door.h) by name: resp, http, metrics, control. Their event counters
  // may be read from this thread.
  std::vector<std::pair<std::string, const Door*>> doors;
  nlohmann::json lease = {{"mode", "local"}};  // cluster mode fills this in
  // Named sequences that can issue no new number (2^63 reached). The node's state and
  // `healthy` do not follow them (Snowflake IDs and the other sequences are still served).
  std::vector<std::string> sequences_exhausted;
  // --seq-auto-create: names created on first use by a front door, and refused (at the cap,
  // or the create failed), since start.
  std::uint64_t seq_auto_created = 0;
  std::uint64_t seq_auto_create_refused = 0;
};

nlohmann::json status_json(const ReportSources& sources);
nlohmann::json stats_json(const ReportSources& sources);  // per worker and total
nlohmann::json watermark_json(const ReportSources& sources);
// {"healthy": bool, "state": ..., "cause": ..., "sequences_exhausted": [...]}
nlohmann::json health_json(const ReportSources& sources);
// Prometheus text exposition format 0.0.4.
std::string metrics_text(const ReportSources& sources);

}  // namespace flurry::control
