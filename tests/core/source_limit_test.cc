// tests/core/source_limit_test.cc — the per-source bound (core/source_limit.h) over a manual
// clock: a new source starts with a full bucket, drains, refills at its rate (fractions carried),
// never above a full bucket; the grant kinds (part, whole, whole_or_owe) and refunds; sources
// apart have buckets apart, an IPv6 /64 is one source and an IPv4-mapped address its IPv4; a
// full table hands a newcomer the set's fullest bucket (never a fresh one) and counts the
// eviction; addresses aimed at one set under one seed are spread under another; a clock that
// steps back neither refills nor freezes for longer than the step. Then through the handler
// and the slice: a datagram is cut short, then answered RETRY with the refill time, signed
// ones and PING are not charged; a door's typed call is all or nothing; none of it allocates.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <set>
#include <vector>

#include "core/handler.h"
#include "core/shared.h"
#include "core/slice.h"
#include "core/source_limit.h"
#include "proto/layout.h"
#include "proto/wire.h"
#include "tests/support/manual_clock.h"

// ---- allocation counting: the plain global operator new of this program goes through here ----
namespace {
std::atomic<std::uint64_t> allocations{0};
[[gnu::noinline]] void counted_free(void* p) noexcept { std::free(p); }
}  // namespace

void* operator new(std::size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }

