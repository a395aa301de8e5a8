// proto/layout.cc — parsing, validation and description of ID layouts (start-up only).
#include "proto/layout.h"

#include <charconv>
#include <cstdio>
#include <ctime>

namespace flurry::proto {
namespace {

std::optional<unsigned> parse_unsigned(std::string_view text) {
  unsigned value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::uint64_t Layout::fingerprint() const {
  // FNV-1a over the fields, in a fixed order. Stable across builds and hosts.
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  auto mix = [&hash](std::uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      hash ^= (value >> (8 * i)) & 0xff;
      hash *= 0x100000001b3ULL;
    }
  };
  mix(time_bits);
  mix(node_bits);
  mix(sequence_bits);
  mix(core_bits);
  mix(static_cast<std::uint64_t>(core_from));
  mix(epoch_ms);
  mix(time_unit_ms);
  return hash;
}

std::optional<Layout> layout_preset(std::string_view name) {
  if (name == "snowflake") return Layout{};
  if (name == "js-safe") {
    Layout layout;
    layout.time_bits = 37;
    layout.node_bits = 5;
    layout.sequence_bits = 11;
    layout.time_unit_ms = 10;
    return layout;
  }
  return std::nullopt;
}

flurry::Result<Layout> parse_layout(std::string_view text) {
  if (auto preset = layout_preset(text)) return *preset;
  const auto first = text.find('/');
  const auto second = first == std::string_view::npos ? first : text.find('/', first + 1);
  if (second == std::string_view::npos) {
    return Error{"layout '" + std::string(text) +
                 "' is not one of snowflake, js-safe or TIME/NODE/SEQUENCE widths such as 41/10/12"};
  }
  auto time_bits = parse_unsigned(text.substr(0, first));
  auto node_bits = parse_unsigned(text.substr(first + 1, second - first - 1));
  auto sequence_bits = parse_unsigned(text.substr(second + 1));
  if (!time_bits || !node_bits || !sequence_bits) {
    return Error{"layout '" + std::string(text) + "': each width must be a whole number, as in 41/10/12"};
  }
  Layout layout;
  layout.time_bits = *time_bits;
  layout.node_bits = *node_bits;
  layout.sequence_bits = *sequence_bits;
  return layout;
}

unsigned core_bits_for(unsigned workers) {
  unsigned bits = 0;
  while ((1U << bits) < workers) ++bits;
  return bits;
}

std::uint64_t layout_end_unix_ms(const Layout& layout) {
  return layout.epoch_ms + (layout.time_max() + 1) * layout.time_unit_ms - 1;
}

flurry::Status validate(const Layout& layout, std::uint32_t node_id, std::uint64_t now_unix_ms) {
  const unsigned total = layout.time_bits + layout.node_bits + layout.sequence_bits;
  if (layout.time_bits == 0 || layout.sequence_bits == 0 || layout.time_bits > 50 || layout.node_bits > 16 ||
      layout.sequence_bits > 31) {
    return Error{"layout widths must be time 1..50, node 0..16, sequence 1..31 bits"};
  }
  if (total > id_bits_max) {
    return Error{"layout widths sum to " + std::to_string(total) +
                 " bits; time + node + sequence must be at most 63 so IDs stay positive"};
  }
  if (layout.time_unit_ms != 1 && layout.time_unit_ms != 10 && layout.time_unit_ms != 1000) {
    return Error{"time unit " + std::to_string(layout.time_unit_ms) +
                 " ms is not allowed; use 1, 10 or 1000"};
  }
  if (layout.core_bits > 31) {
    return Error{std::to_string(layout.core_bits) + " core bits are more than 31; use fewer workers"};
  }
  const unsigned core_source_bits =
      layout.core_from == CoreBitsFrom::sequence ? layout.sequence_bits : layout.node_bits;
  // From the sequence, keep at least one counter bit; from the node field, the node id may be
  // zero bits wide.
  const unsigned core_room =
      layout.core_from == CoreBitsFrom::sequence ? core_source_bits - 1 : core_source_bits;
  if (layout.core_bits > core_room) {
    return Error{"the " + std::to_string(1U << layout.core_bits) + " workers need " +
                 std::to_string(layout.core_bits) + " core bits but the " +
                 (layout.core_from == CoreBitsFrom::sequence ? "sequence" : "node") + " field has " +
                 std::to_string(core_source_bits) + "; use fewer workers or a wider field"};
  }
  // time_bits <= 50 and unit <= 1000 ms: no overflow.
  const std::uint64_t range_ms = (layout.time_max() + 1) * layout.time_unit_ms;
  if (range_ms < time_range_min_ms) {
    return Error{"a " + std::to_string(layout.time_bits) + "-bit time field of " +
                 std::to_string(layout.time_unit_ms) + " ms units covers " +
                 std::to_string(range_ms / 86'400'000ULL / 365) +
                 " years; at least 30 are required (widen the time field or use a coarser unit)"};
  }
  if (layout.epoch_ms > now_unix_ms) {
    return Error{"epoch " + format_unix_ms(layout.epoch_ms) + " is in the future; pick an epoch in the past"};
  }
  if (layout_end_unix_ms(layout) <= now_unix_ms) {
    return Error{"layout ran out at " + format_unix_ms(layout_end_unix_ms(layout)) +
                 "; pick a later epoch or a wider time field"};
  }
  if (node_id > layout.node_id_max()) {
    return Error{"node id " + std::to_string(node_id) + " does not fit the layout's " +
                 std::to_string(layout.node_id_bits()) + " node bits (largest is " +
                 std::to_string(layout.node_id_max()) + ")"};
  }
  return {};
}

std::optional<std::uint64_t> parse_epoch(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text.find('-') == std::string_view::npos) {
    std::uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || ptr != text.data() + text.size()) return std::nullopt;
    return value;
  }
  std::tm tm{};
  const std::string owned(text);
  const char* end = strptime(owned.c_str(), "%Y-%m-%d", &tm);
  if (end == nullptr) return std::nullopt;
  if (*end == 'T') {
    end = strptime(end + 1, "%H:%M:%S", &tm);
    if (end == nullptr) return std::nullopt;
    if (*end == 'Z') ++end;
  }
  if (*end != '\0') return std::nullopt;
  const std::time_t seconds = timegm(&tm);
  if (seconds < 0) return std::nullopt;
  return static_cast<std::uint64_t>(seconds) * 1000;
}

