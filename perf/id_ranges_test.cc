// perf/id_ranges_test.cc — flurry-bench's duplicate check (perf/id_ranges.h): the overlap
// count equals expanding every ID and counting the repeats, and it does fail on duplicates.
#include "perf/id_ranges.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>

#include "tests/support/seed.h"

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

// ---- the parallel checker (oneTBB) against the serial one ----

// Disjoint spans of 1..span_max IDs with gaps, shuffled.
std::vector<IdSpan> disjoint_spans(std::mt19937_64& random, std::size_t count, std::uint64_t span_max) {
  std::vector<IdSpan> spans;
  std::uint64_t next = 1000;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t n = 1 + random() % span_max;
    spans.push_back({next, n});
    next += n + random() % 3;
  }
  std::shuffle(spans.begin(), spans.end(), random);
  return spans;
}

// `count` spans, scaled down in the sanitizer trees (tests/support/seed.h) but never below what
// takes the parallel path (2^16 spans, perf/id_ranges.cc).
std::size_t parallel_spans(std::uint64_t count) {
  return static_cast<std::size_t>(std::max<std::uint64_t>(flurry::testing::scaled(count), 70'000));
}

std::uint64_t serial(std::vector<IdSpan> spans) { return count_duplicate_ids(spans); }
std::uint64_t parallel(std::vector<IdSpan> spans, unsigned threads = 0) {
  return count_duplicate_ids_parallel(spans, threads);
}

TEST(IdRangesParallel, FindsAPlantedDuplicateAndOverlapExactlyAsTheSerialOne) {
  std::mt19937_64 random(11);
  // Enough spans for the parallel path (2^16 and up) and many chunks.
  std::vector<IdSpan> spans = disjoint_spans(random, parallel_spans(400'000), 50);
  EXPECT_EQ(serial(spans), 0u);
  EXPECT_EQ(parallel(spans), 0u);
  // A span received twice, and another one's last 3 IDs received again inside a wider span
  // that starts in the gap-free middle of it.
  const IdSpan twice = spans[spans.size() / 50];
  spans.push_back(twice);
  const IdSpan overlapped = spans[spans.size() / 4];
  ASSERT_GE(overlapped.count, 1u);
  const std::uint64_t tail = std::min<std::uint64_t>(3, overlapped.count);
  spans.push_back({overlapped.first + overlapped.count - tail, tail});
  const std::uint64_t expected = twice.count + tail;
  const std::uint64_t reference = serial(spans);
  EXPECT_EQ(reference, expected);
  EXPECT_EQ(parallel(spans), reference);
  EXPECT_EQ(parallel(spans, 2), reference);
  EXPECT_EQ(parallel(spans, 1), reference);
}

TEST(IdRangesParallel, AgreesWithTheSerialOneOnRandomSets) {
  std::uint64_t seed = 0x5eed;
  if (const char* env = std::getenv("FLURRY_TEST_SEED")) seed = std::strtoull(env, nullptr, 0);
  std::printf("seed %llu (replay: FLURRY_TEST_SEED=%llu)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  std::mt19937_64 random(seed);
  for (std::uint64_t round = 0; round < flurry::testing::scaled(6); ++round) {
    std::vector<IdSpan> spans =
        disjoint_spans(random, parallel_spans(100'000 + random() % 200'000), 1 + random() % 4096);
    // Planted repeats: heads of earlier spans, spans covering several others (the reach that
    // crosses chunk boundaries), and spans at the top of the ID space that must not wrap.
    const std::size_t plain = spans.size();
    std::uint64_t planted_heads = 0;
    for (int i = 0; i < 50; ++i) {
      const IdSpan& victim = spans[random() % plain];
      const std::uint64_t n = 1 + random() % victim.count;
      spans.push_back({victim.first, n});
      planted_heads += n;
    }
    spans.push_back({spans[random() % plain].first, 1'000'000 + random() % 10'000'000});
    spans.push_back({std::numeric_limits<std::uint64_t>::max() - 5, 100});
    spans.push_back({std::numeric_limits<std::uint64_t>::max() - 3, 2});
    const std::uint64_t reference = serial(spans);
    EXPECT_GE(reference, planted_heads + 2) << "round " << round;
    EXPECT_EQ(parallel(spans), reference) << "round " << round;
    EXPECT_EQ(parallel(spans, 2), reference) << "round " << round;
    EXPECT_EQ(parallel(spans, 3), reference) << "round " << round;
  }
}

TEST(IdRangesParallel, OneLongSpanUnderManySmallOnes) {
  // Every small span lies inside the long one: each is a duplicate in full, whichever chunk it
  // lands in (the long span's reach must carry across every chunk).
  std::vector<IdSpan> spans = {{0, 1'000'000'000}};
  std::uint64_t expected = 0;
  for (std::uint64_t i = 0; i < parallel_spans(200'000); ++i) {
    spans.push_back({i * 4000 + 17, 1 + i % 7});
    expected += 1 + i % 7;
  }
  EXPECT_EQ(serial(spans), expected);
  EXPECT_EQ(parallel(spans), expected);
  EXPECT_EQ(parallel(spans, 2), expected);
}

}  // namespace
}  // namespace flurry::perf
