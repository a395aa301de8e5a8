// core/generator.h — one core's slice of the ID space.
//
// Contract (docs/architecture.md, the invariant):
//   * time is passed in (layout units); the generator never reads a clock;
//   * `last_t` never decreases: a clock that steps back keeps issuing at `last_t`;
//   * a counter that runs out inside `t` borrows `t + 1`;
//   * nothing is issued with a time field above `ceiling_t` (nor above the layout's
//     time_max): such a request gets fewer IDs, or none, and never blocks;
//   * after start_above(floor_t) no ID with time field <= floor_t is issued.
// IDs of one core inside one time unit are consecutive integers, so a batch comes back as
// ranges (first, count). Single-threaded: one Generator per worker core. No allocation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "base/invariant.h"
#include "core/ceiling.h"
#include "proto/layout.h"
#include "proto/wire.h"

namespace flurry::core {

class Generator {
 public:
  Generator(const proto::Layout& layout, std::uint32_t node_id, std::uint32_t core)
      : base_(layout.compose(0, node_id, core, 0)),
        time_shift_(layout.node_bits + layout.sequence_bits),
        time_max_(layout.time_max()),
        capacity_(layout.counter_capacity()) {}

  // Nothing at or below floor_t will be issued (floor_t = the durable watermark).
  void start_above(std::uint64_t floor_t) {
    last_t_ = floor_t;
    counter_ = capacity_;  // exhausted: the next issue borrows floor_t + 1 at the earliest
  }

  struct Issued {
    std::uint32_t ids = 0;          // how many IDs were issued
    std::uint32_t range_count = 0;  // how many entries of `out` were written
  };

  // Issues up to `count` IDs into at most out.size() ranges.
  Issued issue(std::uint64_t now_t, std::uint64_t ceiling_t, std::uint32_t count,
               std::span<proto::Range> out) {
    Issued result;
    if (is_fenced(ceiling_t)) return result;  // fenced or draining: nothing, whoever calls
    const std::uint64_t limit_t = std::min(ceiling_t, time_max_);
    std::uint64_t t = last_t_;
    std::uint32_t counter = counter_;
    if (now_t > t) {
      t = now_t;
      counter = 0;
    }
    while (result.ids < count && result.range_count < out.size()) {
      if (counter == capacity_) {  // this unit is used up: borrow the next one
        ++t;
        counter = 0;
      }
      if (t > limit_t) break;
      FLURRY_INVARIANT(t <= ceiling_t && t <= time_max_, "an ID above the issue ceiling");
      FLURRY_INVARIANT(t >= last_t_, "a core's last_t decreased");
      const std::uint32_t n = std::min(count - result.ids, capacity_ - counter);
      out[result.range_count++] = proto::Range{(t << time_shift_) | base_ | counter, n};
      counter += n;
      result.ids += n;
      last_t_ = t;  // committed only when something was issued at t
      counter_ = counter;
    }
    return result;
  }

  // issue() of `count` IDs when they fit one range, for the DPDK fast path (dataplane/frame.h
  // PlainPath): true with *out exactly what issue() would have written as its only range, and
  // the same state after; false, with nothing issued and nothing changed, where issue() would
  // give several ranges, fewer IDs or none (the caller then calls issue()).
  bool issue_one_range(std::uint64_t now_t, std::uint64_t ceiling_t, std::uint32_t count, proto::Range* out) {
    if (is_fenced(ceiling_t)) return false;
    std::uint64_t t = last_t_;
    std::uint32_t counter = counter_;
    if (now_t > t) {
      t = now_t;
      counter = 0;
    }
    if (counter == capacity_) {  // this unit is used up: borrow the next one, as issue() does
      ++t;
      counter = 0;
    }
    if (t > std::min(ceiling_t, time_max_) || count > capacity_ - counter || count == 0) return false;
    FLURRY_INVARIANT(t >= last_t_, "a core's last_t decreased");
    *out = proto::Range{(t << time_shift_) | base_ | counter, count};
    last_t_ = t;
    counter_ = counter + count;
    return true;
  }

  std::uint64_t last_t() const { return last_t_; }

  // True when nothing can ever be issued again: the next free time unit, at `now_t` or after
  // the last one used, lies beyond the layout's time_max.
  bool exhausted(std::uint64_t now_t) const {
    const std::uint64_t next_t = now_t > last_t_ ? now_t : last_t_ + (counter_ == capacity_ ? 1 : 0);
    return next_t > time_max_;
  }

 private:
  std::uint64_t base_;  // node and core bits of every ID of this slice
  unsigned time_shift_;
  std::uint64_t time_max_;
  std::uint32_t capacity_;
  // Until start_above() is called, time 0 counts as used up, so a generator that was never
  // started can never issue at time 0 even under a ceiling of 0.
  std::uint64_t last_t_ = 0;
  std::uint32_t counter_ = capacity_;  // next counter value to issue at last_t_
};

}  // namespace flurry::core