namespace flurry::core {
namespace {

using Grant = SourceLimit::Grant;
using proto::Range;
using proto::Status;

constexpr std::uint64_t start_ms = 1'760'000'000'000ULL;

SourceLimitConfig limit_config(std::uint64_t ids_per_s, std::uint64_t burst_ids, std::uint32_t entries = 1024,
                               std::uint64_t seed = 1) {
  SourceLimitConfig config;
  config.ids_per_s = ids_per_s;
  config.burst_ids = burst_ids;
  config.entries = entries;
  for (std::size_t i = 0; i < config.seed.size(); ++i)
    config.seed[i] = seed * 0x9e37'79b9'7f4a'7c15ULL + i * 7919;
  return config;
}

Source v4(std::uint32_t n) { return Source::ipv4(0x0a00'0000U + n); }  // 10.0.0.0/8

TEST(SourceLimitTest, ANewSourceHasAFullBucketThenWaitsForTheRefill) {
  SourceLimitStats stats;
  SourceLimit limit(limit_config(1000, 100), stats);  // 1 a ms, 100 at once
  std::uint64_t now = start_ms;
  EXPECT_EQ(limit.level(v4(1), now), 100U);
  SourceCharge got = limit.take(v4(1), 60, now, Grant::part);
  EXPECT_EQ(got.ids, 60U);
  got = limit.take(v4(1), 60, now, Grant::part);  // 40 left: a part
  EXPECT_EQ(got.ids, 40U);
  got = limit.take(v4(1), 1, now, Grant::part);
  EXPECT_FALSE(got.admitted);
  EXPECT_EQ(got.ids, 0U);
  EXPECT_EQ(got.wait_us, 1000U);  // one ID: 1 ms at 1000/s
  now += 7;
  EXPECT_EQ(limit.level(v4(1), now), 7U);
  EXPECT_EQ(limit.take(v4(1), 10, now, Grant::part).ids, 7U);
  // Never above a full bucket, however long it rested.
  now += 3'600'000;
  EXPECT_EQ(limit.level(v4(1), now), 100U);
  EXPECT_EQ(limit.take(v4(1), 1000, now, Grant::part).ids, 100U);
}

TEST(SourceLimitTest, FractionsOfAnIdAreCarriedFromMillisecondToMillisecond) {
  SourceLimitStats stats;
  SourceLimit limit(limit_config(1500, 10), stats);  // 1.5 a ms
  std::uint64_t now = start_ms;
  ASSERT_EQ(limit.take(v4(1), 10, now, Grant::part).ids, 10U);
  std::uint64_t granted = 0;
  for (int ms = 0; ms < 1000; ++ms) {  // asking every ms: 1500 in a second, none lost to rounding
    ++now;
    granted += limit.take(v4(1), 10, now, Grant::part).ids;
  }
  EXPECT_EQ(granted, 1500U);
  SourceLimit slow(limit_config(3, 5), stats);  // 3 a second: less than one a ms
  now = start_ms;
  ASSERT_EQ(slow.take(v4(1), 5, now, Grant::part).ids, 5U);
  granted = 0;
  for (int ms = 0; ms < 2000; ++ms) granted += slow.take(v4(1), 1, ++now, Grant::part).ids;
  EXPECT_EQ(granted, 6U);
}

TEST(SourceLimitTest, WholeGrantsAllOrNothingAndWholeOrOweServesARequestAboveTheBucket) {
  SourceLimitStats stats;
  SourceLimit limit(limit_config(1000, 100), stats);
  std::uint64_t now = start_ms;
  ASSERT_EQ(limit.take(v4(1), 70, now, Grant::whole).ids, 70U);
  SourceCharge refused = limit.take(v4(1), 31, now, Grant::whole);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.wait_us, 1000U);        // one more ID missing
  EXPECT_EQ(limit.level(v4(1), now), 30U);  // a refusal charges nothing
  // Above the bucket: whole never, whole_or_owe once the bucket is full, then it owes.
  now += 1000;
  EXPECT_FALSE(limit.take(v4(2), 250, now, Grant::whole).admitted);
  EXPECT_EQ(limit.take(v4(2), 250, now, Grant::whole_or_owe).ids, 250U);
  EXPECT_EQ(limit.level(v4(2), now), 0U);
  now += 149;  // 150 owed beyond the empty bucket: paid at 1 a ms
  EXPECT_EQ(limit.level(v4(2), now), 0U);
  EXPECT_FALSE(limit.take(v4(2), 1, now, Grant::whole_or_owe).admitted);
  now += 2;
  EXPECT_EQ(limit.level(v4(2), now), 1U);
  // Not full: whole_or_owe is whole.
  EXPECT_FALSE(limit.take(v4(2), 250, now, Grant::whole_or_owe).admitted);
}

TEST(SourceLimitTest, ARefundGivesBackWhatWasNotIssued) {
  SourceLimitStats stats;
  SourceLimit limit(limit_config(1000, 100), stats);
  const SourceCharge got = limit.take(v4(1), 100, start_ms, Grant::part);
  ASSERT_EQ(got.ids, 100U);
  limit.refund(got, 60);  // the ceiling let only 40 out
  EXPECT_EQ(limit.level(v4(1), start_ms), 60U);
  limit.refund(SourceCharge{}, 50);  // nothing charged: nothing to give back
  EXPECT_EQ(limit.level(v4(1), start_ms), 60U);
}

TEST(SourceLimitTest, ManySourcesEachHaveTheirOwnBucket) {
  SourceLimitStats stats;
  SourceLimit limit(limit_config(1000, 100, 1U << 16), stats);
  // 1000 sources, each drained: every one got its full bucket, none another's.
  for (std::uint32_t n = 0; n < 1000; ++n) {
    ASSERT_EQ(limit.take(v4(n), 1000, start_ms, Grant::part).ids, 100U) << n;
  }
  for (std::uint32_t n = 0; n < 1000; ++n) EXPECT_EQ(limit.level(v4(n), start_ms), 0U) << n;
  EXPECT_EQ(limit.level(v4(5000), start_ms), 100U);
  EXPECT_EQ(stats.evicted.get(), 0U);  // 1000 addresses in 16384 sets of 4: each kept its place
}

TEST(SourceLimitTest, AnIpv6Slash64IsOneSourceAndAMappedAddressIsItsIpv4) {
  SourceLimitStats stats;
  SourceLimit limit(limit_config(1000, 100), stats);
  std::array<std::uint8_t, 16> a{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1};
  std::array<std::uint8_t, 16> b = a;
  b[15] = 2;
  b[8] = 0xff;  // another interface of the same /64
  std::array<std::uint8_t, 16> c = a;
  c[7] = 2;  // another /64
  EXPECT_EQ(Source::ipv6(a.data()), Source::ipv6(b.data()));
  ASSERT_EQ(limit.take(Source::ipv6(a.data()), 100, start_ms, Grant::part).ids, 100U);
  EXPECT_EQ(limit.level(Source::ipv6(b.data()), start_ms), 0U);
  EXPECT_EQ(limit.level(Source::ipv6(c.data()), start_ms), 100U);
  const std::array<std::uint8_t, 16> mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7};
  EXPECT_EQ(Source::ipv6(mapped.data()), Source::ipv4(0xc000'0207));
  EXPECT_FALSE(Source::none().limited);
}

TEST(SourceLimitTest, AFullTableGivesANewcomerTheFullestBucketAndCountsTheEviction) {
  SourceLimitStats stats;
  SourceLimit limit(limit_config(1000, 100, 64), stats);  // 16 sets of 4
  ASSERT_EQ(limit.entries(), 64U);
  // Every place taken by a drained source: far more addresses than places.
  std::uint32_t n = 0;
  for (; n < 64 * 20; ++n) limit.take(v4(n), 100, start_ms, Grant::part);
  EXPECT_GT(stats.evicted.get(), 0U);
  // A newcomer now inherits an empty bucket: cycling through addresses buys nothing.
  std::uint64_t granted = 0;
  for (std::uint32_t k = 0; k < 1000; ++k)
    granted += limit.take(v4(100'000 + k), 100, start_ms, Grant::part).ids;
  EXPECT_EQ(granted, 0U);
  // Once the buckets refilled, an eviction takes a full one: a newcomer starts full, uncounted.
  const std::uint64_t evicted = stats.evicted.get();
  EXPECT_EQ(limit.take(v4(200'000), 100, start_ms + 1000, Grant::part).ids, 100U);
  EXPECT_EQ(stats.evicted.get(), evicted);
  // And what the table lost it forgets: an evicted source returns with the level it finds.
  EXPECT_LE(limit.level(v4(0), start_ms + 1000), 100U);
}

TEST(SourceLimitTest, AddressesAimedAtOneSetUnderOneSeedAreSpreadUnderAnother) {
  SourceLimitStats stats_a, stats_b;
  SourceLimit a(limit_config(1000, 100, 64, 1), stats_a);
  SourceLimit b(limit_config(1000, 100, 64, 2), stats_b);
  // The victim, and four attackers that share its set under seed 1 (found by trying addresses,
  // as one who knew the seed could).
  const Source victim = v4(1);
  std::vector<Source> aimed;
  for (std::uint32_t n = 2; aimed.size() < 4 && n < 1'000'000; ++n) {
    if (a.set_of(v4(n)) == a.set_of(victim)) aimed.push_back(v4(n));
  }
  ASSERT_EQ(aimed.size(), 4U);
  std::set<std::uint64_t> sets_b;
  for (const Source& source : aimed) sets_b.insert(b.set_of(source));
  EXPECT_GT(sets_b.size(), 1U);  // under the other seed they do not all land together
  // Under seed 1 the aimed attackers drain their buckets and push the victim's out: the
  // victim comes back to an inherited empty bucket.
  for (SourceLimit* limit : {&a, &b}) {
    ASSERT_EQ(limit->take(victim, 10, start_ms, Grant::part).ids, 10U);
    for (int round = 0; round < 2; ++round) {
      for (const Source& source : aimed) limit->take(source, 100, start_ms, Grant::part);
    }
  }
  EXPECT_EQ(stats_a.evicted.get(), 1U);
  EXPECT_EQ(a.take(victim, 10, start_ms, Grant::part).ids, 0U);  // back to an inherited empty bucket
  // Under seed 2 at most three of them share the victim's set: it keeps its place and level.
  EXPECT_EQ(stats_b.evicted.get(), 0U);
  EXPECT_EQ(b.take(victim, 10, start_ms, Grant::part).ids, 10U);
}

TEST(SourceLimitTest, AClockThatStepsBackNeitherRefillsNorFreezes) {
  SourceLimitStats stats;
  SourceLimit limit(limit_config(1000, 100), stats);
  std::uint64_t now = start_ms;
  ASSERT_EQ(limit.take(v4(1), 100, now, Grant::part).ids, 100U);
  now -= 3'600'000;  // an hour back
  EXPECT_EQ(limit.level(v4(1), now), 0U);
  now += 50;  // and on from there: the refill goes on at once, not an hour later
  EXPECT_EQ(limit.level(v4(1), now), 50U);
  now += 10'000'000;  // a jump forward: a full bucket, no more
  EXPECT_EQ(limit.level(v4(1), now), 100U);
}

TEST(SourceLimitTest, TheShareIsOfOneSlicesCapacity) {
  proto::Layout layout;  // snowflake: 4096 a ms
  SourceLimitConfig config = source_limit_for(layout, 25, 100, 8192);
  EXPECT_EQ(config.ids_per_s, 1'024'000U);
  EXPECT_EQ(config.burst_ids, 102'400U);
  layout.core_bits = 2;  // four slices: 1024 a ms each
  config = source_limit_for(layout, 50, 1000, 8192);
  EXPECT_EQ(config.ids_per_s, 512'000U);
  EXPECT_EQ(config.burst_ids, 512'000U);
  EXPECT_FALSE(source_limit_for(layout, 0, 100, 8192).enabled());
  layout.time_unit_ms = 1000;  // 1024 a second per slice: at least one a second, one at once
  config = source_limit_for(layout, 1, 1, 8192);
  EXPECT_EQ(config.ids_per_s, 10U);
  EXPECT_EQ(config.burst_ids, 1U);
}

// ---- through the handler (datagrams) and the slice (a front door's typed calls) ----

constexpr std::uint32_t retry_hint_us = 500;

struct Node {
  testing::ManualClock clock;
  Shared shared{1};
  proto::Layout layout;
  explicit Node(std::uint64_t ids_per_s, std::uint64_t burst_ids) {
    shared.source_limit = limit_config(ids_per_s, burst_ids);
    shared.assignment.publish(5, layout.time_from_unix_ms(clock.wall_ms()) - 10, clock.wall_ms());
    shared.ceiling.publish(layout.time_from_unix_ms(clock.wall_ms()) + 1000);
  }
  SliceConfig slice_config() const {
    SliceConfig config;
    config.layout = layout;
    config.retry_hint_us = retry_hint_us;
    return config;
  }
};

struct Answer {
  Status status = Status::ok;
  std::uint32_t detail = 0;
  std::uint64_t ids = 0;
};

Answer datagram(Slice& slice, const Node& node, proto::Opcode opcode, std::uint32_t count, const Source& from,
                std::set<std::uint64_t>* seen) {
  proto::Request request;
  request.opcode = opcode;
  request.count = count;
  request.request_id = 9;
  std::array<std::uint8_t, proto::datagram_size_max> in{};
  std::array<std::uint8_t, proto::datagram_size_max> out{};
  const std::size_t size = proto::encode_request(request, in, proto::datagram_size_max / 3);
  Burst burst;
  burst.now_unix_ms = node.clock.wall_ms();
  burst.now_t = node.layout.time_from_unix_ms(burst.now_unix_ms);
  burst.ceiling_t = slice.load_ceiling();
  const std::size_t written = slice.handle(std::span(in.data(), size), out, burst, from);
  slice.publish();
  const proto::ResponseView view = proto::decode_response(std::span(out.data(), written));
  EXPECT_EQ(view.error, proto::ResponseError::ok);
  Answer answer{view.header.status, view.header.detail, 0};
  for (std::size_t i = 0; i < view.header.range_count; ++i) {
    const Range range = view.range(i);
    for (std::uint64_t k = 0; k < range.count; ++k) EXPECT_TRUE(seen->insert(range.first + k).second);
    answer.ids += range.count;
  }
  return answer;
}

TEST(SourceLimitHandlerTest, ADatagramIsCutShortThenAnsweredRetryWithTheRefillTime) {
  Node node(1000, 300);
  Slice slice(node.slice_config(), node.shared);
  ASSERT_NE(slice.source_limit(), nullptr);
  std::set<std::uint64_t> seen;
  const Source greedy = v4(1), other = v4(2);
  Answer answer = datagram(slice, node, proto::Opcode::get_ids, 200, greedy, &seen);
  EXPECT_EQ(answer.status, Status::ok);
  EXPECT_EQ(answer.ids, 200U);
  answer = datagram(slice, node, proto::Opcode::get_ids, 200, greedy, &seen);  // 100 left
  EXPECT_EQ(answer.status, Status::ok);
  EXPECT_EQ(answer.ids, 100U);
  answer = datagram(slice, node, proto::Opcode::get_ids, 200, greedy, &seen);
  EXPECT_EQ(answer.status, Status::retry);
  EXPECT_EQ(answer.detail, 1000U);  // one ID at 1000/s: 1 ms, above the 500 us hint
  // Another source is served all the while; PING and an unlimited caller cost nothing.
  answer = datagram(slice, node, proto::Opcode::get_ids, 50, other, &seen);
  EXPECT_EQ(answer.status, Status::ok);
  EXPECT_EQ(answer.ids, 50U);
  EXPECT_EQ(datagram(slice, node, proto::Opcode::ping, 0, greedy, &seen).status, Status::ok);
  EXPECT_EQ(datagram(slice, node, proto::Opcode::get_ids, 500, Source::none(), &seen).ids, 500U);
  const WorkerStats& stats = node.shared.stats[0];
  EXPECT_EQ(stats.sources.limited.get(), 1U);
  EXPECT_EQ(stats.sources.trimmed.get(), 1U);
  EXPECT_EQ(stats.get(Outcome::answered_retry), 1U);
  EXPECT_EQ(stats.get(Outcome::rx_datagrams), 6U);
  EXPECT_EQ(stats.get(Outcome::ids_issued), seen.size());
  // After the refill the greedy source is served again, never more than it was owed.
  node.clock.advance_ms(50);
  answer = datagram(slice, node, proto::Opcode::get_ids, 200, greedy, &seen);
  EXPECT_EQ(answer.status, Status::ok);
  EXPECT_EQ(answer.ids, 50U);
}

TEST(SourceLimitHandlerTest, AFencedNodeAnswersFencedWhateverTheBucketHolds) {
  Node node(1000, 10);
  Slice slice(node.slice_config(), node.shared);
  std::set<std::uint64_t> seen;
  ASSERT_EQ(datagram(slice, node, proto::Opcode::get_ids, 10, v4(1), &seen).ids, 10U);
  node.shared.ceiling.drain();
  EXPECT_EQ(datagram(slice, node, proto::Opcode::get_ids, 10, v4(1), &seen).status, Status::fenced);
  std::vector<Range> ranges(slice.ranges_for(10));
  EXPECT_EQ(slice.issue(10, ranges, node.clock.wall_ms(), v4(1)).status, Status::fenced);
}

TEST(SourceLimitHandlerTest, ADoorsCallIsAllOrNothingAndRefundedWhenTheCeilingStopsIt) {
  Node node(1000, 300);
  Slice slice(node.slice_config(), node.shared);
  std::vector<Range> ranges(slice.ranges_for(1000));
  Issued issued = slice.issue(250, ranges, node.clock.wall_ms(), v4(1));
  EXPECT_EQ(issued.status, Status::ok);
  EXPECT_EQ(issued.ids, 250U);
  issued = slice.issue(100, ranges, node.clock.wall_ms(), v4(1));  // 50 left: none, not 50
  EXPECT_EQ(issued.status, Status::retry);
  EXPECT_TRUE(issued.source_limited);
  EXPECT_EQ(issued.ids, 0U);
  EXPECT_EQ(issued.detail, 50'000U);  // the 50 missing at 1000/s
  EXPECT_EQ(node.shared.stats[0].sources.limited.get(), 1U);
  EXPECT_EQ(node.shared.stats[0].get(Outcome::answered_retry), 1U);
  // A call above the bucket is served once it is full (and owed), as a Redis client expects.
  node.clock.advance_ms(1000);
  issued = slice.issue(1000, ranges, node.clock.wall_ms(), v4(1));
  EXPECT_EQ(issued.status, Status::ok);
  EXPECT_EQ(issued.ids, 1000U);
  // The ceiling stops a call: what it did not issue is given back.
  node.clock.advance_ms(1000);
  node.shared.ceiling.publish(node.layout.time_from_unix_ms(node.clock.wall_ms()));  // this unit only
  std::vector<Range> more(slice.ranges_for(4000));
  ASSERT_EQ(slice.issue(4000, more, node.clock.wall_ms(), Source::none()).ids, 4000U);  // not charged
  issued = slice.issue(300, ranges, node.clock.wall_ms(), v4(3));
  EXPECT_EQ(issued.status, Status::retry);
  EXPECT_FALSE(issued.source_limited);
  EXPECT_EQ(issued.ids, 96U);  // what was left of the unit's 4096
  EXPECT_EQ(slice.source_limit()->level(v4(3), node.clock.wall_ms()), 300U - 96U);
  // Named sequences: an unknown one is charged nothing.
  Issued seq = slice.issue_seq("orders", 5, ranges, node.clock.wall_ms(), v4(5));
  EXPECT_EQ(seq.status, Status::unknown_sequence);
}

TEST(SourceLimitHandlerTest, NothingAllocatesOnceTheSliceIsBuilt) {
  Node node(1'000'000, 1'000'000);
  Slice slice(node.slice_config(), node.shared);
  std::vector<Range> ranges(slice.ranges_for(100));
  std::array<std::uint8_t, proto::datagram_size_max> in{};
  std::array<std::uint8_t, proto::datagram_size_max> out{};
  proto::Request request;
  request.opcode = proto::Opcode::get_ids;
  request.count = 10;
  const std::size_t size = proto::encode_request(request, in);
  Burst burst;
  burst.now_unix_ms = node.clock.wall_ms();
  burst.now_t = node.layout.time_from_unix_ms(burst.now_unix_ms);
  const std::uint64_t before = allocations.load();
  for (std::uint32_t n = 0; n < 20'000; ++n) {  // more addresses than places: evictions too
    burst.ceiling_t = slice.load_ceiling();
    slice.handle(std::span(in.data(), size), out, burst, v4(n));
    slice.issue(3, ranges, node.clock.wall_ms(), v4(n));
  }
  EXPECT_EQ(allocations.load(), before);
}

}  // namespace
}  // namespace flurry::core
