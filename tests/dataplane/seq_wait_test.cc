// tests/dataplane/seq_wait_test.cc — dataplane/frontend.h issue_seq_or_create, what every front
// door (RESP INCR/INCRBY, HTTP /v1/seq, memcached incr) asks a named sequence through:
//
//   * a sequence whose sub-blocks ran dry on this slice waits for the next one instead of
//     answering TRYAGAIN at once (door callers do not retry as flurry's clients do);
//   * bounded: with nothing coming, RETRY after the wait, nothing issued;
//   * a partial answer is returned as it is (its numbers are issued; asking again would skip them);
//   * an unknown name is created through the hook, and its first sub-block waited for; a
//     creation refused says why.
// Over a real SequenceTable and Slice; the manual clock is the slice's wall clock only (the
// wait itself is real time: the tests never depend on how long it takes).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/shared.h"
#include "core/slice.h"
#include "dataplane/frontend.h"
#include "proto/layout.h"
#include "tests/support/manual_clock.h"

namespace flurry::dataplane {
namespace {

using proto::Range;
using proto::Status;

constexpr std::uint32_t slices = 3;  // two workers and this door
constexpr std::uint32_t door_core = 2;

class SeqWaitTest : public ::testing::Test {
 protected:
  SeqWaitTest() {
    layout_.core_bits = proto::core_bits_for(slices);
    const std::uint64_t now_t = layout_.time_from_unix_ms(clock_.wall_ms());
    shared_.assignment.publish(77, now_t - 10, clock_.wall_ms());
    shared_.ceiling.publish(now_t + 50);
    config_.clock = &clock_;
    config_.sequence_wait = std::chrono::seconds(60);  // generous: a test never waits it out
  }
  core::SliceConfig slice_config() const {
    core::SliceConfig config;
    config.layout = layout_;
    config.core = door_core;
    config.workers = slices;
    return config;
  }
  // Requests the door's slice has seen (each issue_seq is one; counted as it starts).
  std::uint64_t attempts() const { return shared_.stats[door_core].get(core::Outcome::rx_datagrams); }
  // Asks the door's slice answered RETRY: counted after the ask looked for a sub-block and
  // found none.
  std::uint64_t dry_answers() const { return shared_.stats[door_core].get(core::Outcome::answered_retry); }
  // Pushes `block` for the door once the slice has answered `dry` asks RETRY, so the push comes
  // after the door's refused ask whatever the scheduler does. (Waiting for the ask to be counted
  // in attempts() was not enough: it is counted before the ask looks, and a push in between
  // turned the first ask into an answer: 30 of 12,000 runs under contention.) The wait decides
  // nothing by itself: it ends when the door's call has returned (returned_), so code that never
  // asks again fails the test's assertions instead of hanging it.
  std::thread push_after(std::size_t slot, std::uint64_t dry, core::SeqBlock block) {
    return std::thread([this, slot, dry, block] {
      while (dry_answers() < dry && !returned_.load())
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (dry_answers() >= dry) {
        EXPECT_TRUE(shared_.sequences.push(slot, door_core, block));
      }
    });
  }

