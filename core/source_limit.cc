// core/source_limit.cc — see source_limit.h.
#include "core/source_limit.h"

#include <bit>

namespace flurry::core {

SourceLimitConfig source_limit_for(const proto::Layout& layout, std::uint32_t share_percent,
                                   std::uint32_t burst_ms, std::uint32_t entries) {
  SourceLimitConfig config;
  config.entries = entries;
  if (share_percent == 0) return config;
  // One slice's capacity: its counter's numbers per time unit, as many units a second.
  const std::uint64_t capacity_per_s = std::uint64_t{layout.counter_capacity()} * 1000 / layout.time_unit_ms;
  config.ids_per_s = std::max<std::uint64_t>(1, capacity_per_s * share_percent / 100);
  config.burst_ids = std::max<std::uint64_t>(1, config.ids_per_s * burst_ms / 1000);
  return config;
}

SourceLimit::SourceLimit(const SourceLimitConfig& config, SourceLimitStats& stats)
    : config_(config), stats_(stats) {
  const std::uint32_t entries =
      std::bit_ceil(std::clamp<std::uint32_t>(config.entries, entries_min, entries_max));
  const std::uint64_t sets = entries / ways;
  mask_ = sets - 1;
  set_shift_ = 64 - static_cast<unsigned>(std::countr_zero(sets));
  sets_ = std::make_unique<Set[]>(sets);
  config_.ids_per_s = std::max<std::uint64_t>(config.ids_per_s, 1);
  burst_ = std::max<std::uint64_t>(config.burst_ids, 1);
  config_.burst_ids = burst_;
  // The clock's step is capped so that its product with the rate never overflows, whatever
  // the wall clock does; the cap is far above the time any bucket takes to refill, a full one
  // or one that owes (at most 2^32 numbers above it: whole_or_owe).
  step_max_ms_ = (std::uint64_t{1} << 63) / config_.ids_per_s;
}

std::uint64_t SourceLimit::level(const Source& source, std::uint64_t now_ms) {
  advance(now_ms);
  const std::uint64_t tag = hash(source, config_.seed.data() + 5) | 1;
  const Set& set = sets_[hash(source, config_.seed.data()) >> set_shift_];
  for (const Entry& entry : set.way) {
    if (entry.tag != tag) continue;
    const std::uint64_t from = std::max(entry.tat, now_);
    return now_ + burst_ > from ? now_ + burst_ - from : 0;
  }
  return burst_;
}

}  // namespace flurry::core
