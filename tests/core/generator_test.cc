// tests/core/generator_test.cc — core::Generator with manual time (CONTRIBUTING.md, time): last_t never
// decreases when the clock steps back, a used-up unit borrows the next, nothing is issued above
// the ceiling (a batch stops part-way), start_above(floor) keeps everything above the floor,
// ranges are consecutive IDs, and cores never collide. Expected IDs are built with
// Layout::compose from the fields the contract names, or checked by property.
// Random schedules use a seed that is printed; FLURRY_TEST_SEED replays one.
#include <gtest/gtest.h>

#include "tests/support/seed.h"

#include <array>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <unordered_set>
#include <vector>

#include "core/generator.h"
#include "proto/layout.h"

namespace flurry::core {
namespace {

using proto::Range;

constexpr std::uint64_t no_ceiling = std::uint64_t{1}
                                     << 62;      // far above any time field, below the fenced values
constexpr std::uint64_t t0 = 31'622'400'000ULL;  // 2025-01-01 in 1 ms units

using flurry::testing::test_seed;

struct Batch {
  Generator::Issued issued;
  std::vector<Range> ranges;
  std::uint64_t ids() const {
    std::uint64_t n = 0;
    for (const Range& r : ranges) n += r.count;
    return n;
  }
};

Batch issue(Generator& generator, std::uint64_t now_t, std::uint64_t ceiling_t, std::uint32_t count,
            std::size_t ranges_max = 121) {
  std::array<Range, 255> storage{};
  Batch batch;
  batch.issued = generator.issue(now_t, ceiling_t, count, std::span<Range>(storage.data(), ranges_max));
  batch.ranges.assign(storage.begin(), storage.begin() + batch.issued.range_count);
  return batch;
}

// Checks what every batch must satisfy and returns its IDs, in order.
std::vector<std::uint64_t> check_batch(const proto::Layout& layout, const Batch& batch, std::uint32_t node,
                                       std::uint32_t core, std::uint64_t ceiling_t) {
  std::vector<std::uint64_t> ids;
  EXPECT_EQ(batch.ids(), batch.issued.ids);
  for (const Range& range : batch.ranges) {
    EXPECT_GT(range.count, 0u);
    const proto::Decoded first = layout.decode(range.first);
    EXPECT_LE(first.time, ceiling_t);
    EXPECT_LE(first.time, layout.time_max());
    EXPECT_LE(std::uint64_t{first.counter} + range.count, layout.counter_capacity())
        << "a range must not spill out of its time unit";
    for (std::uint32_t i = 0; i < range.count; ++i) {
      const std::uint64_t id = range.first + i;  // consecutive integers
      const proto::Decoded d = layout.decode(id);
      EXPECT_EQ(d.time, first.time);
      EXPECT_EQ(d.node, node);
      EXPECT_EQ(d.core, core);
      EXPECT_EQ(d.counter, first.counter + i);
      if (!ids.empty()) {
        EXPECT_GT(id, ids.back()) << "IDs of a batch must increase";
      }
      ids.push_back(id);
    }
  }
  return ids;
}

TEST(GeneratorTest, FirstIssueIsAtNowWithCounterZero) {
  const proto::Layout layout;
  Generator generator(layout, 5, 0);
  generator.start_above(t0 - 1000);
  const Batch batch = issue(generator, t0, t0 + 3000, 5);
  ASSERT_EQ(batch.issued.ids, 5u);
  ASSERT_EQ(batch.ranges.size(), 1u);
  EXPECT_EQ(batch.ranges[0], (Range{layout.compose(t0, 5, 0, 0), 5}));
  EXPECT_EQ(generator.last_t(), t0);
  // The next request in the same unit continues the counter.
  const Batch next = issue(generator, t0, t0 + 3000, 3);
  ASSERT_EQ(next.ranges.size(), 1u);
  EXPECT_EQ(next.ranges[0], (Range{layout.compose(t0, 5, 0, 5), 3}));
  // A new unit starts the counter over.
  const Batch later = issue(generator, t0 + 1, t0 + 3000, 1);
  ASSERT_EQ(later.ranges.size(), 1u);
  EXPECT_EQ(later.ranges[0], (Range{layout.compose(t0 + 1, 5, 0, 0), 1}));
}

TEST(GeneratorTest, ClockSteppingBackNeverLowersLastT) {
  const proto::Layout layout;
  for (std::uint64_t step : {1ULL, 2ULL, 10ULL, 999ULL, 1000ULL, 60'000ULL, 3'600'000ULL}) {
    SCOPED_TRACE(step);
    Generator generator(layout, 1, 0);
    generator.start_above(t0 - 1);
    std::unordered_set<std::uint64_t> seen;
    std::uint64_t previous_max = 0;
    std::uint64_t last_t = 0;
    std::uint64_t now = t0;
    // Forward, then back by `step`, then forward slowly; repeat.
    for (std::uint64_t round = 0; round < flurry::testing::scaled(20); ++round) {
      for (std::uint64_t now_t : {now, now - step, now - step + 1, now + 1}) {
        const Batch batch = issue(generator, now_t, no_ceiling, 3000);
        ASSERT_EQ(batch.issued.ids, 3000u);
        ASSERT_GE(generator.last_t(), last_t) << "last_t went back at now " << now_t;
        last_t = generator.last_t();
        for (std::uint64_t id : check_batch(layout, batch, 1, 0, no_ceiling)) {
          ASSERT_TRUE(seen.insert(id).second) << "duplicate " << id;
          ASSERT_GT(id, previous_max) << "IDs must keep increasing across a step back";
          previous_max = id;
        }
      }
      now += 2;
    }
  }
}

TEST(GeneratorTest, UsedUpUnitBorrowsTheNext) {
  const proto::Layout layout;  // 4096 IDs per unit
  Generator generator(layout, 9, 0);
  generator.start_above(t0 - 1);
  Batch batch = issue(generator, t0, no_ceiling, 4096);
  ASSERT_EQ(batch.ranges.size(), 1u);
  EXPECT_EQ(batch.ranges[0], (Range{layout.compose(t0, 9, 0, 0), 4096}));
  // Same clock reading, unit used up: t0 + 1, counter 0.
  batch = issue(generator, t0, no_ceiling, 1);
  ASSERT_EQ(batch.ranges.size(), 1u);
  EXPECT_EQ(batch.ranges[0], (Range{layout.compose(t0 + 1, 9, 0, 0), 1}));
  EXPECT_EQ(generator.last_t(), t0 + 1);
  // The clock catching up to the borrowed unit continues its counter, not restarts it.
  batch = issue(generator, t0 + 1, no_ceiling, 1);
  EXPECT_EQ(batch.ranges.at(0), (Range{layout.compose(t0 + 1, 9, 0, 1), 1}));
  // A big batch walks across units: 4094 + 4096 + 10.
  batch = issue(generator, t0, no_ceiling, 8200);
  ASSERT_EQ(batch.ranges.size(), 3u);
  EXPECT_EQ(batch.ranges[0], (Range{layout.compose(t0 + 1, 9, 0, 2), 4094}));
  EXPECT_EQ(batch.ranges[1], (Range{layout.compose(t0 + 2, 9, 0, 0), 4096}));
  EXPECT_EQ(batch.ranges[2], (Range{layout.compose(t0 + 3, 9, 0, 0), 10}));
  check_batch(layout, batch, 9, 0, no_ceiling);
}

TEST(GeneratorTest, RangeLimitGivesAPartialBatch) {
  const proto::Layout layout;
  Generator generator(layout, 9, 0);
  generator.start_above(t0 - 1);
  const Batch batch = issue(generator, t0, no_ceiling, 20000, 3);
  EXPECT_EQ(batch.issued.range_count, 3u);
  EXPECT_EQ(batch.issued.ids, 3u * 4096);
  // Nothing was lost: the next batch continues right after.
  const Batch next = issue(generator, t0, no_ceiling, 1);
  EXPECT_EQ(next.ranges.at(0), (Range{layout.compose(t0 + 3, 9, 0, 0), 1}));
  // No room for any range: nothing issued, nothing consumed.
  const std::uint64_t before = generator.last_t();
  EXPECT_EQ(issue(generator, t0 + 100, no_ceiling, 5, 0).issued.ids, 0u);
  EXPECT_EQ(generator.last_t(), before);
  EXPECT_EQ(issue(generator, t0 + 100, no_ceiling, 0).issued.ids, 0u);
  EXPECT_EQ(generator.last_t(), before);
}

TEST(GeneratorTest, NeverAboveTheCeiling) {
  const proto::Layout layout;
  Generator generator(layout, 2, 0);
  generator.start_above(t0 - 1);
  // Clock above the ceiling: nothing, and nothing consumed.
  Batch batch = issue(generator, t0 + 10, t0 + 5, 5);
  EXPECT_EQ(batch.issued.ids, 0u);
  EXPECT_EQ(batch.issued.range_count, 0u);
  EXPECT_EQ(generator.last_t(), t0 - 1);
  // Ceiling 0 ("nothing yet"): nothing.
  EXPECT_EQ(issue(generator, t0, 0, 5).issued.ids, 0u);
  // Clock at the ceiling: the ceiling unit itself may be used...
  batch = issue(generator, t0 + 5, t0 + 5, 4096);
  EXPECT_EQ(batch.issued.ids, 4096u);
  // ...but not borrowed past.
  EXPECT_EQ(issue(generator, t0 + 5, t0 + 5, 1).issued.ids, 0u);
  EXPECT_EQ(generator.last_t(), t0 + 5);
  // A raised ceiling lets it continue exactly where it stopped.
  batch = issue(generator, t0 + 5, t0 + 6, 1);
  EXPECT_EQ(batch.ranges.at(0), (Range{layout.compose(t0 + 6, 2, 0, 0), 1}));
}

TEST(GeneratorTest, PartialIssueWhenTheCeilingIsHitMidBatch) {
  const proto::Layout layout;
  Generator generator(layout, 2, 0);
  generator.start_above(t0 - 1);
  ASSERT_EQ(issue(generator, t0, t0 + 1, 100).issued.ids, 100u);
  // 4 units wanted, 2 allowed (t0 rest + t0 + 1).
  const Batch batch = issue(generator, t0, t0 + 1, 4 * 4096);
  EXPECT_EQ(batch.issued.ids, (4096u - 100) + 4096);
  EXPECT_EQ(batch.issued.range_count, 2u);
  check_batch(layout, batch, 2, 0, t0 + 1);
  EXPECT_EQ(generator.last_t(), t0 + 1);
}

TEST(GeneratorTest, NeverBeyondTheLayoutsTimeMax) {
  const proto::Layout layout;
  Generator generator(layout, 2, 0);
  generator.start_above(layout.time_max() - 2);
  const Batch batch = issue(generator, 0, no_ceiling, 10 * 4096);
  EXPECT_EQ(batch.issued.ids, 2u * 4096);  // time_max - 1 and time_max
  check_batch(layout, batch, 2, 0, layout.time_max());
  EXPECT_EQ(issue(generator, layout.time_max() + 5, no_ceiling, 1).issued.ids, 0u);
  EXPECT_EQ(generator.last_t(), layout.time_max());
}

TEST(GeneratorTest, StartAboveFloorNeverIssuesAtOrBelowIt) {
  const proto::Layout layout;
  const std::uint64_t floor = t0 + 500;
  for (std::uint64_t now : {std::uint64_t{0}, t0, floor - 1, floor, floor + 1, floor + 1000}) {
    SCOPED_TRACE(now);
    Generator generator(layout, 3, 0);
    generator.start_above(floor);
    const Batch batch = issue(generator, now, no_ceiling, 10000);
    ASSERT_EQ(batch.issued.ids, 10000u);
    for (const Range& range : batch.ranges) {
      EXPECT_GT(layout.decode(range.first).time, floor);
    }
    EXPECT_EQ(layout.decode(batch.ranges.front().first).time, std::max(now, floor + 1));
    EXPECT_EQ(layout.decode(batch.ranges.front().first).counter, 0u);
  }
  // Ceiling equal to the floor: nothing at all (the restart case before the first renew).
  Generator generator(layout, 3, 0);
  generator.start_above(floor);
  EXPECT_EQ(issue(generator, floor, floor, 1).issued.ids, 0u);
  EXPECT_EQ(issue(generator, floor - 10, floor, 1).issued.ids, 0u);
}

TEST(GeneratorTest, RangesOfCoresFromTheNodeField) {
  proto::Layout layout;
  layout.core_bits = 3;
  layout.core_from = proto::CoreBitsFrom::node;  // 7-bit node, 4096 counter values
  Generator generator(layout, 100, 5);
  generator.start_above(t0 - 1);
  const Batch batch = issue(generator, t0, no_ceiling, 5000);
  ASSERT_EQ(batch.issued.ids, 5000u);
  ASSERT_EQ(batch.ranges.size(), 2u);
  EXPECT_EQ(batch.ranges[0].count, 4096u);
  check_batch(layout, batch, 100, 5, no_ceiling);
}

// Several cores of one node (and several nodes), random clocks that also step back, random
// batch sizes and range limits, ceilings that lag: no ID is ever issued twice.
TEST(GeneratorTest, CoresAndNodesNeverCollide) {
  const std::uint64_t seed = test_seed();
  std::cout << "seed " << seed << " (replay: FLURRY_TEST_SEED=" << seed << ")\n";
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);

  for (proto::CoreBitsFrom from : {proto::CoreBitsFrom::sequence, proto::CoreBitsFrom::node}) {
    SCOPED_TRACE(from == proto::CoreBitsFrom::sequence ? "core from sequence" : "core from node");
    proto::Layout layout;
    layout.core_bits = 2;
    layout.core_from = from;
    layout.sequence_bits = 8;  // small units, so borrowing happens often
    layout.time_bits = 43;
    struct Slot {
      std::uint32_t node;
      std::uint32_t core;
      Generator generator;
    };
    std::vector<Slot> slots;
    for (std::uint32_t node : {0U, 1U, 7U}) {
      for (std::uint32_t core = 0; core < 4; ++core) {
        slots.push_back(Slot{node, core, Generator(layout, node, core)});
        slots.back().generator.start_above(1000);
      }
    }
    std::unordered_set<std::uint64_t> seen;
    std::uint64_t now = 1000;
    std::uint64_t ceiling = 1100;
    for (int step = 0; step < 5000; ++step) {
      // The clock mostly advances, sometimes jumps back; the ceiling follows it with a lead.
      switch (rng() % 10) {
        case 0:
          now -= std::min<std::uint64_t>(now, rng() % 50);
          break;
        case 1:
        case 2:
        case 3:
          now += rng() % 3;
          break;
        default:
          break;
      }
      if (rng() % 4 == 0) ceiling = std::max(ceiling, now + 30);
      Slot& slot = slots[rng() % slots.size()];
      const auto count = static_cast<std::uint32_t>(1 + rng() % 300);
      const std::size_t ranges_max = 1 + rng() % 5;
      const std::uint64_t before = slot.generator.last_t();
      const Batch batch = issue(slot.generator, now, ceiling, count, ranges_max);
      ASSERT_GE(slot.generator.last_t(), before);
      ASSERT_LE(batch.issued.ids, count);
      ASSERT_LE(batch.issued.range_count, ranges_max);
      for (std::uint64_t id : check_batch(layout, batch, slot.node, slot.core, ceiling)) {
        ASSERT_TRUE(seen.insert(id).second) << "duplicate ID " << id << " at step " << step;
        ASSERT_GT(layout.decode(id).time, 1000u) << "issued at or below the start floor";
      }
    }
    EXPECT_GT(seen.size(), 50000u) << "the schedule issued too little to mean anything";
  }
}

// issue_one_range (the DPDK fast path) against issue() on a twin generator, over a random
// schedule with clock steps back, unit borrowing, counts that straddle a unit, a ceiling that
// stops issue, fences: where it answers it wrote exactly issue()'s one range and left the same
// state; where it declines, issue() would have answered otherwise and nothing changed.
TEST(Generator, IssueOneRangeIsIssueWhenItAnswers) {
  const std::uint64_t seed = test_seed();
  std::printf("seed %llu (FLURRY_TEST_SEED replays it)\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const proto::Layout layout = *proto::layout_preset("snowflake");
  Generator fast(layout, 3, 1);
  Generator twin(layout, 3, 1);
  fast.start_above(t0);
  twin.start_above(t0);
  std::uint64_t now = t0;
  std::uint64_t ceiling = t0 + 20;
  int answered = 0, declined = 0;
  for (int step = 0; step < 200'000; ++step) {
    switch (rng() % 16) {  // the clock moves ahead about one unit in 8 steps, and back now and then
      case 0:
        now -= std::min<std::uint64_t>(now, rng() % 3);
        break;
      case 1:
      case 2:
      case 4:
        now += rng() % 3;
        break;
      case 3:
        ceiling = rng() % 64 == 0 ? ceiling_draining : std::max(t0, now + rng() % 8 - 2);
        break;
      default:
        break;
    }
    const auto count = static_cast<std::uint32_t>(rng() % 8 == 0 ? 1 + rng() % 5000 : 1 + rng() % 40);
    Range range{};
    const std::uint64_t last_before = fast.last_t();
    if (fast.issue_one_range(now, ceiling, count, &range)) {
      ++answered;
      const Batch batch = issue(twin, now, ceiling, count, 1 + rng() % 4);
      ASSERT_EQ(batch.issued.ids, count) << "step " << step;
      ASSERT_EQ(batch.issued.range_count, 1u) << "step " << step;
      ASSERT_EQ(batch.ranges[0], range) << "step " << step;
    } else {
      ++declined;
      ASSERT_EQ(fast.last_t(), last_before) << "a declined issue changed last_t";
      // issue() with room for several ranges answers something else: fewer IDs, several
      // ranges, or nothing. Applied to both, so that the twins stay equal.
      const Batch batch = issue(twin, now, ceiling, count, 4);
      ASSERT_TRUE(batch.issued.ids < count || batch.issued.range_count > 1) << "step " << step;
      const Batch same = issue(fast, now, ceiling, count, 4);
      ASSERT_EQ(same.ranges, batch.ranges) << "step " << step;
    }
    ASSERT_EQ(fast.last_t(), twin.last_t()) << "step " << step;
  }
  EXPECT_GT(answered, 40'000);
  EXPECT_GT(declined, 1'000);
}

}  // namespace
}  // namespace flurry::core
