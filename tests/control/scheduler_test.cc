// tests/control/scheduler_test.cc — the watermark scheduler's rules, with a manual clock:
//   * run-ahead is bounded: under overload no ID's time field gets more than `lead` ahead of
//     a clock that never runs backwards; the excess is answered RETRY and shown (at_ceiling);
//   * a wall clock that steps back (at run time or across a restart) never blocks issuing;
//   * a renewal never asks for less than a watermark it asked for before;
//   * a fence or drain is never undone by a write that was in flight;
//   * a hanging write is visible (degraded, named, not healthy) to another thread at once;
//   * a node that cannot issue (layout's end) is never healthy.
#include <gtest/gtest.h>

#include <array>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "control/scheduler.h"
#include "core/generator.h"
#include "dataplane/backend.h"
#include "tests/support/manual_clock.h"
#include "tests/support/status.h"

namespace flurry {
namespace {

using control::ServeState;

// Records every W asked for; fails or calls a hook on demand.
struct ScriptedDurability final : control::Durability {
  std::vector<std::uint64_t> asked;
  std::uint64_t durable_t = 0;
  bool fail = false;
  std::function<void()> during_write;  // runs inside make_durable, before it returns
  Status make_durable(std::uint64_t watermark_t) override {
    asked.push_back(watermark_t);
    if (during_write) during_write();
    if (fail) return Error{"simulated EIO"};
    durable_t = std::max(durable_t, watermark_t);
    return {};
  }
  control::DegradedCause failure_cause() const override { return control::DegradedCause::disk; }
};

struct Node {
  explicit Node(const proto::Layout& l, std::uint32_t lead_ms = 100)
      : layout(l),
        shared(1),
        scheduler(layout, control::Timings::of_lead(lead_ms, layout.time_unit_ms), durability, shared, clock),
        generator(layout, 1, 0) {}

  // One overloaded burst: ask for far more IDs than one unit holds. Returns IDs issued.
  std::uint32_t burst(std::uint32_t count) {
    const std::uint64_t now_t = layout.time_from_unix_ms(clock.wall_ms());
    std::array<proto::Range, 64> ranges{};
    const auto issued = generator.issue(now_t, shared.ceiling.load(), count, ranges);
    for (std::uint32_t i = 0; i < issued.range_count; ++i) {
      const std::uint64_t t = layout.decode(ranges[i].first).time;
      max_issued_t = std::max(max_issued_t, t);
      EXPECT_LE(t, durability.durable_t) << "issued above the durable watermark";
    }
    shared.stats[0].last_t.store(generator.last_t());
    return issued.ids;
  }

