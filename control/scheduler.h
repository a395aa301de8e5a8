// control/scheduler.h — the watermark scheduler: raises the issue ceiling, and only ever to a
// value that is already durable (docs/architecture.md, the invariant).
//
// Run-ahead is bounded. The scheduler keeps a clock that never runs backwards: wall time,
// carried forward at monotonic pace while the wall clock is behind it (ForwardClock below).
// The ceiling is W = that clock + lead, never "the cores' last_t + lead": a core that borrows
// time under overload can get at most `lead` ahead of that clock, and demand beyond the
// layout's capacity is answered RETRY until time catches up (a counted, visible state:
// SchedulerStats::at_ceiling). A wall clock that steps back never blocks: the forward clock
// keeps moving at monotonic pace.
//
// On each tick, when less than 3/4 of the lead is left, it asks the Durability to make W
// durable (local file; in cluster mode also etcd) and publishes ceiling = W only after that
// returned ok. It never asks for less than the highest W it asked for before (a failed write
// may have landed locally). A failure leaves the held ceiling in place (workers serve up to
// it, then answer RETRY) and puts the scheduler in a named degraded state; `lost` (the node id
// was taken over) fences the workers at once.
//
// Threads: start() runs on flurryd's main thread before the renew thread (flurry-renew) exists;
// tick() and reassign() then run on flurry-renew, one thread at a time (all three block in
// make_durable). fence(), drain() and snapshot() may be called from any thread and never wait
// for I/O: while make_durable hangs, snapshot() still answers and names the stall.
// A fence or drain is never undone by a write that was in flight; only reassign() unfences.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"
#include "control/timings.h"
#include "core/ceiling.h"
#include "core/shared.h"
#include "proto/layout.h"

namespace flurry::control {

// Which part a degraded node waits for: the local disk, or etcd (cluster mode).
enum class DegradedCause : std::uint8_t { disk, etcd };
// "degraded_disk", "degraded_etcd": the state's name on the control socket and in metrics.
std::string_view to_string(DegradedCause cause);
inline constexpr DegradedCause degraded_causes[] = {DegradedCause::disk, DegradedCause::etcd};

class Durability {
 public:
  virtual ~Durability() = default;
  // Blocks until `watermark_t` is durable everywhere it must be, or fails: with
  // StatusCode::lost when the node id is no longer ours (the scheduler fences), with any
  // other code when the write failed (the scheduler degrades and retries).
  virtual Status make_durable(std::uint64_t watermark_t) = 0;
  // What failed when make_durable fails.
  virtual DegradedCause failure_cause() const = 0;
  // What is being waited for while make_durable hangs (called from another thread).
  // Default: failure_cause().
  virtual DegradedCause pending_cause() const { return failure_cause(); }
};

// serving: issuing up to a durable ceiling; degraded: the last write failed or a write hangs
// (serving continues up to the held ceiling); fenced: the node id is not ours (nothing
// issued); draining: stopped for good by the operator; exhausted: the layout's time range is
// used up (nothing can ever be issued again under this layout and node id).
enum class ServeState { starting, serving, degraded, fenced, draining, exhausted };
std::string_view to_string(ServeState state);
inline constexpr ServeState serve_states[] = {ServeState::starting, ServeState::serving,
                                              ServeState::degraded, ServeState::fenced,
                                              ServeState::draining, ServeState::exhausted};

// Wall time that never runs backwards: max(wall, last value + monotonic time since).
class ForwardClock {
 public:
  // Never before `at_least_ms`; used at start and after a re-claim to resume from a floor.
  void raise_to(std::uint64_t at_least_ms, std::uint64_t mono_ns);
  // Reads `wall_ms` and `mono_ns` (taken together) and returns the forward time in ms.
  std::uint64_t now_ms(std::uint64_t wall_ms, std::uint64_t mono_ns);

