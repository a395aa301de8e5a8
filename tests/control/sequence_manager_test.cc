// tests/control/sequence_manager_test.cc — the SequenceManager in local mode, a real
// SequenceStore on a temporary directory; every number issued is checked for duplicates:
//   * the dynamic step (Leaf's): a block that lasted less than block_target doubles the next
//     step, one that lasted more than 8 x block_target halves it, never beyond [step_min,
//     step_max], and the step in use survives a restart (it is part of the durable record);
//   * never twice across a delete: a deleted name's floor refuses a lower create, before and
//     after a restart, and a create at the floor continues above every number issued;
//   * a table full of live names and floors says which floors hold it;
//   * a sequence that reaches 2^63 answers EXHAUSTED (segment and monotonic), never RETRY for
//     ever, and says so in show, exhausted() and the metrics, across a restart too.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "control/node/sequence_manager.h"
#include "core/sequence_table.h"
#include "persist/sequence_store.h"
#include "tests/support/temp_dir.h"

namespace flurry::control {
namespace {

constexpr std::uint32_t workers = 2;

// Drains the workers' queues and steps until `blocks` more blocks were reserved; the step
// shown after each reservation. Every number issued goes into `seen` (a repeat fails).
std::vector<std::uint64_t> steps_over_blocks(core::SequenceTable& table, SequenceManager& manager, int blocks,
                                             std::set<std::uint64_t>* seen) {
  std::vector<std::uint64_t> steps;
  std::array<proto::Range, 8> out{};
  auto reserved = [&] { return manager.show("a")->at("blocks_reserved").get<std::uint64_t>(); };
  const std::uint64_t target = reserved() + static_cast<std::uint64_t>(blocks);
  for (int round = 0; round < 100'000 && reserved() < target; ++round) {
    const std::uint64_t before = reserved();
    manager.step();
    if (reserved() != before) steps.push_back(manager.show("a")->at("step").get<std::uint64_t>());
    for (std::uint32_t w = 0; w < workers; ++w) {
      const core::SeqIssued issued = table.issue(w, "a", 1000, out, 0);
      for (std::uint32_t r = 0; r < issued.range_count; ++r) {
        for (std::uint64_t n = out[r].first; n < out[r].first + out[r].count; ++n) {
          EXPECT_TRUE(seen->insert(n).second) << n << " issued twice";
        }
      }
    }
  }
  return steps;
}

TEST(SequenceManagerTest, DynamicStepFollowsHowLongBlocksLastWithinBoundsAndSurvivesARestart) {
  testing::TempDir dir("flurry-seq-step.");
  std::set<std::uint64_t> seen;
  SequenceOptions options;
  options.step_initial = 100;
  options.step_min = 50;
  options.step_max = 800;
  {
    auto store = persist::SequenceStore::open(dir.path(), false);
    ASSERT_TRUE(store.ok()) << store.message();
    core::SequenceTable table(workers);
    options.block_target = std::chrono::milliseconds(1'000'000);  // every block ends early: doubles
    SequenceManager manager(table, **store, options);
    ASSERT_TRUE(manager.create("a", 0, core::SeqMode::segment).ok());
    EXPECT_EQ(steps_over_blocks(table, manager, 5, &seen),
              (std::vector<std::uint64_t>{100, 200, 400, 800, 800}));
  }
  {
    auto store = persist::SequenceStore::open(dir.path(), false);
    ASSERT_TRUE(store.ok()) << store.message();
    core::SequenceTable table(workers);
    options.block_target = std::chrono::milliseconds(0);  // every block lasts too long: halves
    SequenceManager manager(table, **store, options);
    manager.load();
    EXPECT_EQ(manager.show("a")->at("step").get<std::uint64_t>(), 800U) << "the step survives a restart";
    EXPECT_EQ(steps_over_blocks(table, manager, 6, &seen),
              (std::vector<std::uint64_t>{800, 400, 200, 100, 50, 50}));
  }
  EXPECT_GT(seen.size(), 3000U);
}

// Every number `name` issues from every worker over one step and one draw each; a repeat fails.
// The answers seen, worker by worker.
std::vector<core::SeqAnswer> draw(core::SequenceTable& table, SequenceManager& manager,
                                  const std::string& name, std::set<std::uint64_t>* seen) {
  std::array<proto::Range, 8> out{};
  std::vector<core::SeqAnswer> answers;
  manager.step();
  for (std::uint32_t w = 0; w < workers; ++w) {
    const core::SeqIssued issued = table.issue(w, name, 1000, out, 0);
    answers.push_back(issued.answer);
    for (std::uint32_t r = 0; r < issued.range_count; ++r) {
      for (std::uint64_t n = out[r].first; n < out[r].first + out[r].count; ++n) {
        EXPECT_TRUE(seen->insert(n).second) << name << ": " << n << " issued twice";
      }
    }
  }
  return answers;
}

SequenceOptions small_steps() {
  SequenceOptions options;
  options.step_initial = 100;
  options.step_min = 100;
  options.step_max = 100;
  return options;
}

// Issue 24, item 6: `seq delete X` then `seq create X` handed out 0.. again. The floor (the
// deleted record's durable upper bound) refuses a lower start, also after a restart; at the
// floor it is accepted and every number is new.
TEST(SequenceManagerTest, DeletedNameKeepsItsFloorAcrossARestartAndRefusesALowerStart) {
  testing::TempDir dir("flurry-seq-floor.");
  std::set<std::uint64_t> seen;
  std::uint64_t floor = 0;
  {
    auto store = persist::SequenceStore::open(dir.path(), false);
    ASSERT_TRUE(store.ok()) << store.message();
    core::SequenceTable table(workers);
    SequenceManager manager(table, **store, small_steps());
    ASSERT_TRUE(manager.create("orders", 0, core::SeqMode::segment).ok());
    for (int round = 0; round < 5; ++round) (void)draw(table, manager, "orders", &seen);
    ASSERT_FALSE(seen.empty());
    ASSERT_TRUE(manager.remove("orders").ok());
    const Status again = manager.create("orders", 0, core::SeqMode::segment);
    EXPECT_EQ(again.code(), StatusCode::refused) << "created again below numbers it issued";
    const std::size_t at = again.message().find("--start ");
    ASSERT_NE(at, std::string::npos) << again.message();
    floor = std::stoull(again.message().substr(at + 8));
    EXPECT_GT(floor, *seen.rbegin()) << "the floor must lie above every number issued";
    EXPECT_EQ(manager.create("orders", floor - 1, core::SeqMode::monotonic).code(), StatusCode::refused);
    nlohmann::json reply;
    ASSERT_TRUE(manager.command({{"op", "list"}}, &reply).ok());
    EXPECT_EQ(reply["deleted"],
              nlohmann::json::parse(R"([{"name":"orders","floor":)" + std::to_string(floor) + "}]"))
        << reply.dump();
  }
  {
    auto store = persist::SequenceStore::open(dir.path(), false);
    ASSERT_TRUE(store.ok()) << store.message();
    core::SequenceTable table(workers);
    SequenceManager manager(table, **store, small_steps());
    manager.load();
    const Status again = manager.create("orders", 0, core::SeqMode::segment);
    EXPECT_EQ(again.code(), StatusCode::refused) << "the floor did not survive the restart";
    EXPECT_NE(again.message().find("--start " + std::to_string(floor)), std::string::npos) << again.message();
    const Result<nlohmann::json> shown = manager.show("orders");
    ASSERT_FALSE(shown.ok());
    EXPECT_NE(shown.message().find("floor is " + std::to_string(floor)), std::string::npos)
        << shown.message();
    // Another name is not held back by it.
    ASSERT_TRUE(manager.create("other", 0, core::SeqMode::segment).ok());
    ASSERT_TRUE(manager.create("orders", floor, core::SeqMode::segment).ok());
    std::set<std::uint64_t> after;
    for (int round = 0; round < 5; ++round) (void)draw(table, manager, "orders", &after);
    ASSERT_FALSE(after.empty());
    EXPECT_EQ(*after.begin(), floor) << "created again at the floor, it starts there";
    for (std::uint64_t n : after) EXPECT_TRUE(seen.insert(n).second) << n << " issued before the delete too";
    // Deleted again: the floor rises to the new bound, never falls.
    ASSERT_TRUE(manager.remove("orders").ok());
    EXPECT_EQ(manager.create("orders", floor, core::SeqMode::segment).code(), StatusCode::refused);
  }
}

// The 64 entries hold live names and deleted names' floors together: full, a new name is
// refused with the floors named; a deleted name created again at its floor reuses its entry.
TEST(SequenceManagerTest, ATableFullOfFloorsNamesThem) {
  testing::TempDir dir("flurry-seq-full.");
  auto store = persist::SequenceStore::open(dir.path(), false);
  ASSERT_TRUE(store.ok()) << store.message();
  core::SequenceTable table(workers);
  SequenceManager manager(table, **store, small_steps());
  for (std::size_t i = 0; i < core::sequences_max; ++i) {
    ASSERT_TRUE(manager.create("s" + std::to_string(i), 7, core::SeqMode::segment).ok());
  }
  for (std::size_t i = 0; i < core::sequences_max; ++i)
    ASSERT_TRUE(manager.remove("s" + std::to_string(i)).ok());
  const Status full = manager.create("fresh", 0, core::SeqMode::segment);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.message().find("s0 (floor 7)"), std::string::npos) << full.message();
  EXPECT_TRUE(manager.create("s3", 7, core::SeqMode::segment).ok());
}

// Issue 24, item 7: a sequence at 2^63 answered RETRY for ever. Created just below it, it
// issues up to 2^63 - 1 and then answers EXHAUSTED on every worker; show, exhausted() and the
// metrics say so, and a restart (its durable bound is 2^63) says so again.
TEST(SequenceManagerTest, ASequenceThatReaches2To63AnswersExhaustedNotRetry) {
  testing::TempDir dir("flurry-seq-end.");
  const std::uint64_t start = core::seq_value_limit - 1234;
  std::set<std::uint64_t> seen_segment, seen_monotonic;
  {
    auto store = persist::SequenceStore::open(dir.path(), false);
    ASSERT_TRUE(store.ok()) << store.message();
    core::SequenceTable table(workers);
    SequenceManager manager(table, **store, small_steps());
    ASSERT_TRUE(manager.create("end", start, core::SeqMode::segment).ok());
    ASSERT_TRUE(manager.create("tick", start, core::SeqMode::monotonic).ok());
    ASSERT_TRUE(manager.create("fine", 0, core::SeqMode::segment).ok());
    bool segment_done = false, monotonic_done = false;
    for (int round = 0; round < 1000 && !(segment_done && monotonic_done); ++round) {
      const auto segment = draw(table, manager, "end", &seen_segment);
      const auto monotonic = draw(table, manager, "tick", &seen_monotonic);
      for (core::SeqAnswer answer : segment) EXPECT_NE(answer, core::SeqAnswer::unknown);
      segment_done = std::all_of(segment.begin(), segment.end(),
                                 [](core::SeqAnswer a) { return a == core::SeqAnswer::exhausted; });
      monotonic_done = std::all_of(monotonic.begin(), monotonic.end(),
                                   [](core::SeqAnswer a) { return a == core::SeqAnswer::exhausted; });
    }
    EXPECT_TRUE(segment_done) << "the segment sequence never answered EXHAUSTED on every worker";
    EXPECT_TRUE(monotonic_done) << "the monotonic sequence never answered EXHAUSTED";
    EXPECT_EQ(seen_segment.size(), 1234U) << "every number up to 2^63 - 1 issued once";
    EXPECT_EQ(seen_monotonic.size(), 1234U);
    EXPECT_EQ(*seen_segment.rbegin(), core::seq_value_limit - 1);
    EXPECT_EQ(*seen_monotonic.rbegin(), core::seq_value_limit - 1);
    EXPECT_EQ(manager.show("end")->at("exhausted"), true);
    EXPECT_EQ(manager.show("fine")->at("exhausted"), false);
    EXPECT_EQ(manager.exhausted(), (std::vector<std::string>{"end", "tick"}));
    const std::string metrics = manager.metrics_text();
    EXPECT_NE(metrics.find("\nflurry_seq_exhausted_sequences 2\n"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("\nflurry_seq_exhausted{sequence=\"end\"} 1\n"), std::string::npos) << metrics;
    // The other sequence is served as before.
    std::set<std::uint64_t> fine;
    EXPECT_EQ(draw(table, manager, "fine", &fine)[0], core::SeqAnswer::issued);
  }
  {
    auto store = persist::SequenceStore::open(dir.path(), false);
    ASSERT_TRUE(store.ok()) << store.message();
    core::SequenceTable table(workers);
    SequenceManager manager(table, **store, small_steps());
    manager.load();
    for (core::SeqAnswer answer : draw(table, manager, "end", &seen_segment))
      EXPECT_EQ(answer, core::SeqAnswer::exhausted);
    for (core::SeqAnswer answer : draw(table, manager, "tick", &seen_monotonic))
      EXPECT_EQ(answer, core::SeqAnswer::exhausted);
    EXPECT_EQ(manager.exhausted(), (std::vector<std::string>{"end", "tick"}));
    // Deleted, it cannot be created again below its floor, which is 2^63: never again.
    ASSERT_TRUE(manager.remove("end").ok());
    EXPECT_TRUE(manager.exhausted() == std::vector<std::string>{"tick"});
    EXPECT_EQ(manager.create("end", core::seq_value_limit - 1, core::SeqMode::segment).code(),
              StatusCode::refused);
  }
}

}  // namespace
}  // namespace flurry::control
