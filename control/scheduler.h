// control/scheduler.h — the watermark scheduler: raises the issue ceiling, and only ever to a
// value that is already durable (DESIGN.md "The one invariant").
//
// On each tick (control core, never a worker) it reads the clock and every worker's last_t;
// when less than 3/4 of the lead is left it picks W = max(now, max last_t) + lead, asks the
// Durability to make W durable (local file; in cluster mode also etcd), and publishes
// ceiling = W only after that returned ok. A failure leaves the held ceiling in place (the
// workers serve up to it, then answer RETRY) and puts the scheduler in a named degraded
// state; `lost` (the node id was taken over) fences the workers at once.
// It also watches the wall clock against the monotonic clock and counts steps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "control/clock.h"
#include "core/ceiling.h"
#include "dataplane/backend.h"
#include "proto/layout.h"

namespace flurry::control {

enum class DurableResult { ok, failed, lost };

class Durability {
 public:
  virtual ~Durability() = default;
  // Blocks until `watermark_t` is durable everywhere it must be, or fails.
  virtual DurableResult make_durable(std::uint64_t watermark_t, std::string* error) = 0;
  // The degraded state's name when make_durable fails, e.g. "degraded_disk".
  virtual std::string_view failure_state() const = 0;
};

enum class ServeState { starting, serving, degraded, fenced, draining };
std::string_view to_string(ServeState state);

struct SchedulerStats {
  std::uint64_t renewals = 0;
  std::uint64_t renew_failures = 0;
  std::uint64_t last_renew_ns = 0;
  std::uint64_t max_renew_ns = 0;
  std::uint64_t clock_steps_back = 0;
  std::uint64_t clock_steps_forward = 0;
  std::int64_t last_clock_step_ms = 0;
  std::uint64_t ceiling_t = 0;      // the held (durable) ceiling
  std::uint64_t max_last_t = 0;     // highest time field any worker issued at
  std::uint64_t now_t = 0;
  std::string last_error;
};

class WatermarkScheduler {
 public:
  // A wall-clock jump of more than this against the monotonic clock counts as a step.
  static constexpr std::int64_t clock_step_threshold_ms = 50;

  WatermarkScheduler(const proto::Layout& layout, std::uint32_t lead_ms, Durability& durability,
                     dataplane::Shared& shared, const Clock& clock);

  // Publishes the assignment (node id, floor = the durable watermark) and makes the first
  // watermark durable. Workers may be started before or after; they serve once the ceiling
  // is published. Returns false (with *error) if the first write failed.
  bool start(std::uint32_t node_id, std::uint64_t durable_watermark_t, std::string* error);

  // Renews when due. Call every tick_ms().
  void tick();

  // After a takeover was detected elsewhere (cluster mode): fence now.
  void fence();
  // Operator's `drain`: stop issuing for good (GET_IDS answered FENCED, so clients move to
  // another server) before a planned stop. The held watermark stays durable; restart to serve.
  void drain();
  // Cluster mode after a re-claim: new node id and floor, then a fresh durable watermark.
  bool reassign(std::uint32_t node_id, std::uint64_t durable_watermark_t, std::string* error);

  std::uint32_t tick_ms() const;
  ServeState state() const { return state_; }
  std::string_view state_name() const;
  const SchedulerStats& stats() const { return stats_; }
  std::uint64_t lead_t() const { return policy_.lead_t; }

 private:
  bool renew(std::uint64_t now_t, std::uint64_t max_last_t);
  void watch_clock();
  std::uint64_t max_worker_last_t() const;

  proto::Layout layout_;
  std::uint32_t lead_ms_;
  core::WatermarkPolicy policy_;
  Durability& durability_;
  dataplane::Shared& shared_;
  const Clock& clock_;
  ServeState state_ = ServeState::starting;
  SchedulerStats stats_;
  std::uint64_t previous_wall_ms_ = 0;
  std::uint64_t previous_mono_ns_ = 0;
  std::uint64_t last_failure_log_ns_ = 0;
};

}  // namespace flurry::control