 private:
  std::uint64_t anchor_ms_ = 0;
  std::uint64_t anchor_mono_ns_ = 0;
};

struct SchedulerStats {
  std::uint64_t renewals = 0;
  std::uint64_t renew_failures = 0;
  std::uint64_t last_renew_ns = 0;
  std::uint64_t renew_ns_max = 0;
  // Writes that took stall_ms or longer (a frozen or failing disk, a hung etcd): recorded
  // after the fact too, so a stall that ended is still visible.
  std::uint64_t stalled_writes = 0;
  std::uint64_t clock_steps_back = 0;
  std::uint64_t clock_steps_forward = 0;
  std::int64_t last_clock_step_ms = 0;
  std::uint64_t ceiling_t = 0;    // the held (durable, published) ceiling
  std::uint64_t attempted_t = 0;  // the highest W ever asked for (acknowledged or not)
  std::uint64_t last_t_max = 0;   // highest time field any worker issued at
  std::uint64_t now_t = 0;        // wall clock, layout units
  std::uint64_t forward_t = 0;    // the forward clock (never back), layout units
  // Workers have issued up to the ceiling: demand is above what the layout can issue per
  // unit of time (or the ceiling is held by a failing write). Answered RETRY until time
  // catches up. `ceiling_reached_ticks` counts the ticks on which it was so.
  bool at_ceiling = false;
  std::uint64_t ceiling_reached_ticks = 0;
  std::string last_error;
};

// What the control socket and metrics show; a copy, taken without waiting for I/O.
struct SchedulerSnapshot {
  ServeState state = ServeState::starting;
  std::optional<DegradedCause> degraded;  // set when state is degraded
  std::string state_name;                 // to_string(state), or to_string(*degraded) when degraded
  bool healthy = false;                   // serving, able to issue, and no write hanging
  std::string cause;                      // why not healthy (empty when healthy)
  std::uint64_t pending_ms = 0;           // how long the current watermark write has been waiting
  SchedulerStats stats;
};

class WatermarkScheduler {
 public:
  // A wall-clock jump of more than this against the monotonic clock counts as a step.
  static constexpr std::int64_t clock_step_threshold_ms = 50;

  // `timings`: the lead and the periods derived from it (control/timings.h; flurryd's come from
  // Config::timings, a test's from Timings::of_lead).
  WatermarkScheduler(const proto::Layout& layout, const Timings& timings, Durability& durability,
                     core::Shared& shared, const Clock& clock);

  // Publishes the assignment (node id, floor = the durable watermark) and makes the first
  // watermark durable. Workers may be started before or after; they serve once the ceiling
  // is published. Fails if the first write failed (StatusCode::lost: fenced meanwhile), the
  // floor is at the layout's end, or the scheduler is draining.
  Status start(std::uint32_t node_id, std::uint64_t durable_watermark_t);

  // Renews when due. Call every tick_ms(), from the renew thread.
  void tick();

  // After a takeover was detected elsewhere (cluster mode): fence now. Any thread.
  void fence();
  // Operator's `drain`: stop issuing for good (GET_IDS answered FENCED, so clients move to
  // another server) before a planned stop. The held watermark stays durable; restart to serve.
  // Any thread.
  void drain();
  // Cluster mode after a re-claim: new node id and floor, then a fresh durable watermark.
  Status reassign(std::uint32_t node_id, std::uint64_t durable_watermark_t);

  std::uint32_t tick_ms() const { return timings_.tick_ms; }
  // How long a watermark write may hang before the node reports itself degraded.
  std::uint32_t stall_ms() const { return timings_.stall_ms; }
  ServeState state() const;
  // What a degraded scheduler waits for; nullopt when not degraded.
  std::optional<DegradedCause> degraded_cause() const;
  std::string state_name() const;
  SchedulerSnapshot snapshot() const;
  // Renew thread (or a test driving it) only.
  const SchedulerStats& stats() const { return stats_; }
  std::uint64_t lead_t() const { return policy_.lead_t; }

 private:
  bool renew(std::uint64_t forward_t);
  bool acknowledged_locked(std::uint64_t watermark_t);
  void publish_ceiling_locked(std::uint64_t watermark_t);
  void fence_ceiling_locked();
  void watch_clock(std::uint64_t wall_ms, std::uint64_t mono_ns);
  std::uint64_t worker_last_t_max() const;
  std::uint64_t forward_t(std::uint64_t wall_ms, std::uint64_t mono_ns);
  std::string state_name_locked() const;
  Status first_renew(std::uint64_t forward_t);

  proto::Layout layout_;
  Timings timings_;
  core::WatermarkPolicy policy_;
  Durability& durability_;
  core::Shared& shared_;
  const Clock& clock_;
  ForwardClock forward_clock_;

  mutable std::mutex mutex_;  // guards state_ and stats_ against snapshot() / fence() / drain()
  ServeState state_ = ServeState::starting;
  SchedulerStats stats_;
  std::uint64_t acknowledged_t_ = 0;                // highest W make_durable acknowledged
  std::atomic<std::uint64_t> pending_since_ns_{0};  // 0: no write in flight

  std::uint64_t previous_wall_ms_ = 0;
  std::uint64_t previous_mono_ns_ = 0;
  std::uint64_t last_failure_log_ns_ = 0;
};

}  // namespace flurry::control
