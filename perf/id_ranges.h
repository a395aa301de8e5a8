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
//   * count_duplicate_ids_parallel (perf/id_ranges.cc, oneTBB) gives the same figure with the
//     sort and the sweep spread over the cores, for the 10^8-10^9 IDs of a long run on a
//     many-core benchmark host: the tools call it; the serial one stays as its reference.
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

// The order both checkers sort spans in: by first ID, then by count.
constexpr bool span_before(const IdSpan& a, const IdSpan& b) {
  return a.first != b.first ? a.first < b.first : a.count < b.count;
}

// The IDs of sorted spans [begin, end) already covered by an earlier span, given `reach`, the
// furthest end of the spans before `begin` (0: none). Spans sorted by first: every earlier span
// starts at or before this one, so the IDs of this span already seen are exactly
// [first, min(end, reach)), where reach is the furthest end so far. (reach 0 counts nothing:
// no span starts below 0.) Returns the duplicates; *reach_out is the furthest end after them.
inline std::uint64_t sweep_sorted(const IdSpan* begin, const IdSpan* end, std::uint64_t reach,
                                  std::uint64_t* reach_out) {
  std::uint64_t duplicates = 0;
  for (const IdSpan* span = begin; span != end; ++span) {
    const std::uint64_t span_last = span_end(*span);
    if (reach > span->first) duplicates += std::min(reach, span_last) - span->first;
    reach = std::max(reach, span_last);
  }
  *reach_out = reach;
  return duplicates;
}

// Sorts `spans` by first ID and counts the IDs covered more than once, on one thread.
inline std::uint64_t count_duplicate_ids(std::span<IdSpan> spans) {
  std::sort(spans.begin(), spans.end(), span_before);
  std::uint64_t reach = 0;
  return sweep_sorted(spans.data(), spans.data() + spans.size(), 0, &reach);
}

// The same result, sorted with tbb::parallel_sort and swept in parallel: each chunk of the
// sorted spans finds its furthest end, a prefix maximum over the chunks gives each chunk the
// reach of everything before it, and the chunks then sweep side by side (perf/id_ranges.cc).
// `threads` 0: oneTBB's default (every core the process may use).
std::uint64_t count_duplicate_ids_parallel(std::span<IdSpan> spans, unsigned threads = 0);

}  // namespace flurry::perf
