// tests/control/sequence_sim_test.cc — a seeded simulation of the named-sequence block
// protocol (local mode): the real SequenceManager, SequenceTable and SequenceStore over the
// crash-simulating Io of tests/persist/crash_sim.h. Workers issue numbers in random amounts
// between random refill steps; the machine crashes at a random I/O operation (everything not
// yet synced may be lost, or the last unsynced write torn); the node reboots on what the
// crash left and goes on. Checked: no number of a sequence is ever issued twice across every
// life, a monotonic sequence is strictly increasing across lives, and a sequence whose
// creation was acknowledged survives. Prints its seeds; FLURRY_TEST_SEED=N replays one.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "control/node/sequence_manager.h"
#include "core/sequence_table.h"
#include "persist/sequence_store.h"
#include "tests/persist/crash_sim.h"
#include "tests/support/seed.h"
#include "tests/support/temp_dir.h"

namespace flurry::control {
namespace {

using persist::testing::CrashSim;

constexpr std::uint32_t workers = 3;

struct World {
  std::set<std::uint64_t> segment_seen;
  std::uint64_t monotonic_last = 0;
  bool monotonic_any = false;
  bool created = false;  // both creations acknowledged
  std::uint64_t issued = 0;
  std::uint64_t crashes = 0;
};

// One life of the node: open the store on `dir` through `sim`, load, then serve and refill
// until the sim crashes (or `rounds` run out). Returns a failure text, or "".
std::string live(CrashSim& sim, const std::string& dir, std::mt19937_64& rng, World& world, int rounds) {
  auto opened = persist::SequenceStore::open(dir, rng() % 2 == 0, &sim);
  if (!opened.ok()) {  // fine only when this life's crash hit the opening itself
    return sim.crashed() ? "" : "the store does not open after a crash: " + opened.message();
  }
  core::SequenceTable table(workers);
  SequenceOptions options;
  options.step_initial = 1 + rng() % 64;
  options.step_min = 1;
  options.step_max = 256;
  options.block_target = std::chrono::milliseconds(rng() % 2 == 0 ? 0 : 1'000'000);
  SequenceManager manager(table, **opened, options);
  manager.load();
  if (!world.created) {
    const bool a = manager.create("a", 0, core::SeqMode::segment).ok();
    const bool m = a && manager.create("m", 0, core::SeqMode::monotonic).ok();
    world.created = a && m;
  } else if (!manager.show("a").ok() || !manager.show("m").ok()) {
    return "an acknowledged sequence was lost in the crash";
  }
  std::array<proto::Range, 8> out{};
  for (int round = 0; round < rounds; ++round) {
    if (rng() % 3 == 0) manager.step();
    const auto worker = static_cast<std::uint32_t>(rng() % workers);
    const auto count = static_cast<std::uint32_t>(1 + rng() % 40);
    const bool monotonic = rng() % 2 == 0;
    const core::SeqIssued issued = table.issue(worker, monotonic ? "m" : "a", count, out, 0);
    for (std::uint32_t r = 0; r < issued.range_count; ++r) {
      for (std::uint64_t n = out[r].first; n < out[r].first + out[r].count; ++n) {
        ++world.issued;
        if (monotonic) {
          if (world.monotonic_any && n <= world.monotonic_last) {
            return "monotonic " + std::to_string(n) + " after " + std::to_string(world.monotonic_last);
          }
          world.monotonic_last = n;
          world.monotonic_any = true;
        } else if (!world.segment_seen.insert(n).second) {
          return "segment number " + std::to_string(n) + " issued twice";
        }
      }
    }
  }
  return "";
}

TEST(SequenceSimulation, NoNumberTwiceAcrossCrashesAtRandomOperations) {
  for (const std::uint64_t seed : testing::test_seeds(40)) {
    SCOPED_TRACE(testing::replay_hint(seed));
    std::mt19937_64 rng(seed);
    World world;
    std::vector<std::unique_ptr<testing::TempDir>> dirs;
    dirs.push_back(std::make_unique<testing::TempDir>("flurry-seqsim-"));
    for (int life = 0; life < 6; ++life) {
      const std::string dir = dirs.back()->path();
      CrashSim sim(dir);
      sim.crash_at(rng() % 200);
      const std::string problem = live(sim, dir, rng, world, 300);
      ASSERT_EQ(problem, "") << "life " << life << "\n" << sim.log_text();
      world.crashes += sim.crashed() ? 1 : 0;
      dirs.push_back(std::make_unique<testing::TempDir>("flurry-seqsim-"));
      const bool torn = sim.last_unsynced_write_bytes() > 1 && rng() % 2 == 0;
      sim.materialize(dirs.back()->path(),
                      torn ? CrashSim::After::torn_last_write : CrashSim::After::drop_volatile,
                      torn ? 1 + rng() % (sim.last_unsynced_write_bytes() - 1) : 0);
    }
    std::printf("seed %llu: %llu numbers issued over 6 lives, %llu crashes\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(world.issued),
                static_cast<unsigned long long>(world.crashes));
  }
}

}  // namespace
}  // namespace flurry::control
