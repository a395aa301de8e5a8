// tests/core/sequence_table_test.cc — core::SequenceTable and GET_SEQ through core::Handler:
// unknown names, segment sub-blocks (per worker, increasing, stale ones after a delete never
// used), monotonic (owner only, below the durable limit, strictly increasing under threads),
// nothing issued at or past the serving deadline (a manual burst time).
#include "core/sequence_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "core/handler.h"
#include "proto/wire.h"

namespace flurry::core {
namespace {

using Ranges = std::array<proto::Range, 8>;

std::vector<std::uint64_t> numbers(const Ranges& ranges, const SeqIssued& issued) {
  std::vector<std::uint64_t> out;
  for (std::uint32_t i = 0; i < issued.range_count; ++i) {
    for (std::uint32_t k = 0; k < ranges[i].count; ++k) out.push_back(ranges[i].first + k);
  }
  return out;
}

TEST(SequenceTableTest, UnknownNameIsUnknown) {
  SequenceTable table(2);
  Ranges out{};
  EXPECT_EQ(table.issue(0, "orders", 5, out, 0).answer, SeqAnswer::unknown);
  ASSERT_TRUE(table.create("orders", SeqMode::segment, 1));
  EXPECT_EQ(table.issue(0, "order", 5, out, 0).answer, SeqAnswer::unknown);
  EXPECT_EQ(table.issue(0, "orders2", 5, out, 0).answer, SeqAnswer::unknown);
  EXPECT_EQ(table.issue(0, "orders", 5, out, 0).answer, SeqAnswer::retry);  // known, nothing published
}

TEST(SequenceTableTest, SegmentIssuesItsSubBlocksInOrderThenRetries) {
  SequenceTable table(2);
  const auto slot = table.create("orders", SeqMode::segment, 7);
  ASSERT_TRUE(slot);
  ASSERT_TRUE(table.push(*slot, 0, {100, 110}));
  ASSERT_TRUE(table.push(*slot, 0, {110, 120}));
  EXPECT_FALSE(table.push(*slot, 0, {200, 210})) << "the queue holds queue_depth sub-blocks";
  EXPECT_EQ(table.queued(*slot, 0), 2u);
  Ranges out{};
  SeqIssued issued = table.issue(0, "orders", 15, out, 0);
  ASSERT_EQ(issued.answer, SeqAnswer::issued);
  EXPECT_EQ(issued.ids, 15u);
  ASSERT_EQ(issued.range_count, 1u) << "contiguous sub-blocks make one range";
  EXPECT_EQ(out[0], (proto::Range{100, 15}));
  EXPECT_EQ(table.issue(1, "orders", 1, out, 0).answer, SeqAnswer::retry) << "worker 1 has nothing";
  ASSERT_TRUE(table.push(*slot, 0, {300, 302}));
  issued = table.issue(0, "orders", 100, out, 0);
  ASSERT_EQ(issued.range_count, 2u);
  EXPECT_EQ(out[0], (proto::Range{115, 5}));
  EXPECT_EQ(out[1], (proto::Range{300, 2}));
  EXPECT_EQ(table.issue(0, "orders", 1, out, 0).answer, SeqAnswer::retry);
}

TEST(SequenceTableTest, SegmentAnswerNeverHasMoreRangesThanAllowed) {
  SequenceTable table(1);
  const auto slot = table.create("a", SeqMode::segment, 1);
  ASSERT_TRUE(table.push(*slot, 0, {10, 11}));
  ASSERT_TRUE(table.push(*slot, 0, {20, 21}));
  std::array<proto::Range, 1> one{};
  const SeqIssued issued = table.issue(0, "a", 2, one, 0);
  EXPECT_EQ(issued.ids, 1u);
  EXPECT_EQ(issued.range_count, 1u);
  Ranges out{};
  EXPECT_EQ(table.issue(0, "a", 2, out, 0).ids, 1u) << "the second sub-block is still there";
  EXPECT_EQ(out[0], (proto::Range{20, 1}));
}

TEST(SequenceTableTest, DeletedSequenceNumbersAreNeverIssuedUnderANewOne) {
  SequenceTable table(1);
  auto slot = table.create("a", SeqMode::segment, 1);
  ASSERT_TRUE(table.push(*slot, 0, {10, 20}));
  ASSERT_TRUE(table.push(*slot, 0, {20, 30}));
  Ranges out{};
  EXPECT_EQ(table.issue(0, "a", 5, out, 0).ids, 5u);
  table.remove(*slot);
  EXPECT_EQ(table.issue(0, "a", 5, out, 0).answer, SeqAnswer::unknown);
  const auto again = table.create("b", SeqMode::segment, 2);
  ASSERT_EQ(again, slot) << "the freed slot is reused";
  EXPECT_EQ(table.issue(0, "b", 5, out, 0).answer, SeqAnswer::retry) << "a's sub-blocks are stale";
  ASSERT_TRUE(table.push(*again, 0, {1000, 1010}));
  const SeqIssued issued = table.issue(0, "b", 50, out, 0);
  ASSERT_EQ(issued.range_count, 1u);
  EXPECT_EQ(out[0], (proto::Range{1000, 10}));
}

TEST(SequenceTableTest, MonotonicIssuesOnlyAsOwnerBelowTheLimit) {
  SequenceTable table(2);
  const auto slot = table.create("tick", SeqMode::monotonic, 3);
  Ranges out{};
  SeqIssued issued = table.issue(0, "tick", 5, out, 0);
  EXPECT_EQ(issued.answer, SeqAnswer::not_owner);
  EXPECT_EQ(issued.owner, proto::not_owner_unknown);
  table.set_not_owner(*slot, 9);
  EXPECT_EQ(table.issue(0, "tick", 5, out, 0).owner, 9u);
  table.take_ownership(*slot, 500);
  EXPECT_EQ(table.issue(0, "tick", 5, out, 0).answer, SeqAnswer::retry) << "nothing durable yet";
  table.raise_limit(*slot, 508);
  issued = table.issue(1, "tick", 5, out, 0);
  ASSERT_EQ(issued.answer, SeqAnswer::issued);
  EXPECT_EQ(out[0], (proto::Range{500, 5}));
  issued = table.issue(0, "tick", 5, out, 0);
  EXPECT_EQ(out[0], (proto::Range{505, 3})) << "never above the durable limit";
  EXPECT_EQ(table.issue(0, "tick", 5, out, 0).answer, SeqAnswer::retry);
  table.set_not_owner(*slot, 4);
  EXPECT_EQ(table.issue(0, "tick", 5, out, 0).answer, SeqAnswer::not_owner);
}

// The serving deadline, with the burst time moved by hand: a monotonic owner issues while its
// burst clock is below serve_until, answers NOT_OWNER (owner unknown) at and past it even with
// numbers left below its limit (a process woken after its lease expired), and issues again,
// continuing where it stopped, once the sequence thread (flurry-seq) moves the deadline forward
// (a renewal). A segment sequence answers RETRY past it, keeping its sub-blocks.
TEST(SequenceTableTest, NothingIsIssuedAtOrPastTheServingDeadline) {
  SequenceTable table(1);
  const auto mono = table.create("tick", SeqMode::monotonic, 1);
  const auto seg = table.create("seg", SeqMode::segment, 2);
  ASSERT_TRUE(mono && seg);
  EXPECT_EQ(table.serve_until(*mono), SequenceTable::no_deadline) << "a new slot has no deadline";
  std::uint64_t now_ms = 1'700'000'000'000;
  table.set_serve_until(*mono, now_ms + 100);
  table.set_serve_until(*seg, now_ms + 100);
  table.take_ownership(*mono, 10);
  table.raise_limit(*mono, 1000);
  ASSERT_TRUE(table.push(*seg, 0, {40, 50}));
  std::set<std::uint64_t> seen, seen_seg;  // per sequence: every number once
  Ranges out{};
  SeqIssued issued = table.issue(0, "tick", 5, out, now_ms);
  ASSERT_EQ(issued.answer, SeqAnswer::issued);
  for (std::uint64_t n : numbers(out, issued)) EXPECT_TRUE(seen.insert(n).second) << n << " twice";
  issued = table.issue(0, "seg", 5, out, now_ms + 99);
  ASSERT_EQ(issued.answer, SeqAnswer::issued) << "one ms before the deadline still serves";
  for (std::uint64_t n : numbers(out, issued)) EXPECT_TRUE(seen_seg.insert(n).second) << n << " twice";
  for (const std::uint64_t late : {now_ms + 100, now_ms + 101, now_ms + 60'000}) {
    issued = table.issue(0, "tick", 5, out, late);
    EXPECT_EQ(issued.answer, SeqAnswer::not_owner) << late - now_ms << " ms after";
    EXPECT_EQ(issued.owner, proto::not_owner_unknown);
    EXPECT_EQ(issued.ids, 0u);
    issued = table.issue(0, "seg", 5, out, late);
    EXPECT_EQ(issued.answer, SeqAnswer::retry) << late - now_ms << " ms after";
    EXPECT_EQ(issued.ids, 0u);
  }
  EXPECT_EQ(table.monotonic_next(*mono), 15u) << "nothing taken past the deadline";
  // Not the owner: NOT_OWNER still names the owner, deadline or not.
  table.set_not_owner(*mono, 7);
  EXPECT_EQ(table.issue(0, "tick", 5, out, now_ms + 200).owner, 7u);
  // A renewal moves the deadline forward: serving resumes where it stopped.
  table.take_ownership(*mono, 15);
  table.raise_limit(*mono, 1000);
  table.set_serve_until(*mono, now_ms + 10'000);
  table.set_serve_until(*seg, now_ms + 10'000);
  issued = table.issue(0, "tick", 5, out, now_ms + 200);
  ASSERT_EQ(issued.answer, SeqAnswer::issued);
  EXPECT_EQ(out[0], (proto::Range{15, 5}));
  for (std::uint64_t n : numbers(out, issued)) EXPECT_TRUE(seen.insert(n).second) << n << " twice";
  issued = table.issue(0, "seg", 5, out, now_ms + 200);
  ASSERT_EQ(issued.answer, SeqAnswer::issued);
  EXPECT_EQ(out[0], (proto::Range{45, 5})) << "the segment sub-block was kept";
  for (std::uint64_t n : numbers(out, issued)) EXPECT_TRUE(seen_seg.insert(n).second) << n << " twice";
  // The deadline may also move back (a wall-clock step the sequence thread, flurry-seq, followed).
  table.set_serve_until(*mono, now_ms);
  EXPECT_EQ(table.issue(0, "tick", 5, out, now_ms + 200).answer, SeqAnswer::not_owner);
}

// Four workers take numbers while the control thread raises the limit: every number once,
// each worker's numbers increasing, and none at or above the limit published when it was taken.
TEST(SequenceTableTest, MonotonicUnderThreadsIsUniqueAndIncreasing) {
  constexpr std::uint32_t workers = 4;
  SequenceTable table(workers);
  const auto slot = table.create("m", SeqMode::monotonic, 1);
  table.take_ownership(*slot, 1);
  std::atomic<bool> done{false};
  std::vector<std::vector<std::uint64_t>> seen(workers);
  std::vector<std::thread> threads;
  for (std::uint32_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      Ranges out{};
      while (!done.load()) {
        const SeqIssued issued = table.issue(w, "m", 3, out, 0);
        for (std::uint64_t n : numbers(out, issued)) seen[w].push_back(n);
      }
    });
  }
  for (std::uint64_t limit = 1; limit <= 200'001; limit += 1000) table.raise_limit(*slot, limit);
  while (table.monotonic_next(*slot) < 200'001) std::this_thread::yield();
  done = true;
  for (auto& thread : threads) thread.join();
  std::set<std::uint64_t> all;
  for (const auto& numbers_of_worker : seen) {
    EXPECT_TRUE(std::is_sorted(numbers_of_worker.begin(), numbers_of_worker.end()));
    for (std::uint64_t n : numbers_of_worker) EXPECT_TRUE(all.insert(n).second) << n << " twice";
  }
  EXPECT_EQ(all.size(), 200'000u);
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), 200'000u);
}

// The handler answers GET_SEQ from the table with the statuses of PROTOCOL.md.
class SeqHandlerTest : public ::testing::Test {
 protected:
  SeqHandlerTest() : table_(1), handler_(config(), stats_) { handler_.start_above(0); }
  HandlerConfig config() {
    HandlerConfig c;
    c.node_id = 3;
    c.sequences = &table_;
    return c;
  }
  proto::ResponseView ask(std::string_view name, std::uint32_t count, bool fenced = false,
                          std::uint64_t now_unix_ms = 0) {
    proto::Request request;
    request.opcode = proto::Opcode::get_seq;
    request.count = count;
    request.request_id = 77;
    std::copy(name.begin(), name.end(), request.name.bytes.begin());
    request.name.size = static_cast<std::uint8_t>(name.size());
    const std::size_t size = proto::encode_request(request, in_, 60);
    const Burst burst{1000, fenced ? ceiling_fenced : 5000, now_unix_ms};
    const std::size_t answer = handler_.handle(std::span<const std::uint8_t>(in_.data(), size), out_, burst);
    EXPECT_LE(answer, proto::response_size_max(size));
    return proto::decode_response(std::span<const std::uint8_t>(out_.data(), answer));
  }

  WorkerStats stats_;
  SequenceTable table_;
  Handler handler_;
  std::array<std::uint8_t, proto::datagram_size_max> in_{};
  std::array<std::uint8_t, proto::datagram_size_max> out_{};
};

TEST_F(SeqHandlerTest, EveryStatus) {
  proto::ResponseView view = ask("nope", 5);
  ASSERT_EQ(view.error, proto::ResponseError::ok);
  EXPECT_EQ(view.header.status, proto::Status::unknown_sequence);
  const auto seg = table_.create("seg", SeqMode::segment, 1);
  view = ask("seg", 5);
  EXPECT_EQ(view.header.status, proto::Status::retry);
  EXPECT_EQ(view.header.detail, 1000u);
  ASSERT_TRUE(table_.push(*seg, 0, {40, 50}));
  view = ask("seg", 5);
  ASSERT_EQ(view.header.status, proto::Status::ok);
  ASSERT_EQ(view.header.range_count, 1u);
  EXPECT_EQ(view.range(0), (proto::Range{40, 5}));
  EXPECT_EQ(ask("seg", 5, true).header.status, proto::Status::fenced);
  const auto mono = table_.create("mono", SeqMode::monotonic, 2);
  table_.set_not_owner(*mono, 12);
  view = ask("mono", 5);
  EXPECT_EQ(view.header.status, proto::Status::not_owner);
  EXPECT_EQ(view.header.detail, 12u);
  // The handler passes the burst's clock: an owner past its serving deadline is NOT_OWNER.
  table_.take_ownership(*mono, 1);
  table_.raise_limit(*mono, 100);
  table_.set_serve_until(*mono, 2000);
  view = ask("mono", 5, false, 2000);
  EXPECT_EQ(view.header.status, proto::Status::not_owner);
  EXPECT_EQ(view.header.detail, proto::not_owner_unknown);
  EXPECT_EQ(stats_.get(Outcome::requests_get_seq), 6u);
  EXPECT_EQ(stats_.get(Outcome::seq_ids_issued), 5u);
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 0u) << "sequence numbers are not Snowflake IDs";
  EXPECT_EQ(stats_.get(Outcome::answered_unknown_sequence), 1u);
  EXPECT_EQ(stats_.get(Outcome::answered_not_owner), 2u);
  EXPECT_EQ(stats_.get(Outcome::answered_retry), 1u);
  EXPECT_EQ(stats_.get(Outcome::answered_fenced), 1u);
  EXPECT_EQ(stats_.get(Outcome::answered_ok), 1u);
}

}  // namespace
}  // namespace flurry::core
