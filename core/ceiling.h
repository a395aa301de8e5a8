// core/ceiling.h — the issue ceiling shared by the control core and the workers, and the
// pure policy that picks the next watermark.
//
// The control core is the only writer. It stores a new ceiling only after that value is
// durable (DESIGN.md "The one invariant"); workers load it once per burst. A stale (lower)
// ceiling is safe for the assignment it was published for; core/assignment.h pairs the two.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace flurry::core {

// Ceiling value meaning "this node lost its node id": nothing may be issued, answer FENCED.
inline constexpr std::uint64_t ceiling_fenced = ~std::uint64_t{0};

struct alignas(64) Ceiling {
  // Time field (layout units) at or below which IDs may be issued. 0: nothing yet.
  std::atomic<std::uint64_t> value{0};

  void publish(std::uint64_t ceiling_t) { value.store(ceiling_t, std::memory_order_release); }
  void fence() { value.store(ceiling_fenced, std::memory_order_release); }
  // Acquire: a worker that sees a ceiling also sees the Assignment published before it
  // (see core::load_burst_ceiling). A plain load on x86.
  std::uint64_t load() const { return value.load(std::memory_order_acquire); }
};

struct WatermarkPolicy {
  std::uint64_t lead_t = 3000;  // how far ahead of time the ceiling is set
  std::uint64_t time_max = 0;   // the layout's largest time field

  // W = max(now, max last_t) + lead (DESIGN.md), never past the layout's end.
  std::uint64_t next_watermark(std::uint64_t now_t, std::uint64_t max_last_t) const {
    const std::uint64_t base = std::max(now_t, max_last_t);
    return std::min(base + lead_t, time_max);
  }

  // Renew when less than three quarters of the lead is left, i.e. about every lead/4 of
  // steady time, and sooner when cores borrow ahead of the clock.
  bool should_renew(std::uint64_t now_t, std::uint64_t max_last_t, std::uint64_t ceiling_t) const {
    const std::uint64_t base = std::max(now_t, max_last_t);
    if (ceiling_t >= time_max) return false;
    if (ceiling_t <= base) return true;
    // At least one unit of margin: with coarse units (1 s, lead 3 units) lead/4 is 0 and the
    // watermark would otherwise be rewritten on every tick.
    const std::uint64_t margin = std::max<std::uint64_t>(lead_t / 4, 1);
    return ceiling_t - base <= lead_t - margin;
  }
};

}  // namespace flurry::core
