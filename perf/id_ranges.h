// perf/id_ranges.h — the duplicate check of flurry-bench: IDs kept as ranges, never expanded.
//
// Contract:
//   * IdRanges::add keeps IDs as [first, first + count) spans; a span that starts where the
//     previous one ended is merged into it, so a server handing out consecutive IDs costs one
//     span, not one per answer. Merging only joins disjoint neighbours, so it hides no
//     duplicate.
//   * count_duplicate_ids sorts the spans and returns how many IDs occur more than once,
//     counted with multiplicity (an ID received three times counts 2): the same figure as
//     expanding every ID, sorting and removing the unique ones, in O(spans log spans) time
//     and no memory beyond the spans.
//   * Ranges come from the network (untrusted): a span that would run past 2^64 - 1 is cut
//     there instead of wrapping; nothing here asserts on input.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace flurry::perf {

struct IdSpan {
  std::uint64_t first = 0;
  std::uint64_t count = 0;
  friend constexpr bool operator==(const IdSpan&, const IdSpan&) = default;
};

// One past the last ID of `span`, saturated at 2^64 - 1.
constexpr std::uint64_t span_end(const IdSpan& span) {
  const std::uint64_t room = std::numeric_limits<std::uint64_t>::max() - span.first;
  return span.count > room ? std::numeric_limits<std::uint64_t>::max() : span.first + span.count;
}

class IdRanges {
 public:
  void reserve(std::size_t spans) { spans_.reserve(spans); }

  void add(std::uint64_t first, std::uint64_t count) {
    if (count == 0) return;
    ids_ += count;
    if (!spans_.empty() && span_end(spans_.back()) == first &&
        spans_.back().count <= std::numeric_limits<std::uint64_t>::max() - count) {
      spans_.back().count += count;
      return;
    }
    spans_.push_back({first, count});
  }

  void append(const IdRanges& other) {
    spans_.insert(spans_.end(), other.spans_.begin(), other.spans_.end());
    ids_ += other.ids_;
  }

  std::uint64_t ids() const { return ids_; }  // every ID added, duplicates included
  std::vector<IdSpan>& spans() { return spans_; }

 private:
  std::vector<IdSpan> spans_;
  std::uint64_t ids_ = 0;
};

// Sorts `spans` by first ID and counts the IDs covered more than once. Spans sorted by first:
// every earlier span starts at or before this one, so the IDs of this span already seen are
// exactly [first, min(end, reach)), where reach is the furthest end so far.
inline std::uint64_t count_duplicate_ids(std::span<IdSpan> spans) {
  std::sort(spans.begin(), spans.end(), [](const IdSpan& a, const IdSpan& b) {
    return a.first != b.first ? a.first < b.first : a.count < b.count;
  });
  std::uint64_t duplicates = 0;
  std::uint64_t reach = 0;
  bool any = false;
  for (const IdSpan& span : spans) {
    const std::uint64_t end = span_end(span);
    if (any && reach > span.first) duplicates += std::min(reach, end) - span.first;
    reach = any ? std::max(reach, end) : end;
    any = true;
  }
  return duplicates;
}

}  // namespace flurry::perf
