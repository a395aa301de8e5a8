// core/ceiling.h — the issue ceiling shared by its writers (flurry-renew, flurryd's main thread) and
// the workers, and the pure policy that picks the next watermark.
//
// Writers, all through control::WatermarkScheduler under its mutex: the renew thread (flurry-renew)
// publishes each new ceiling and fences on `lost`; flurryd's main thread publishes the first one at
// start and, as the control loop, drains and fences on lease expiry. A ceiling is stored only once
// durable (docs/architecture.md, the invariant); workers load it once per burst. A stale (lower)
// ceiling is safe for the assignment it was published for; core/assignment.h pairs the two.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace flurry::core {

// Ceiling values that stop every issue, answered FENCED: "this node holds no node id" (lost,
// or not claimed yet), and "drained by its operator" (FENCED with detail fenced_draining, so a
// client names a planned stop as one). Both lie above any time field (a layout's time_max is
// below 2^63); is_fenced() is the one test for either.
inline constexpr std::uint64_t ceiling_fenced = ~std::uint64_t{0};
inline constexpr std::uint64_t ceiling_draining = ~std::uint64_t{0} - 1;
constexpr bool is_fenced(std::uint64_t ceiling_t) { return ceiling_t >= ceiling_draining; }

struct alignas(64) Ceiling {
  // Time field (layout units) at or below which IDs may be issued. 0: nothing yet.
  std::atomic<std::uint64_t> value{0};

  void publish(std::uint64_t ceiling_t) { value.store(ceiling_t, std::memory_order_release); }
  void fence() { value.store(ceiling_fenced, std::memory_order_release); }
  void drain() { value.store(ceiling_draining, std::memory_order_release); }
  // Acquire: a worker that sees a ceiling also sees the Assignment published before it
  // (see core::load_burst_ceiling). A plain load on x86.
  std::uint64_t load() const { return value.load(std::memory_order_acquire); }
};

struct WatermarkPolicy {
  std::uint64_t lead_t = 3000;  // how far ahead of time the ceiling is set
  std::uint64_t time_max = 0;   // the layout's largest time field

  // W = forward clock + lead (docs/architecture.md, the invariant), never past the layout's end.
  // `forward_t` is a clock that never runs backwards, never the cores' borrowed time: a core
  // that borrows can get at most `lead` ahead of it.
  std::uint64_t next_watermark(std::uint64_t forward_t) const {
    return std::min(forward_t + lead_t, time_max);
  }

  // Renew when less than three quarters of the lead is left (about every lead/4), and on
  // every tick that can raise the ceiling while the cores are within that quarter of it (after
  // a restart they start at the floor, right under the first ceiling; under overload they sit
  // at it), so the ceiling follows the clock closely where it matters.
  bool should_renew(std::uint64_t forward_t, std::uint64_t ceiling_t, std::uint64_t last_t_max) const {
    if (ceiling_t >= time_max) return false;
    const std::uint64_t next = next_watermark(forward_t);
    if (next <= ceiling_t) return false;
    // At least one unit of margin: with coarse units (1 s, lead 3 units) lead/4 is 0 and the
    // watermark would otherwise be rewritten on every tick.
    const std::uint64_t margin = std::max<std::uint64_t>(lead_t / 4, 1);
    return next - ceiling_t >= margin || last_t_max + margin >= ceiling_t;
  }
};

}  // namespace flurry::core
