// control/scheduler.cc — see scheduler.h.
#include "control/scheduler.h"

#include <algorithm>

#include "base/invariant.h"
#include "base/log.h"

namespace flurry::control {

std::string_view to_string(ServeState state) {
  switch (state) {
    case ServeState::starting:
      return "starting";
    case ServeState::serving:
      return "serving";
    case ServeState::degraded:
      return "degraded";
    case ServeState::fenced:
      return "fenced";
    case ServeState::draining:
      return "draining";
    case ServeState::exhausted:
      return "exhausted";
  }
  return "unknown";
}

std::string_view to_string(DegradedCause cause) {
  switch (cause) {
    case DegradedCause::disk:
      return "degraded_disk";
    case DegradedCause::etcd:
      return "degraded_etcd";
  }
  return "degraded";
}

void ForwardClock::raise_to(std::uint64_t at_least_ms, std::uint64_t mono_ns) {
  if (now_ms(0, mono_ns) < at_least_ms) {
    anchor_ms_ = at_least_ms;
    anchor_mono_ns_ = mono_ns;
  }
}

std::uint64_t ForwardClock::now_ms(std::uint64_t wall_ms, std::uint64_t mono_ns) {
  // Carried from the anchor at monotonic pace; re-anchored whenever the wall clock is ahead.
  const std::uint64_t carried_ms =
      anchor_ms_ + (mono_ns > anchor_mono_ns_ ? (mono_ns - anchor_mono_ns_) / 1'000'000 : 0);
  if (wall_ms >= carried_ms) {
    anchor_ms_ = wall_ms;
    anchor_mono_ns_ = mono_ns;
    return wall_ms;
  }
  return carried_ms;
}

WatermarkScheduler::WatermarkScheduler(const proto::Layout& layout, const Timings& timings,
                                       Durability& durability, core::Shared& shared, const Clock& clock)
    : layout_(layout),
      timings_(timings),
      policy_{timings.lead_t, layout.time_max()},
      durability_(durability),
      shared_(shared),
      clock_(clock) {}

ServeState WatermarkScheduler::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

std::string WatermarkScheduler::state_name() const {
  std::lock_guard lock(mutex_);
  return state_name_locked();
}

std::optional<DegradedCause> WatermarkScheduler::degraded_cause() const {
  std::lock_guard lock(mutex_);
  if (state_ != ServeState::degraded) return std::nullopt;
  return durability_.failure_cause();
}

std::string WatermarkScheduler::state_name_locked() const {
  if (state_ == ServeState::degraded) return std::string(to_string(durability_.failure_cause()));
  return std::string(to_string(state_));
}

SchedulerSnapshot WatermarkScheduler::snapshot() const {
  SchedulerSnapshot out;
  {
    std::lock_guard lock(mutex_);
    out.state = state_;
    if (state_ == ServeState::degraded) out.degraded = durability_.failure_cause();
    out.state_name = state_name_locked();
    out.stats = stats_;
  }
  const std::uint64_t since_ns = pending_since_ns_.load(std::memory_order_acquire);
  const std::uint64_t now_ns = clock_.mono_ns();
  out.pending_ms = since_ns != 0 && now_ns > since_ns ? (now_ns - since_ns) / 1'000'000 : 0;
  const bool stalled = since_ns != 0 && out.pending_ms >= stall_ms();
  if (stalled && (out.state == ServeState::serving || out.state == ServeState::starting ||
                  out.state == ServeState::degraded)) {
    // A hanging write is a degraded state of its own kind: name the part being waited for.
    out.state = ServeState::degraded;
    out.degraded = durability_.pending_cause();
    out.state_name = std::string(to_string(*out.degraded));
    out.cause = "watermark write pending for " + std::to_string(out.pending_ms) + " ms";
  }
  const bool at_layout_end =
      out.stats.ceiling_t >= policy_.time_max && out.stats.last_t_max >= policy_.time_max;
  if (out.state == ServeState::serving && at_layout_end) {
    out.state = ServeState::exhausted;
    out.state_name = std::string(to_string(ServeState::exhausted));
  }
  out.healthy = out.state == ServeState::serving;
  if (!out.healthy && out.cause.empty()) {
    switch (out.state) {
      case ServeState::starting:
        out.cause = "no durable watermark yet";
        break;
      case ServeState::degraded:
        out.cause = out.stats.last_error;
        break;
      case ServeState::fenced:
        out.cause = "fenced: this node id is not held; nothing is issued";
        break;
      case ServeState::draining:
        out.cause = "draining: stopped issuing on the operator's request";
        break;
      case ServeState::exhausted:
        out.cause = "the layout's time range is used up: nothing can be issued under this layout";
        break;
      case ServeState::serving:
        break;
    }
  }
  return out;
}

std::uint64_t WatermarkScheduler::worker_last_t_max() const {
  std::uint64_t last_t_max = 0;
  for (const auto& worker : shared_.worker_stats()) {
    last_t_max = std::max(last_t_max, worker.last_t.load(std::memory_order_relaxed));
  }
  return last_t_max;
}

std::uint64_t WatermarkScheduler::forward_t(std::uint64_t wall_ms, std::uint64_t mono_ns) {
  return layout_.time_from_unix_ms(forward_clock_.now_ms(wall_ms, mono_ns));
}

Status WatermarkScheduler::start(std::uint32_t node_id, std::uint64_t durable_watermark_t) {
  previous_wall_ms_ = clock_.wall_ms();
  previous_mono_ns_ = clock_.mono_ns();
  return reassign(node_id, durable_watermark_t);
}

Status WatermarkScheduler::reassign(std::uint32_t node_id, std::uint64_t durable_watermark_t) {
  std::uint64_t first_t = 0;
  {
    std::lock_guard lock(mutex_);
    if (state_ == ServeState::draining) {
      return Error{"draining: stopped issuing on the operator's request", StatusCode::refused};
    }
    // Nothing may be issued while the workers switch: fence first, then publish.
    shared_.ceiling.fence();
    if (durable_watermark_t >= policy_.time_max) {
      state_ = ServeState::exhausted;
      stats_.last_error = "the durable watermark " + std::to_string(durable_watermark_t) +
                          " is at the end of the layout's time range (" + std::to_string(policy_.time_max) +
                          "): no ID can be issued above it; use a layout with more time bits or a later "
                          "epoch, under a new node id";
      return Error{stats_.last_error, StatusCode::refused};
    }
    stats_.ceiling_t = durable_watermark_t;
    for (auto& worker : shared_.worker_stats()) {
      worker.last_t.store(durable_watermark_t, std::memory_order_relaxed);
    }
    shared_.assignment.publish(node_id, durable_watermark_t, clock_.wall_ms());
    // The node id is held again: until its first watermark is durable, answer RETRY, not
    // FENCED. Safe because workers pair a ceiling with its assignment (load_burst_ceiling).
    shared_.ceiling.publish(0);
    // No longer fenced: a failed first write leaves the scheduler degraded, retrying each tick.
    state_ = ServeState::starting;
    // Workers start at floor + 1, so the forward clock resumes at floor + 1 - lead at the
    // earliest: the first ceiling is then floor + 1, and it rises at the pace of real time.
    // (Starting it at the wall clock would make a node whose floor lies ahead of the wall
    // clock — a clock stepped back across a restart — wait until the clock catches up.)
    first_t = durable_watermark_t + 1;
    const std::uint64_t resume_t = first_t > policy_.lead_t ? first_t - policy_.lead_t : 0;
    forward_clock_.raise_to(layout_.epoch_ms + resume_t * layout_.time_unit_ms, clock_.mono_ns());
  }
  return first_renew(forward_t(clock_.wall_ms(), clock_.mono_ns()));
}

Status WatermarkScheduler::first_renew(std::uint64_t forward_t) {
  if (renew(forward_t)) return {};
  std::lock_guard lock(mutex_);
  if (state_ == ServeState::fenced) {
    return Error{stats_.last_error.empty() ? "fenced" : "fenced: " + stats_.last_error, StatusCode::lost};
  }
  if (state_ == ServeState::draining) {
    return Error{"draining: stopped issuing on the operator's request", StatusCode::refused};
  }
  return Error{stats_.last_error, StatusCode::unavailable};
}

// A drained node keeps answering "draining" (FENCED, detail fenced_draining) when its node id
// is lost too: the operator's stop is what clients are told; either issues nothing.
void WatermarkScheduler::fence_ceiling_locked() {
  if (state_ == ServeState::draining) {
    shared_.ceiling.drain();
  } else {
    shared_.ceiling.fence();
  }
}

void WatermarkScheduler::fence() {
  std::lock_guard lock(mutex_);
  fence_ceiling_locked();
  if (state_ != ServeState::draining) state_ = ServeState::fenced;  // a drain is never undone
}

void WatermarkScheduler::drain() {
  std::lock_guard lock(mutex_);
  shared_.ceiling.drain();
  if (state_ != ServeState::draining) {
    log_info("draining: GET_IDS now answered FENCED; stop flurryd when clients moved");
  }
  state_ = ServeState::draining;
}

void WatermarkScheduler::publish_ceiling_locked(std::uint64_t watermark_t) {
  FLURRY_INVARIANT(watermark_t <= acknowledged_t_, "a ceiling published before it was durable");
  FLURRY_INVARIANT(state_ != ServeState::fenced && state_ != ServeState::draining,
                   "a ceiling published while fenced or draining");
  stats_.ceiling_t = watermark_t;
  shared_.ceiling.publish(watermark_t);
}

bool WatermarkScheduler::renew(std::uint64_t forward_t) {
  // Never below a W asked for before: a failed write may have landed locally (the store
  // refuses to go lower), and a clock that stepped back must never lower the watermark.
  const std::uint64_t watermark_t =
      std::max({policy_.next_watermark(forward_t), stats_.attempted_t, stats_.ceiling_t});
  FLURRY_INVARIANT(watermark_t >= stats_.attempted_t, "a renewal asked for a lower watermark");
  {
    std::lock_guard lock(mutex_);
    stats_.attempted_t = watermark_t;
  }
  const std::uint64_t started_ns = clock_.mono_ns();
  pending_since_ns_.store(std::max<std::uint64_t>(started_ns, 1), std::memory_order_release);
  const Status result = durability_.make_durable(watermark_t);
  const std::uint64_t took_ns = clock_.mono_ns() - started_ns;

  std::lock_guard lock(mutex_);
  stats_.last_renew_ns = took_ns;
  stats_.renew_ns_max = std::max(stats_.renew_ns_max, took_ns);
  if (took_ns >= std::uint64_t{stall_ms()} * 1'000'000) {
    ++stats_.stalled_writes;
    log_warn("{}: a watermark write took {} ms (stalled disk or etcd); the control socket stayed available",
             to_string(durability_.pending_cause()), took_ns / 1'000'000);
  }
  // The write is no longer pending only once it is counted: whoever sees the stall end (health
  // no longer degraded_disk) and then asks for the counters finds it in stalled_writes.
  pending_since_ns_.store(0, std::memory_order_release);
  if (result.ok()) return acknowledged_locked(watermark_t);
  ++stats_.renew_failures;
  stats_.last_error = result.message();
  if (result.code() == StatusCode::lost) {
    log_error("fenced: {}", result.message());
    fence_ceiling_locked();
    if (state_ != ServeState::draining) state_ = ServeState::fenced;
    return false;
  }
  if (state_ != ServeState::degraded || started_ns - last_failure_log_ns_ > 5'000'000'000ULL) {
    const std::uint64_t published = shared_.ceiling.load();
    const std::string_view cause = to_string(durability_.failure_cause());
    if (published == 0 || core::is_fenced(published)) {
      log_warn("{}: {}; nothing is served until a watermark is durable", cause, result.message());
    } else {
      log_warn("{}: {}; serving continues up to the held ceiling {}", cause, result.message(),
               stats_.ceiling_t);
    }
    last_failure_log_ns_ = started_ns;
  }
  if (state_ != ServeState::fenced && state_ != ServeState::draining) state_ = ServeState::degraded;
  return false;
}

// make_durable acknowledged `watermark_t`: publish it unless fenced or drained meanwhile.
bool WatermarkScheduler::acknowledged_locked(std::uint64_t watermark_t) {
  acknowledged_t_ = std::max(acknowledged_t_, watermark_t);
  ++stats_.renewals;
  if (state_ == ServeState::fenced || state_ == ServeState::draining) {
    // Fenced or drained while the write was in flight: only a reassign unfences.
    return false;
  }
  // Durable everywhere it must be: only now may the workers issue up to it.
  publish_ceiling_locked(watermark_t);
  if (state_ != ServeState::serving) {
    log_info("serving: ceiling {} ({}), lead {} ms", watermark_t,
             proto::format_unix_ms(layout_.epoch_ms + watermark_t * layout_.time_unit_ms), timings_.lead_ms);
  }
  state_ = ServeState::serving;
  return true;
}

void WatermarkScheduler::watch_clock(std::uint64_t wall_ms, std::uint64_t mono_ns) {
  const std::int64_t expected_ms = static_cast<std::int64_t>(previous_wall_ms_) +
                                   static_cast<std::int64_t>((mono_ns - previous_mono_ns_) / 1'000'000);
  const std::int64_t step_ms = static_cast<std::int64_t>(wall_ms) - expected_ms;
  if (step_ms < -clock_step_threshold_ms || step_ms > clock_step_threshold_ms) {
    {
      std::lock_guard lock(mutex_);
      if (step_ms < 0) {
        ++stats_.clock_steps_back;
      } else {
        ++stats_.clock_steps_forward;
      }
      stats_.last_clock_step_ms = step_ms;
    }
    log_warn(
        "wall clock stepped {} ms against the monotonic clock; IDs stay unique (the ceiling follows a "
        "clock that never runs backwards)",
        step_ms);
  }
  previous_wall_ms_ = wall_ms;
  previous_mono_ns_ = mono_ns;
}

void WatermarkScheduler::tick() {
  const std::uint64_t wall_ms = clock_.wall_ms();
  const std::uint64_t mono_ns = clock_.mono_ns();
  watch_clock(wall_ms, mono_ns);
  const std::uint64_t forward = forward_t(wall_ms, mono_ns);
  const std::uint64_t last_t_max = worker_last_t_max();
  ServeState state;
  bool due = false;
  {
    std::lock_guard lock(mutex_);
    stats_.now_t = layout_.time_from_unix_ms(wall_ms);
    stats_.forward_t = forward;
    stats_.last_t_max = last_t_max;
    stats_.at_ceiling = stats_.ceiling_t != 0 && last_t_max >= stats_.ceiling_t;
    if (stats_.at_ceiling) ++stats_.ceiling_reached_ticks;
    state = state_;
    due = policy_.should_renew(forward, stats_.ceiling_t, last_t_max);
  }
  if (state == ServeState::fenced || state == ServeState::draining || state == ServeState::exhausted) return;
  if (state == ServeState::degraded || state == ServeState::starting || due) renew(forward);
}

}  // namespace flurry::control
