// proto/layout.h — the bit layout of a flurry ID.
//
// Contract: an ID is `0 | time | node | sequence` (most significant first), where the
// sequence field is `[core | counter]` (core bits carved from the top of the sequence, the
// default) or the node field is `[node | core]` (core bits carved from the bottom of the
// node field). Every width, the epoch and the time unit are data; a Layout is validated once
// at start (`validate`) and is immutable afterwards. Pure C++: no I/O, no allocation except
// in `parse_layout`, `describe` and `validate` (start-up only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/time_text.h"

namespace flurry::proto {

// Where the per-core bits come from (proto/PROTOCOL.md "The ID").
enum class CoreBitsFrom : std::uint8_t { sequence = 0, node = 1 };

// 2024-01-01T00:00:00Z in Unix milliseconds, the default epoch.
inline constexpr std::uint64_t default_epoch_ms = 1'704'067'200'000ULL;
// A layout must cover at least this much time from its epoch.
inline constexpr std::uint64_t time_range_min_ms = 30ULL * 36'525ULL * 86'400'000ULL / 100ULL;
inline constexpr unsigned id_bits_max = 63;  // the sign bit stays 0

struct Decoded {
  std::uint64_t time = 0;     // time field, in layout units since the epoch
  std::uint64_t unix_ms = 0;  // the same instant as Unix milliseconds
  std::uint32_t node = 0;
  std::uint32_t core = 0;
  std::uint32_t counter = 0;
};

struct Layout {
  unsigned time_bits = 41;
  unsigned node_bits = 10;
  unsigned sequence_bits = 12;
  unsigned core_bits = 0;  // set from the worker count at start: 2^core_bits >= workers
  CoreBitsFrom core_from = CoreBitsFrom::sequence;
  std::uint64_t epoch_ms = default_epoch_ms;
  std::uint32_t time_unit_ms = 1;  // 1, 10 or 1000

  // Derived limits. Valid only for a layout that passed validate().
  constexpr std::uint64_t time_max() const { return (std::uint64_t{1} << time_bits) - 1; }
  constexpr unsigned node_id_bits() const {
    return core_from == CoreBitsFrom::node ? node_bits - core_bits : node_bits;
  }
  constexpr unsigned counter_bits() const {
    return core_from == CoreBitsFrom::sequence ? sequence_bits - core_bits : sequence_bits;
  }
  // Largest node id an operator may configure.
  constexpr std::uint32_t node_id_max() const {
    return static_cast<std::uint32_t>((std::uint64_t{1} << node_id_bits()) - 1);
  }
  constexpr std::uint32_t core_count_max() const { return std::uint32_t{1} << core_bits; }
  // IDs one core can issue inside one time unit.
  constexpr std::uint32_t counter_capacity() const {
    return static_cast<std::uint32_t>(std::uint64_t{1} << counter_bits());
  }

  constexpr std::uint64_t compose(std::uint64_t time, std::uint32_t node, std::uint32_t core,
                                  std::uint32_t counter) const {
    std::uint64_t node_field = 0;
    std::uint64_t sequence_field = 0;
    if (core_from == CoreBitsFrom::sequence) {
      node_field = node;
      sequence_field = (std::uint64_t{core} << counter_bits()) | counter;
    } else {
      node_field = (std::uint64_t{node} << core_bits) | core;
      sequence_field = counter;
    }
    return (time << (node_bits + sequence_bits)) | (node_field << sequence_bits) | sequence_field;
  }