  proto::Layout layout;
  testing::ManualClock clock;
  ScriptedDurability durability;
  core::Shared shared;
  control::WatermarkScheduler scheduler;
  core::Generator generator;
  std::uint64_t max_issued_t = 0;
};

proto::Layout small_sequence_layout() {
  proto::Layout layout;
  layout.sequence_bits = 4;  // 16 IDs per ms: easy to overload
  return layout;
}

TEST(Scheduler, RunAheadIsBoundedUnderOverload) {
  Node node(small_sequence_layout(), 100);
  ASSERT_TRUE(testing::is_ok(node.scheduler.start(1, 0)));
  node.generator.start_above(0);
  std::uint64_t refused = 0;
  for (int ms = 0; ms < 2000; ++ms) {
    // 64 ranges of 16 IDs per burst: 64 ms of the layout's capacity asked for every 1 ms.
    if (node.burst(1024) < 1024) ++refused;
    node.clock.advance_ms(1);
    node.scheduler.tick();
    const std::uint64_t now_t = node.layout.time_from_unix_ms(node.clock.wall_ms());
    ASSERT_LE(node.max_issued_t, now_t + node.scheduler.lead_t())
        << "the time field ran more than the lead ahead of the clock, at ms " << ms;
  }
  EXPECT_GT(refused, 1000U) << "overload must be refused (RETRY), not borrowed without bound";
  const auto snapshot = node.scheduler.snapshot();
  EXPECT_TRUE(snapshot.stats.at_ceiling);
  EXPECT_GT(snapshot.stats.ceiling_reached_ticks, 0U);
  EXPECT_TRUE(snapshot.healthy) << "overload is visible, but the node still issues: healthy";
}

TEST(Scheduler, AClockStepBackAtRunTimeNeverBlocks) {
  Node node(small_sequence_layout(), 100);
  ASSERT_TRUE(testing::is_ok(node.scheduler.start(1, 0)));
  node.generator.start_above(0);
  for (int ms = 0; ms < 50; ++ms) {
    node.burst(8);
    node.clock.advance_ms(1);
    node.scheduler.tick();
  }
  node.clock.step_wall_ms(-3'600'000);
  node.scheduler.tick();
  std::uint64_t issued = 0;
  for (int ms = 0; ms < 500; ++ms) {
    issued += node.burst(8);
    node.clock.advance_ms(1);
    node.scheduler.tick();
  }
  // 8 per ms fits the capacity (16 per ms): every request is answered in full.
  EXPECT_EQ(issued, 500U * 8);
  EXPECT_EQ(node.scheduler.stats().clock_steps_back, 1U);
}

TEST(Scheduler, AFloorAheadOfTheWallClockAtStartServesAtOnce) {
  // A restart after the wall clock stepped back an hour: the durable floor is an hour ahead.
  Node node(small_sequence_layout(), 100);
  const std::uint64_t now_t = node.layout.time_from_unix_ms(node.clock.wall_ms());
  const std::uint64_t floor_t = now_t + 3'600'000;
  node.durability.durable_t = floor_t;
  ASSERT_TRUE(testing::is_ok(node.scheduler.start(1, floor_t)));
  node.generator.start_above(floor_t);
  EXPECT_EQ(node.burst(8), 8U) << "the first unit above the floor is issuable at once";
  std::uint64_t issued = 0;
  for (int ms = 0; ms < 200; ++ms) {
    node.clock.advance_ms(1);
    node.scheduler.tick();
    issued += node.burst(8);
  }
  EXPECT_EQ(issued, 200U * 8) << "the ceiling rises at the pace of real time above the floor";
  // And never more than the lead above the floor plus the time that passed.
  EXPECT_LE(node.max_issued_t, floor_t + 1 + 200 + node.scheduler.lead_t());
}

TEST(Scheduler, NeverAsksForLessThanAWatermarkItAskedForBefore) {
  Node node(small_sequence_layout(), 100);
  ASSERT_TRUE(testing::is_ok(node.scheduler.start(1, 0)));
  node.clock.advance_ms(200);
  node.durability.fail = true;  // e.g. stored locally, then etcd failed
  node.scheduler.tick();
  const std::uint64_t attempted = node.durability.asked.back();
  node.clock.step_wall_ms(-3'600'000);
  node.durability.fail = false;
  for (int i = 0; i < 5; ++i) {
    node.scheduler.tick();
    node.clock.advance_ms(10);
  }
  for (std::size_t i = 1; i < node.durability.asked.size(); ++i) {
    EXPECT_GE(node.durability.asked[i], node.durability.asked[i - 1]) << "renewal " << i << " went lower";
  }
  EXPECT_GE(node.durability.asked.back(), attempted);
  EXPECT_EQ(node.scheduler.state(), ServeState::serving);
}

TEST(Scheduler, ADrainOrFenceDuringAWriteIsNotUndoneByIt) {
  for (const bool drain : {true, false}) {
    Node node(small_sequence_layout(), 100);
    ASSERT_TRUE(testing::is_ok(node.scheduler.start(1, 0)));
    const std::uint64_t held = node.shared.ceiling.load();
    node.durability.during_write = [&] { drain ? node.scheduler.drain() : node.scheduler.fence(); };
    node.clock.advance_ms(100);
    node.scheduler.tick();
    // Drained: the "draining" value (FENCED answered with detail fenced_draining).
    EXPECT_EQ(node.shared.ceiling.load(), drain ? core::ceiling_draining : core::ceiling_fenced)
        << (drain ? "drain" : "fence");
    EXPECT_TRUE(core::is_fenced(node.shared.ceiling.load()));
    EXPECT_EQ(node.scheduler.state(), drain ? ServeState::draining : ServeState::fenced);
    EXPECT_FALSE(node.scheduler.snapshot().healthy);
    EXPECT_NE(held, core::ceiling_fenced);
  }
}

TEST(Scheduler, AHangingWriteIsVisibleToAnotherThreadAndNamed) {
  Node node(small_sequence_layout(), 400);
  ASSERT_TRUE(testing::is_ok(node.scheduler.start(1, 0)));
  ASSERT_TRUE(node.scheduler.snapshot().healthy);
  std::mutex mutex;
  std::condition_variable changed;
  bool writing = false;
  bool release = false;
  node.durability.during_write = [&] {
    std::unique_lock lock(mutex);
    writing = true;
    changed.notify_all();
    changed.wait(lock, [&] { return release; });
  };
  node.clock.advance_ms(400);
  std::thread renew([&] { node.scheduler.tick(); });
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return writing; });
  }
  // Shortly after the write started it is only pending; past stall_ms it is a degraded state.
  EXPECT_TRUE(node.scheduler.snapshot().healthy);
  node.clock.advance_ms(node.scheduler.stall_ms());
  const auto stalled = node.scheduler.snapshot();
  EXPECT_FALSE(stalled.healthy);
  EXPECT_EQ(stalled.state, ServeState::degraded);
  EXPECT_EQ(stalled.state_name, "degraded_disk");
  EXPECT_NE(stalled.cause.find("pending"), std::string::npos) << stalled.cause;
  EXPECT_GE(stalled.pending_ms, node.scheduler.stall_ms());
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  changed.notify_all();
  renew.join();
  EXPECT_TRUE(node.scheduler.snapshot().healthy);
  EXPECT_EQ(node.scheduler.snapshot().stats.stalled_writes, 1U) << "a stall that ended stays on record";
}

TEST(Scheduler, ANodeAtTheLayoutsEndIsNeverHealthy) {
  proto::Layout layout;
  layout.time_bits = 41;
  Node node(layout, 100);
  const std::string error = testing::failure(node.scheduler.start(1, layout.time_max()));
  EXPECT_NE(error.find("end of the layout's time range"), std::string::npos) << error;
  EXPECT_EQ(node.scheduler.state(), ServeState::exhausted);
  EXPECT_FALSE(node.scheduler.snapshot().healthy);

  // One unit below the end: serves that unit, then is exhausted.
  Node last(layout, 100);
  ASSERT_TRUE(testing::is_ok(last.scheduler.start(1, layout.time_max() - 1)));
  last.generator.start_above(layout.time_max() - 1);
  last.durability.durable_t = layout.time_max();
  EXPECT_GT(last.burst(1 << 20), 0U);
  last.scheduler.tick();
  const auto snapshot = last.scheduler.snapshot();
  EXPECT_EQ(snapshot.state, ServeState::exhausted);
  EXPECT_FALSE(snapshot.healthy);
}

}  // namespace
}  // namespace flurry