std::string describe(const Layout& layout) {
  std::string text = std::to_string(layout.time_bits) + "/" + std::to_string(layout.node_bits) + "/" +
                     std::to_string(layout.sequence_bits);
  text += " (core bits " + std::to_string(layout.core_bits) + " from " +
          (layout.core_from == CoreBitsFrom::sequence ? "sequence" : "node") + ")";
  text += ", unit " + std::to_string(layout.time_unit_ms) + " ms";
  text += ", epoch " + format_unix_ms(layout.epoch_ms);
  text += ", runs out " + format_unix_ms(layout_end_unix_ms(layout));
  return text;
}

bool same_id_space(const Layout& a, const Layout& b) {
  if (a.time_bits != b.time_bits || a.node_bits != b.node_bits || a.sequence_bits != b.sequence_bits ||
      a.epoch_ms != b.epoch_ms || a.time_unit_ms != b.time_unit_ms || a.core_from != b.core_from) {
    return false;
  }
  // Core bits in the node field change which node field a node id uses: not the same space.
  return a.core_from == CoreBitsFrom::sequence || a.core_bits == b.core_bits;
}

std::optional<std::uint64_t> carry_watermark(const Layout& from, std::uint64_t from_watermark_t,
                                             const Layout& to) {
  __extension__ typedef unsigned __int128 u128;  // shifts of up to 63 + 63 bits
  const unsigned from_shift = from.node_bits + from.sequence_bits;
  const unsigned to_shift = to.node_bits + to.sequence_bits;
  // Every ID `from` could issue at or below from_watermark_t is below this bound.
  const u128 old_bound = (u128{from_watermark_t} + 1) << from_shift;
  // The first time field of `to` whose every ID is at or above the bound.
  const u128 first_t = (old_bound + (u128{1} << to_shift) - 1) >> to_shift;
  if (first_t > u128{to.time_max()}) return std::nullopt;
  return first_t == 0 ? 0 : static_cast<std::uint64_t>(first_t - 1);
}

}  // namespace flurry::proto
