// tests/control/sequence_manager_test.cc — the SequenceManager's dynamic step (Leaf's): a
// block that lasted less than block_target doubles the next step, one that lasted more than
// 8 x block_target halves it, never beyond [step_min, step_max], and the step in use survives a
// restart (it is part of the durable record). Local mode, a real SequenceStore on a temporary
// directory; every number issued is checked for duplicates across both lives.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <set>
#include <vector>

#include "control/sequence_manager.h"
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

}  // namespace
}  // namespace flurry::control
