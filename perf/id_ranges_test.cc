// perf/id_ranges_test.cc — flurry-bench's duplicate check (perf/id_ranges.h): the overlap
// count equals expanding every ID and counting the repeats, and it does fail on duplicates.
#include "perf/id_ranges.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>

namespace flurry::perf {
namespace {

std::uint64_t duplicates_of(IdRanges& ranges) { return count_duplicate_ids(ranges.spans()); }

// The definition: every ID written out, sorted, minus the distinct ones.
std::uint64_t expanded_duplicates(const std::vector<IdSpan>& spans) {
  std::vector<std::uint64_t> ids;
  for (const IdSpan& span : spans) {
    for (std::uint64_t k = 0; k < span.count; ++k) ids.push_back(span.first + k);
  }
  std::sort(ids.begin(), ids.end());
  return ids.size() - static_cast<std::size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

TEST(IdRanges, DisjointRangesHaveNoDuplicates) {
  IdRanges ranges;
  ranges.add(100, 100);
  ranges.add(0, 100);
  ranges.add(300, 1);
  EXPECT_EQ(duplicates_of(ranges), 0u);
  EXPECT_EQ(ranges.ids(), 201u);
}

TEST(IdRanges, TheSameRangeTwiceIsCaught) {
  IdRanges ranges;
  ranges.add(1000, 100);
  ranges.add(1000, 100);
  EXPECT_EQ(duplicates_of(ranges), 100u);
}

TEST(IdRanges, OneSharedIdIsCaught) {
  IdRanges ranges;
  ranges.add(0, 100);
  ranges.add(99, 100);
  EXPECT_EQ(duplicates_of(ranges), 1u);
}

TEST(IdRanges, AnIdThreeTimesCountsTwice) {
  IdRanges ranges;
  for (int i = 0; i < 3; ++i) ranges.add(7, 1);
  EXPECT_EQ(duplicates_of(ranges), 2u);
}

TEST(IdRanges, ARangeInsideAnotherIsCaught) {
  IdRanges ranges;
  ranges.add(0, 10);
  ranges.add(2, 2);
  ranges.add(3, 5);
  EXPECT_EQ(duplicates_of(ranges), 7u);  // 2 twice, 3 three times, 4..7 twice
}

TEST(IdRanges, AdjacentRangesMergeIntoOneSpan) {
  IdRanges ranges;
  for (std::uint64_t first = 0; first < 1000; first += 100) ranges.add(first, 100);
  EXPECT_EQ(ranges.spans().size(), 1u);
  EXPECT_EQ(ranges.ids(), 1000u);
  ranges.add(500, 1);  // not adjacent: kept apart, and a duplicate
  EXPECT_EQ(ranges.spans().size(), 2u);
  EXPECT_EQ(duplicates_of(ranges), 1u);
}

TEST(IdRanges, AppendKeepsEveryThreadsRanges) {
  IdRanges a, b;
  a.add(0, 50);
  b.add(25, 50);
  a.append(b);
  EXPECT_EQ(a.ids(), 100u);
  EXPECT_EQ(duplicates_of(a), 25u);
}

TEST(IdRanges, EmptyAndZeroCountAreNothing) {
  IdRanges ranges;
  EXPECT_EQ(duplicates_of(ranges), 0u);
  ranges.add(5, 0);
  EXPECT_EQ(ranges.spans().size(), 0u);
}

TEST(IdRanges, RangesAtTheTopOfTheIdSpaceDoNotWrap) {
  const std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
  IdRanges ranges;
  ranges.add(top - 10, 100);  // runs past 2^64 - 1: cut there
  ranges.add(0, 5);           // would overlap if the first one wrapped
  EXPECT_EQ(duplicates_of(ranges), 0u);
  ranges.add(top - 5, 2);
  EXPECT_EQ(duplicates_of(ranges), 2u);
}

// Seeded: the overlap count agrees with the expanded definition on random small ranges.
TEST(IdRanges, AgreesWithExpandingEveryId) {
  std::uint32_t seed = 0x5eed;
  if (const char* env = std::getenv("FLURRY_TEST_SEED"))
    seed = static_cast<std::uint32_t>(std::strtoul(env, nullptr, 0));
  std::printf("seed %u (replay: FLURRY_TEST_SEED=%u)\n", seed, seed);
  std::mt19937 random(seed);
  for (int round = 0; round < 500; ++round) {
    IdRanges ranges;
    std::vector<IdSpan> added;
    const int spans = static_cast<int>(random() % 12);
    for (int i = 0; i < spans; ++i) {
      const IdSpan span{random() % 200, random() % 30};
      ranges.add(span.first, span.count);
      added.push_back(span);
    }
    ASSERT_EQ(duplicates_of(ranges), expanded_duplicates(added)) << "seed " << seed << " round " << round;
  }
}

}  // namespace
}  // namespace flurry::perf
