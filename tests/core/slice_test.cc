// tests/core/slice_test.cc — core::Slice over a manual clock: the typed issue() gives exactly
// the IDs (and counters) a GET_IDS datagram through the same slice's handler would; it stops at
// the ceiling with RETRY, answers FENCED when fenced or drained; the handler is rebuilt (new
// node id, above the new floor) when the assignment moves, for typed and datagram callers
// alike; named sequences come from the slice's own sub-blocks, INCRBY-style runs in one piece
// (numbers drawn in pieces are skipped); and no call allocates.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <set>
#include <vector>

#include "core/shared.h"
#include "core/slice.h"
#include "proto/layout.h"
#include "proto/wire.h"
#include "tests/support/manual_clock.h"

// ---- allocation counting: the plain global operator new of this program goes through here ----
namespace {
std::atomic<std::uint64_t> allocations{0};
// Out of line, so that g++ does not pair an inlined free() with a new-expression and warn
// (-Wmismatched-new-delete), as in handler_test.cc.
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

using proto::Range;
using proto::Status;

constexpr std::uint32_t node_id = 77;
constexpr std::uint32_t retry_hint_us = 777;
constexpr std::uint32_t slices = 3;  // two workers and one front end
constexpr std::uint32_t front_core = 2;

proto::Layout test_layout() {
  proto::Layout layout;
  layout.core_bits = proto::core_bits_for(slices);  // 2: 1024 IDs per unit per slice
  return layout;
}

SliceConfig slice_config(std::uint32_t core = front_core) {
  SliceConfig config;
  config.layout = test_layout();
  config.core = core;
  config.workers = slices;
  config.retry_hint_us = retry_hint_us;
  return config;
}

std::vector<std::uint64_t> ids_of(std::span<const Range> ranges) {
  std::vector<std::uint64_t> ids;
  for (const Range& range : ranges) {
    for (std::uint64_t k = 0; k < range.count; ++k) ids.push_back(range.first + k);
  }
  return ids;
}

// One node's shared state at the manual clock's time: the assignment published (floor a
// little in the past) and a ceiling `lead_t` units ahead.
struct Node {
  testing::ManualClock clock;
  Shared shared{slices};
  proto::Layout layout = test_layout();

