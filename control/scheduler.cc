// control/scheduler.cc — see scheduler.h.
#include "control/scheduler.h"

#include <algorithm>

#include "control/log.h"

namespace flurry::control {

std::string_view to_string(ServeState state) {
  switch (state) {
    case ServeState::starting: return "starting";
    case ServeState::serving: return "serving";
    case ServeState::degraded: return "degraded";
    case ServeState::fenced: return "fenced";
    case ServeState::draining: return "draining";
  }
  return "unknown";
}

WatermarkScheduler::WatermarkScheduler(const proto::Layout& layout, std::uint32_t lead_ms,
                                       Durability& durability, dataplane::Shared& shared,
                                       const Clock& clock)
    : layout_(layout),
      lead_ms_(lead_ms),
      policy_{std::max<std::uint64_t>(lead_ms / layout.time_unit_ms, 2), layout.time_max()},
      durability_(durability),
      shared_(shared),
      clock_(clock) {}

std::uint32_t WatermarkScheduler::tick_ms() const {
  return std::clamp<std::uint32_t>(lead_ms_ / 16, 1, 100);
}

std::string_view WatermarkScheduler::state_name() const {
  if (state_ == ServeState::degraded) return durability_.failure_state();
  return to_string(state_);
}

std::uint64_t WatermarkScheduler::max_worker_last_t() const {
  std::uint64_t max_last_t = 0;
  for (const auto& worker : shared_.worker_stats()) {
    max_last_t = std::max(max_last_t, worker.last_t.load(std::memory_order_relaxed));
  }
  return max_last_t;
}

bool WatermarkScheduler::start(std::uint32_t node_id, std::uint64_t durable_watermark_t,
                               std::string* error) {
  previous_wall_ms_ = clock_.wall_ms();
  previous_mono_ns_ = clock_.mono_ns();
  return reassign(node_id, durable_watermark_t, error);
}

bool WatermarkScheduler::reassign(std::uint32_t node_id, std::uint64_t durable_watermark_t,
                                  std::string* error) {
  if (state_ == ServeState::draining) {
    if (error != nullptr) *error = "draining";
    return false;
  }
  // Nothing may be issued while the workers switch: fence first, then publish.
  shared_.ceiling.fence();
  stats_.ceiling_t = durable_watermark_t;
  for (auto& worker : shared_.worker_stats()) {
    worker.last_t.store(durable_watermark_t, std::memory_order_relaxed);
  }
  shared_.assignment.publish(node_id, durable_watermark_t);
  // The node id is held again: until its first watermark is durable, answer RETRY, not
  // FENCED. Safe because workers pair a ceiling with its assignment (load_burst_ceiling).
  shared_.ceiling.publish(0);
  // No longer fenced: a failed first write leaves the scheduler degraded, retrying each tick.
  state_ = ServeState::starting;
  const std::uint64_t now_t = layout_.time_from_unix_ms(clock_.wall_ms());
  // Workers start above the floor, so the first ceiling must lie above it too.
  if (!renew(std::max(now_t, durable_watermark_t + 1), durable_watermark_t + 1)) {
    if (error != nullptr) *error = stats_.last_error;
    return false;
  }
  return true;
}

void WatermarkScheduler::fence() {
  shared_.ceiling.fence();
  if (state_ != ServeState::draining) state_ = ServeState::fenced;  // a drain is never undone
}

void WatermarkScheduler::drain() {
  shared_.ceiling.fence();
  if (state_ != ServeState::draining) log_info("draining: GET_IDS now answered FENCED; stop flurryd when clients moved");
  state_ = ServeState::draining;
}

bool WatermarkScheduler::renew(std::uint64_t now_t, std::uint64_t max_last_t) {
  // Never below the held ceiling: a clock that stepped back must not lower the watermark.
  const std::uint64_t watermark_t =
      std::max(policy_.next_watermark(now_t, max_last_t), stats_.ceiling_t);
  const std::uint64_t started_ns = clock_.mono_ns();
  std::string error;
  const DurableResult result = durability_.make_durable(watermark_t, &error);
  const std::uint64_t took_ns = clock_.mono_ns() - started_ns;
  stats_.last_renew_ns = took_ns;
  stats_.max_renew_ns = std::max(stats_.max_renew_ns, took_ns);
  switch (result) {
    case DurableResult::ok:
      // Durable everywhere it must be: only now may the workers issue up to it.
      stats_.ceiling_t = watermark_t;
      shared_.ceiling.publish(watermark_t);
      ++stats_.renewals;
      if (state_ != ServeState::serving) {
        log_info("serving: ceiling {} ({}), lead {} ms", watermark_t,
                 proto::format_unix_ms(layout_.epoch_ms + watermark_t * layout_.time_unit_ms), lead_ms_);
      }
      state_ = ServeState::serving;
      return true;
    case DurableResult::failed: {
      ++stats_.renew_failures;
      stats_.last_error = error;
      if (state_ != ServeState::degraded || started_ns - last_failure_log_ns_ > 5'000'000'000ULL) {
        if (shared_.ceiling.load() == 0 || shared_.ceiling.load() == core::ceiling_fenced) {
          log_warn("{}: {}; nothing is served until a watermark is durable", durability_.failure_state(), error);
        } else {
          log_warn("{}: {}; serving continues up to the held ceiling {}", durability_.failure_state(), error,
                   stats_.ceiling_t);
        }
        last_failure_log_ns_ = started_ns;
      }
      if (state_ != ServeState::fenced) state_ = ServeState::degraded;
      return false;
    }
    case DurableResult::lost:
      ++stats_.renew_failures;
      stats_.last_error = error;
      log_error("fenced: {}", error);
      fence();
      return false;
  }
  return false;
}

void WatermarkScheduler::watch_clock() {
  const std::uint64_t wall_ms = clock_.wall_ms();
  const std::uint64_t mono_ns = clock_.mono_ns();
  const std::int64_t expected_ms = static_cast<std::int64_t>(previous_wall_ms_) +
                                   static_cast<std::int64_t>((mono_ns - previous_mono_ns_) / 1'000'000);
  const std::int64_t step_ms = static_cast<std::int64_t>(wall_ms) - expected_ms;
  if (step_ms < -clock_step_threshold_ms || step_ms > clock_step_threshold_ms) {
    if (step_ms < 0) {
      ++stats_.clock_steps_back;
    } else {
      ++stats_.clock_steps_forward;
    }
    stats_.last_clock_step_ms = step_ms;
    log_warn("wall clock stepped {} ms against the monotonic clock; IDs stay unique (last_t never decreases)",
             step_ms);
  }
  previous_wall_ms_ = wall_ms;
  previous_mono_ns_ = mono_ns;
}

void WatermarkScheduler::tick() {
  watch_clock();
  const std::uint64_t now_t = layout_.time_from_unix_ms(clock_.wall_ms());
  const std::uint64_t max_last_t = max_worker_last_t();
  stats_.now_t = now_t;
  stats_.max_last_t = max_last_t;
  if (state_ == ServeState::fenced || state_ == ServeState::draining) return;
  if (state_ == ServeState::degraded || policy_.should_renew(now_t, max_last_t, stats_.ceiling_t)) {
    renew(now_t, max_last_t);
  }
}

}  // namespace flurry::control