  testing::ManualClock clock_;
  proto::Layout layout_;
  core::Shared shared_{slices};
  FrontendConfig config_;
  std::vector<Range> ranges_ = std::vector<Range>(8);
  std::string refusal_;
  std::atomic<bool> returned_{false};  // the door's call under test has returned
};

TEST_F(SeqWaitTest, ASequenceThatRanDryWaitsForItsNextSubBlock) {
  core::Slice slice(slice_config(), shared_);
  const auto slot = shared_.sequences.create("tickets", core::SeqMode::segment, 7);
  ASSERT_TRUE(slot);
  // The next sub-block comes only after the door's first ask was refused.
  std::thread refill = push_after(*slot, 1, {300, 310});
  const core::Issued issued =
      issue_seq_or_create(slice, config_, "tickets", 5, ranges_, core::Source::none(), true, &refusal_);
  returned_ = true;
  refill.join();
  ASSERT_EQ(issued.status, Status::ok) << "waited for the refill, not TRYAGAIN";
  ASSERT_EQ(issued.range_count, 1U);
  EXPECT_EQ(ranges_[0].first, 300U);
  EXPECT_EQ(ranges_[0].count, 5U);
  EXPECT_GE(attempts(), 2U);
  EXPECT_TRUE(refusal_.empty());
}

TEST_F(SeqWaitTest, WithNothingComingItIsRetryAfterTheBoundedWait) {
  config_.sequence_wait = std::chrono::milliseconds(20);
  core::Slice slice(slice_config(), shared_);
  ASSERT_TRUE(shared_.sequences.create("tickets", core::SeqMode::segment, 7));
  const core::Issued issued =
      issue_seq_or_create(slice, config_, "tickets", 1, ranges_, core::Source::none(), true, &refusal_);
  EXPECT_EQ(issued.status, Status::retry);
  EXPECT_EQ(issued.ids, 0U);
  EXPECT_GE(attempts(), 2U) << "asked again while waiting";
}

TEST_F(SeqWaitTest, APartialAnswerIsReturnedNotAskedAgain) {
  core::Slice slice(slice_config(), shared_);
  const auto slot = shared_.sequences.create("tickets", core::SeqMode::segment, 7);
  ASSERT_TRUE(slot);
  ASSERT_TRUE(shared_.sequences.push(*slot, door_core, {100, 103}));
  // FLURRY.SEQ tickets 5 (numbers in pieces allowed): three come, then the slice ran dry.
  const core::Issued issued =
      issue_seq_or_create(slice, config_, "tickets", 5, ranges_, core::Source::none(), false, &refusal_);
  EXPECT_EQ(issued.status, Status::retry);
  EXPECT_EQ(issued.ids, 3U);
  ASSERT_EQ(issued.range_count, 1U);
  EXPECT_EQ(ranges_[0].first, 100U) << "the issued numbers are the answer's, not overwritten";
  EXPECT_EQ(ranges_[0].count, 3U);
}

TEST_F(SeqWaitTest, AnUnknownNameIsCreatedAndItsFirstSubBlockWaitedFor) {
  core::Slice slice(slice_config(), shared_);
  std::thread refill;
  std::vector<std::string> created;
  config_.create_sequence = [&](const std::string& name) {
    created.push_back(name);
    const auto slot = shared_.sequences.create(name, core::SeqMode::segment, 9);
    if (!slot) return flurry::Status(Error{"table full"});
    refill = push_after(*slot, 1, {1, 1001});  // after the first ask that finds the new name dry
    return flurry::Status();
  };
  const core::Issued issued =
      issue_seq_or_create(slice, config_, "orders:eu", 1, ranges_, core::Source::none(), true, &refusal_);
  returned_ = true;
  if (refill.joinable()) refill.join();
  EXPECT_EQ(created, std::vector<std::string>{"orders:eu"});
  ASSERT_EQ(issued.status, Status::ok);
  EXPECT_EQ(ranges_[0].first, 1U);
  EXPECT_TRUE(refusal_.empty());
}

TEST_F(SeqWaitTest, ACreationRefusedSaysWhy) {
  core::Slice slice(slice_config(), shared_);
  config_.create_sequence = [](const std::string&) {
    return flurry::Status(Error{"the state dir is read-only"});
  };
  const core::Issued issued =
      issue_seq_or_create(slice, config_, "orders", 1, ranges_, core::Source::none(), true, &refusal_);
  EXPECT_EQ(issued.status, Status::unknown_sequence);
  EXPECT_EQ(refusal_, "no sequence 'orders', and it was not created: the state dir is read-only");
  EXPECT_EQ(attempts(), 1U);
}

}  // namespace
}  // namespace flurry::dataplane