  std::uint64_t now_t() const { return layout.time_from_unix_ms(clock.wall_ms()); }
  void assign(std::uint32_t node, std::uint64_t floor_t) {
    shared.ceiling.fence();
    shared.assignment.publish(node, floor_t, clock.wall_ms());
  }
  void start(std::uint64_t lead_t = 50) {
    assign(node_id, now_t() - 10);
    shared.ceiling.publish(now_t() + lead_t);
  }
};

// A GET_IDS of `count` as a client pads it, through the slice's datagram path; its ranges.
std::vector<Range> get_ids(Slice& slice, const Node& node, std::uint32_t count, Status* status) {
  proto::Request request;
  request.opcode = proto::Opcode::get_ids;
  request.count = count;
  request.request_id = 1;
  std::array<std::uint8_t, proto::datagram_size_max> in{};
  std::array<std::uint8_t, proto::datagram_size_max> out{};
  const std::size_t padded = std::min<std::size_t>(
      proto::datagram_size_max, proto::request_size_for_ids(count, node.layout.counter_capacity()));
  const std::size_t size = proto::encode_request(request, in, padded);
  Burst burst;
  burst.now_unix_ms = node.clock.wall_ms();
  burst.now_t = node.layout.time_from_unix_ms(burst.now_unix_ms);
  burst.ceiling_t = slice.load_ceiling();
  const std::size_t written = slice.handle(std::span(in.data(), size), out, burst);
  slice.publish();
  const proto::ResponseView view = proto::decode_response(std::span(out.data(), written));
  EXPECT_EQ(view.error, proto::ResponseError::ok);
  *status = view.header.status;
  std::vector<Range> ranges;
  for (std::size_t i = 0; i < view.header.range_count; ++i) ranges.push_back(view.range(i));
  return ranges;
}

TEST(SliceTest, IssueGivesTheIdsAndCountersOfTheUdpPath) {
  Node typed_node;
  Node udp_node;
  typed_node.start();
  udp_node.start();
  Slice typed(slice_config(), typed_node.shared);
  Slice udp(slice_config(), udp_node.shared);
  std::vector<Range> ranges(typed.ranges_for(5000));
  // Within one unit, across units, a whole unit, mid-unit starts; the clock moves between some.
  for (const std::uint32_t count : {1U, 7U, 1000U, 1024U, 5000U, 3U, 2048U}) {
    const Issued issued = typed.issue(count, ranges, typed_node.clock.wall_ms(), Source::none());
    Status status = Status::bad_request;
    const std::vector<Range> expected = get_ids(udp, udp_node, count, &status);
    ASSERT_EQ(issued.status, Status::ok) << count;
    ASSERT_EQ(status, Status::ok) << count;
    EXPECT_EQ(issued.ids, count);
    EXPECT_EQ(ids_of(std::span(ranges.data(), issued.range_count)), ids_of(expected)) << count;
    if (count == 1000) {
      typed_node.clock.advance_ms(3);
      udp_node.clock.advance_ms(3);
    }
  }
  for (std::size_t i = 0; i < outcome_count; ++i) {
    const auto outcome = static_cast<Outcome>(i);
    EXPECT_EQ(typed_node.shared.stats[front_core].get(outcome),
              udp_node.shared.stats[front_core].get(outcome))
        << to_string(outcome);
  }
  EXPECT_EQ(typed_node.shared.stats[front_core].last_t.load(),
            udp_node.shared.stats[front_core].last_t.load());
  EXPECT_EQ(typed_node.shared.stats[front_core].get(Outcome::requests_get_ids), 7U);
}

TEST(SliceTest, IdsCarryTheSlicesNodeAndCoreAboveTheFloorAndNeverTwice) {
  Node node;
  node.start();
  const std::uint64_t floor_t = node.now_t() - 10;
  Slice slice(slice_config(), node.shared);
  std::vector<Range> ranges(slice.ranges_for(3000));
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 20; ++i) {
    const Issued issued = slice.issue(3000, ranges, node.clock.wall_ms(), Source::none());
    ASSERT_EQ(issued.status, Status::ok) << i;
    for (const std::uint64_t id : ids_of(std::span(ranges.data(), issued.range_count))) {
      const proto::Decoded decoded = node.layout.decode(id);
      EXPECT_EQ(decoded.node, node_id);
      EXPECT_EQ(decoded.core, front_core);
      EXPECT_GT(decoded.time, floor_t);
      EXPECT_TRUE(seen.insert(id).second) << "duplicate " << id;
    }
    node.clock.advance_ms(3);  // three units' worth a call, and the scheduler renews
    node.shared.ceiling.publish(node.now_t() + 50);
  }
  EXPECT_EQ(seen.size(), 60'000U);
}

TEST(SliceTest, StopsAtTheCeilingWithRetry) {
  Node node;
  node.assign(node_id, node.now_t() - 1);
  node.shared.ceiling.publish(node.now_t() + 1);  // this unit and the next: 2048 IDs
  Slice slice(slice_config(), node.shared);
  std::vector<Range> ranges(slice.ranges_for(1500));
  std::set<std::uint64_t> seen;
  const Issued first = slice.issue(1500, ranges, node.clock.wall_ms(), Source::none());
  ASSERT_EQ(first.status, Status::ok);
  for (const std::uint64_t id : ids_of(std::span(ranges.data(), first.range_count))) seen.insert(id);
  const Issued second = slice.issue(1000, ranges, node.clock.wall_ms(), Source::none());
  EXPECT_EQ(second.status, Status::retry);
  EXPECT_EQ(second.detail, retry_hint_us);
  EXPECT_EQ(second.ids, 548U) << "what was left under the ceiling, issued before the RETRY";
  for (const std::uint64_t id : ids_of(std::span(ranges.data(), second.range_count))) {
    EXPECT_LE(node.layout.decode(id).time, node.now_t() + 1) << "an ID above the ceiling";
    EXPECT_TRUE(seen.insert(id).second);
  }
  const Issued third = slice.issue(1, ranges, node.clock.wall_ms(), Source::none());
  EXPECT_EQ(third.status, Status::retry);
  EXPECT_EQ(third.ids, 0U);
  const WorkerStats& stats = node.shared.stats[front_core];
  EXPECT_EQ(stats.get(Outcome::answered_partial), 1U);
  EXPECT_EQ(stats.get(Outcome::answered_retry), 2U);
  EXPECT_EQ(stats.get(Outcome::ids_issued), 2048U);
  EXPECT_EQ(stats.last_t.load(), node.now_t() + 1) << "last_t published after the call";
  // The ceiling moves on (the scheduler renewed): issuing goes on.
  node.shared.ceiling.publish(node.now_t() + 50);
  EXPECT_EQ(slice.issue(1, ranges, node.clock.wall_ms(), Source::none()).status, Status::ok);
}

TEST(SliceTest, FencedOrDrainedIssuesNothing) {
  Node node;
  node.start();
  Slice slice(slice_config(), node.shared);
  std::vector<Range> ranges(slice.ranges_for(10));
  node.shared.ceiling.fence();
  Issued issued = slice.issue(10, ranges, node.clock.wall_ms(), Source::none());
  EXPECT_EQ(issued.status, Status::fenced);
  EXPECT_EQ(issued.detail, proto::fenced_lost);
  EXPECT_EQ(issued.ids, 0U);
  EXPECT_EQ(slice.issue_seq("orders", 1, ranges, node.clock.wall_ms(), Source::none()).status,
            Status::fenced);
  node.shared.ceiling.drain();
  issued = slice.issue(10, ranges, node.clock.wall_ms(), Source::none());
  EXPECT_EQ(issued.status, Status::fenced);
  EXPECT_EQ(issued.detail, proto::fenced_draining);
  EXPECT_EQ(node.shared.stats[front_core].get(Outcome::answered_fenced), 3U);
  EXPECT_EQ(node.shared.stats[front_core].get(Outcome::ids_issued), 0U);
}

TEST(SliceTest, RebuildsWhenTheAssignmentMoves) {
  Node node;
  node.start();
  Slice slice(slice_config(), node.shared);
  std::vector<Range> ranges(slice.ranges_for(100));
  ASSERT_EQ(slice.issue(100, ranges, node.clock.wall_ms(), Source::none()).status, Status::ok);
  EXPECT_EQ(slice.node_id(), node_id);
  // A re-claim: fenced, the new assignment (another node id, a floor ahead of the clock), a
  // ceiling of 0 until its first watermark is durable: RETRY, never the old node's IDs.
  const std::uint64_t floor_t = node.now_t() + 20;
  node.assign(node_id + 1, floor_t);
  node.shared.ceiling.publish(0);
  EXPECT_EQ(slice.issue(1, ranges, node.clock.wall_ms(), Source::none()).status, Status::retry);
  EXPECT_EQ(slice.node_id(), node_id + 1);
  EXPECT_EQ(node.shared.stats[front_core].last_t.load(), floor_t) << "published at the rebuild";
  node.shared.ceiling.publish(floor_t + 10);
  const Issued issued = slice.issue(100, ranges, node.clock.wall_ms(), Source::none());
  ASSERT_EQ(issued.status, Status::ok);
  for (const std::uint64_t id : ids_of(std::span(ranges.data(), issued.range_count))) {
    EXPECT_EQ(node.layout.decode(id).node, node_id + 1);
    EXPECT_GT(node.layout.decode(id).time, floor_t);
  }
  // The datagram path of another slice sees the same move at its next burst.
  Slice worker(slice_config(0), node.shared);
  node.assign(node_id + 2, floor_t + 5);
  node.shared.ceiling.publish(floor_t + 30);
  Status status = Status::bad_request;
  const std::vector<Range> got = get_ids(worker, node, 5, &status);
  ASSERT_EQ(status, Status::ok);
  EXPECT_EQ(node.layout.decode(got[0].first).node, node_id + 2);
  EXPECT_EQ(node.layout.decode(got[0].first).core, 0U);
  // refresh() (a poll loop's tick) rebuilds between bursts too.
  node.assign(node_id + 3, floor_t + 6);
  worker.refresh();
  EXPECT_EQ(worker.node_id(), node_id + 3);
}

TEST(SliceTest, NamedSequencesComeFromTheSlicesSubBlocks) {
  Node node;
  node.start();
  Slice slice(slice_config(), node.shared);
  std::vector<Range> ranges(8);
  EXPECT_EQ(slice.issue_seq("orders", 1, ranges, node.clock.wall_ms(), Source::none()).status,
            Status::unknown_sequence);
  EXPECT_EQ(slice.issue_seq("no spaces", 1, ranges, node.clock.wall_ms(), Source::none()).status,
            Status::bad_request);
  const auto slot = node.shared.sequences.create("orders", SeqMode::segment, 7);
  ASSERT_TRUE(slot);
  EXPECT_EQ(slice.issue_seq("orders", 1, ranges, node.clock.wall_ms(), Source::none()).status, Status::retry)
      << "nothing queued for this slice yet";
  ASSERT_TRUE(node.shared.sequences.push(*slot, front_core, {100, 110}));
  ASSERT_TRUE(node.shared.sequences.push(*slot, front_core, {200, 210}));
  ASSERT_TRUE(node.shared.sequences.push(*slot, 0, {500, 510})) << "another slice's";
  Issued issued = slice.issue_seq("orders", 4, ranges, node.clock.wall_ms(), Source::none());
  ASSERT_EQ(issued.status, Status::ok);
  EXPECT_EQ(ids_of(std::span(ranges.data(), issued.range_count)),
            (std::vector<std::uint64_t>{100, 101, 102, 103}));
  // Across the two sub-blocks: two pieces.
  issued = slice.issue_seq("orders", 8, ranges, node.clock.wall_ms(), Source::none());
  ASSERT_EQ(issued.status, Status::ok);
  EXPECT_EQ(issued.range_count, 2U);
  EXPECT_EQ(ids_of(std::span(ranges.data(), issued.range_count)),
            (std::vector<std::uint64_t>{104, 105, 106, 107, 108, 109, 200, 201}));
  // INCRBY-style: 5 in one piece comes from the rest of the second sub-block.
  issued = slice.issue_seq("orders", 5, ranges, node.clock.wall_ms(), Source::none(), true);
  ASSERT_EQ(issued.status, Status::ok);
  ASSERT_EQ(issued.range_count, 1U);
  EXPECT_EQ(ranges[0].first, 202U);
  EXPECT_EQ(ranges[0].count, 5U);
  // Three left, then nothing queued: the rest is RETRY, what came before it is told.
  issued = slice.issue_seq("orders", 5, ranges, node.clock.wall_ms(), Source::none());
  EXPECT_EQ(issued.status, Status::retry);
  EXPECT_EQ(issued.ids, 3U);
  EXPECT_EQ(node.shared.stats[front_core].get(Outcome::seq_ids_issued), 20U);
}

TEST(SliceTest, ContiguousNumbersInPiecesAreSkippedNeverIssued) {
  Node node;
  node.start();
  Slice slice(slice_config(), node.shared);
  std::vector<Range> ranges(8);
  const auto slot = node.shared.sequences.create("orders", SeqMode::segment, 7);
  ASSERT_TRUE(slot);
  // Two sub-blocks of 4 with a gap: 6 never come in one piece. The pieces drawn are dropped.
  ASSERT_TRUE(node.shared.sequences.push(*slot, front_core, {1000, 1004}));
  ASSERT_TRUE(node.shared.sequences.push(*slot, front_core, {1010, 1014}));
  Issued issued = slice.issue_seq("orders", 6, ranges, node.clock.wall_ms(), Source::none(), true);
  EXPECT_EQ(issued.status, Status::retry);
  EXPECT_EQ(issued.ids, 0U);
  ASSERT_TRUE(node.shared.sequences.push(*slot, front_core, {2000, 2010}));
  issued = slice.issue_seq("orders", 6, ranges, node.clock.wall_ms(), Source::none(), true);
  ASSERT_EQ(issued.status, Status::ok);
  ASSERT_EQ(issued.range_count, 1U);
  EXPECT_EQ(ranges[0].first, 2000U) << "the skipped numbers are never handed out";
  EXPECT_EQ(ranges[0].count, 6U);
}

TEST(SliceTest, NoCallAllocates) {
  Node node;
  node.start();
  Slice slice(slice_config(), node.shared);
  std::vector<Range> ranges(slice.ranges_for(10'000));
  const auto slot = node.shared.sequences.create("orders", SeqMode::segment, 7);
  ASSERT_TRUE(slot);
  node.shared.sequences.push(*slot, front_core, {1, 1000});
  const std::uint64_t before = allocations.load();
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(slice.issue(10'000, ranges, node.clock.wall_ms(), Source::none()).status, Status::ok);
    ASSERT_EQ(slice.issue_seq("orders", 2, ranges, node.clock.wall_ms(), Source::none()).status, Status::ok);
    node.clock.advance_ms(10);
    if (i == 50) node.assign(node_id + 1, node.now_t());  // a rebuild, in place
    node.shared.ceiling.publish(node.now_t() + 50);
  }
  EXPECT_EQ(allocations.load(), before);
}

}  // namespace
}  // namespace flurry::core