  constexpr Decoded decode(std::uint64_t id) const {
    Decoded d;
    const std::uint64_t sequence_field = id & ((std::uint64_t{1} << sequence_bits) - 1);
    const std::uint64_t node_field = (id >> sequence_bits) & ((std::uint64_t{1} << node_bits) - 1);
    d.time = (id >> (node_bits + sequence_bits)) & time_max();
    d.unix_ms = epoch_ms + d.time * time_unit_ms;
    const std::uint64_t core_mask = (std::uint64_t{1} << core_bits) - 1;
    if (core_from == CoreBitsFrom::sequence) {
      d.node = static_cast<std::uint32_t>(node_field);
      d.core = static_cast<std::uint32_t>((sequence_field >> counter_bits()) & core_mask);
      d.counter = static_cast<std::uint32_t>(sequence_field & ((std::uint64_t{1} << counter_bits()) - 1));
    } else {
      d.node = static_cast<std::uint32_t>(node_field >> core_bits);
      d.core = static_cast<std::uint32_t>(node_field & core_mask);
      d.counter = static_cast<std::uint32_t>(sequence_field);
    }
    return d;
  }

  // Time field for a Unix-millisecond wall clock reading (0 before the epoch).
  constexpr std::uint64_t time_from_unix_ms(std::uint64_t unix_ms) const {
    return unix_ms <= epoch_ms ? 0 : (unix_ms - epoch_ms) / time_unit_ms;
  }

  // A 64-bit fingerprint of every field that changes the meaning of an ID; stored beside the
  // watermark so that a state directory is never reused under another layout.
  std::uint64_t fingerprint() const;

  friend constexpr bool operator==(const Layout&, const Layout&) = default;
};

// Named layouts:
//   "snowflake" — 41 time (1 ms) / 10 node / 12 sequence: Twitter-compatible, the default.
//   "js-safe"   — 37 time (10 ms) / 5 node / 11 sequence = 53 bits: every ID < 2^53, so it
//                 survives a JavaScript number; 43 years of range, 204,800 IDs/s per node.
// Or "T/N/S" with explicit widths, e.g. "40/12/11".
std::optional<Layout> layout_preset(std::string_view name);

// Parses "snowflake", "js-safe" or "T/N/S"; fails saying what is wrong.
flurry::Result<Layout> parse_layout(std::string_view text);

// Smallest k with 2^k >= workers (workers >= 1).
unsigned core_bits_for(unsigned workers);

// Checks a layout and the node id that will use it; fails with one sentence that says what
// is wrong and how to fix it. `now_unix_ms` is used to
// refuse an epoch in the future and a layout that has already run out.
flurry::Status validate(const Layout& layout, std::uint32_t node_id, std::uint64_t now_unix_ms);

// The same IDs in numbers: equal but for the worker count when core bits come from the
// sequence field (the core split of the sequence changes no ID's place above or below another
// time unit). A state dir carries over between two such layouts unchanged.
bool same_id_space(const Layout& a, const Layout& b);

// A layout change under an existing watermark (flurryd --accept-state-change). Returns the
// smallest watermark W of `to` such that every ID `to` issues at a time field >= W + 1 is
// numerically above every ID `from` could have issued at a time field <= from_watermark_t, for
// any node id and core: every old ID is below (from_watermark_t + 1) << (from's node + sequence
// bits), every new one at or above (W + 1) << (to's). nullopt when W + 1 lies beyond `to`'s
// time range (the change cannot be carried: keep the layout, or use a new node id).
std::optional<std::uint64_t> carry_watermark(const Layout& from, std::uint64_t from_watermark_t,
                                             const Layout& to);

// Unix milliseconds of the last instant the layout can represent.
std::uint64_t layout_end_unix_ms(const Layout& layout);

// One line, e.g. "41/10/12 (core bits 1 from sequence), unit 1 ms, epoch 2024-01-01T00:00:00Z,
// runs out 2093-09-06T15:47:35.551Z".
std::string describe(const Layout& layout);

// ISO-8601 UTC text for Unix milliseconds, e.g. "2024-01-01T00:00:00.000Z" (base/time_text.h).
using ::flurry::format_unix_ms;

// Parses an epoch given as Unix milliseconds ("1704067200000") or an ISO-8601 UTC date
// ("2024-01-01" or "2024-01-01T00:00:00Z").
std::optional<std::uint64_t> parse_epoch(std::string_view text);

}  // namespace flurry::proto
