// tests/control/simulation_test.cc — seeded deterministic simulation of one flurry node.
//
// Drives the real pieces — control::WatermarkScheduler, core::Handler (and through it the
// Generator and the wire codec), the Ceiling and the Assignment — with a manual clock and an
// in-memory durable store, through random events: request bursts on random cores (sized to
// overflow the counter), clock steps back and forward (1 ms up to an hour), disk failures,
// and process crashes at random points, including in the middle of a watermark write (the
// write then lands or is lost, and is never acknowledged). Checks, for every ID ever issued:
//   * it is unique across every restart;
//   * its time field is at or below the ceiling published when it was issued;
//   * its time field is at or below the store's durable watermark (then and forever);
//   * after a restart every ID is larger than every ID issued before the crash;
//   * run-ahead is bounded: its time field is at most `lead` ahead of a reference clock that
//     never runs backwards (wall time carried at monotonic pace, resumed above the floor).
// The seed is printed; FLURRY_TEST_SEED=N replays one seed, FLURRY_TEST_SEEDS=N runs N seeds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <unordered_set>
#include <vector>

#include "control/scheduler.h"
#include "core/handler.h"
#include "dataplane/backend.h"
#include "proto/wire.h"
#include "tests/support/manual_clock.h"
#include "tests/support/seed.h"
#include "tests/support/sim_workers.h"

namespace flurry {
namespace {

using testing::ManualClock;

struct Crash {};

// The disk: survives crashes. A write that is interrupted by a crash lands or is lost (coin
// flip) but is never acknowledged.
struct Disk {
  std::uint64_t durable_t = 0;
};

class SimDurability final : public control::Durability {
 public:
  SimDurability(Disk& disk, std::mt19937_64& rng) : disk_(disk), rng_(rng) {}
  Status make_durable(std::uint64_t watermark_t) override {
    EXPECT_GE(watermark_t, disk_.durable_t) << "the scheduler lowered the watermark";
    if (fail_writes) return Error{"simulated EIO"};
    if (crash_in_next_write) {
      crash_in_next_write = false;
      if (rng_() % 2 == 0) disk_.durable_t = watermark_t;  // landed, never acknowledged
      throw Crash{};
    }
    disk_.durable_t = watermark_t;
    return {};
  }
  control::DegradedCause failure_cause() const override { return control::DegradedCause::disk; }

  bool fail_writes = false;
  bool crash_in_next_write = false;

 private:
  Disk& disk_;
  std::mt19937_64& rng_;
};

// One incarnation of the process: everything here is lost in a crash.
struct Process {
  Process(const proto::Layout& layout, std::uint32_t workers, std::uint32_t lead_ms, Disk& disk,
          std::mt19937_64& rng, const ManualClock& clock)
      : shared(workers),
        durability(disk, rng),
        scheduler(layout, control::Timings::of_lead(lead_ms, layout.time_unit_ms), durability, shared,
                  clock) {}
  // What a worker does on its tick: pick up a new assignment.
  void sync_assignment(const proto::Layout& layout, std::uint32_t workers) {
    sim.sync(shared, layout, workers);
  }

  core::Shared shared;
  SimDurability durability;
  control::WatermarkScheduler scheduler;
  testing::SimWorkers sim;
};

struct Totals {
  std::uint64_t ids = 0;
  std::uint64_t retries = 0;
  std::uint64_t crashes = 0;
  std::uint64_t steps_back = 0;
  std::uint64_t partial = 0;
};

void simulate(std::uint64_t seed, Totals* totals) {
  SCOPED_TRACE(testing::replay_hint(seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };

  proto::Layout layout;
  const std::uint32_t workers = static_cast<std::uint32_t>(uniform(1, 4));
  layout.core_bits = proto::core_bits_for(workers);
  // Small sequence fields make counter overflow (borrowing) and ceiling hits common.
  layout.sequence_bits = static_cast<unsigned>(uniform(layout.core_bits + 1, 12));
  layout.node_bits = 10;
  const std::uint32_t lead_ms = static_cast<std::uint32_t>(uniform(20, 3000));

  ManualClock clock;
  Disk disk;
  std::unordered_set<std::uint64_t> seen;
  std::uint64_t max_before_crash = 0;  // largest ID of all earlier incarnations
  std::uint64_t max_this_run = 0;

  std::optional<Process> process;
  const std::uint64_t lead_t = std::max<std::uint64_t>(lead_ms / layout.time_unit_ms, 2);
  control::ForwardClock reference;  // the bound the scheduler promises, computed independently
  auto boot = [&] {
    const std::uint64_t first_t = disk.durable_t + 1;
    reference.raise_to(layout.epoch_ms + (first_t > lead_t ? first_t - lead_t : 0) * layout.time_unit_ms,
                       clock.mono_ns());
    process.emplace(layout, workers, lead_ms, disk, rng, clock);
    try {
      while (!process->scheduler.start(0, disk.durable_t).ok()) {
        process->durability.fail_writes = false;  // the operator fixed the disk
      }
    } catch (const Crash&) {
      ++totals->crashes;
      process.reset();
      return false;
    }
    process->sync_assignment(layout, workers);
    return true;
  };
  while (!boot()) {
  }

  std::array<std::uint8_t, proto::datagram_size_max> request{};
  std::array<std::uint8_t, proto::datagram_size_max> answer{};
  const int steps = 2000;
  for (int step = 0; step < steps; ++step) {
    const std::uint64_t event = uniform(0, 99);
    // The forward clock is defined by the instants it is read at: read it at every event,
    // as often as the scheduler (which reads it on each tick) or more.
    reference.now_ms(clock.wall_ms(), clock.mono_ns());
    try {
      if (event < 60) {
        // A burst of GET_IDS on one core, read clock and ceiling once as a worker does.
        const std::uint32_t core = static_cast<std::uint32_t>(uniform(0, workers - 1));
        core::Burst burst;
        burst.now_t = layout.time_from_unix_ms(clock.wall_ms());
        burst.ceiling_t = core::load_burst_ceiling(process->shared.ceiling, process->shared.assignment,
                                                   process->sim.seen_generation,
                                                   [&] { process->sync_assignment(layout, workers); });
        const int requests = static_cast<int>(uniform(1, 4));
        for (int r = 0; r < requests; ++r) {
          proto::Request get;
          get.opcode = proto::Opcode::get_ids;
          get.count = static_cast<std::uint32_t>(uniform(1, 700));
          get.request_id = rng();
          const std::size_t size =
              proto::encode_request(get, request, proto::request_size_for_ranges(uniform(1, 121)));
          const std::size_t answered = process->sim.handlers[core].handle(
              std::span<const std::uint8_t>(request.data(), size), answer, burst);
          ASSERT_GT(answered, 0U);
          const auto view = proto::decode_response(std::span<const std::uint8_t>(answer.data(), answered));
          ASSERT_EQ(view.error, proto::ResponseError::ok);
          ASSERT_EQ(view.header.request_id, get.request_id);
          if (view.header.status == proto::Status::retry) {
            ++totals->retries;
            continue;
          }
          ASSERT_EQ(view.header.status, proto::Status::ok);
          std::uint64_t issued = 0;
          for (std::size_t i = 0; i < view.header.range_count; ++i) {
            const proto::Range range = view.range(i);
            for (std::uint32_t k = 0; k < range.count; ++k) {
              const std::uint64_t id = range.first + k;
              const proto::Decoded decoded = layout.decode(id);
              ASSERT_TRUE(seen.insert(id).second) << "duplicate ID " << id;
              ASSERT_LE(decoded.time, burst.ceiling_t) << "issued above the published ceiling";
              ASSERT_LE(decoded.time, disk.durable_t) << "issued above the durable watermark";
              ASSERT_EQ(decoded.core, core);
              ASSERT_GT(id, max_before_crash) << "ID after a restart not above every earlier ID";
              ASSERT_LE(decoded.time,
                        layout.time_from_unix_ms(reference.now_ms(clock.wall_ms(), clock.mono_ns())) + lead_t)
                  << "run-ahead beyond the lead";
              max_this_run = std::max(max_this_run, id);
            }
            issued += range.count;
          }
          totals->ids += issued;
          if (issued < get.count) ++totals->partial;
        }
        process->sim.handlers[core].publish();
      } else if (event < 85) {
        clock.advance_ms(uniform(0, lead_ms / 2 + 1));
        reference.now_ms(clock.wall_ms(), clock.mono_ns());
        process->scheduler.tick();
        process->sync_assignment(layout, workers);
      } else if (event < 90) {
        // Clock steps: back or forward, 1 ms up to an hour.
        const auto magnitude = static_cast<std::int64_t>(uniform(1, 3'600'000));
        const bool back = uniform(0, 1) == 0;
        clock.step_wall_ms(back ? -magnitude : magnitude);
        reference.now_ms(clock.wall_ms(), clock.mono_ns());
        totals->steps_back += back ? 1 : 0;
      } else if (event < 94) {
        process->durability.fail_writes = uniform(0, 2) == 0;
      } else if (event < 97) {
        // Crash inside the next watermark write.
        process->durability.crash_in_next_write = true;
        clock.advance_ms(lead_ms);
        reference.now_ms(clock.wall_ms(), clock.mono_ns());
        process->scheduler.tick();
      } else {
        throw Crash{};  // kill -9 between events
      }
    } catch (const Crash&) {
      ++totals->crashes;
      max_before_crash = std::max(max_before_crash, max_this_run);
      process.reset();
      clock.advance_ms(uniform(0, 50));
      while (!boot()) {
      }
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(Simulation, NoDuplicateNoIssueAboveCeilingAcrossCrashesAndClockSteps) {
  const std::vector<std::uint64_t> seeds = testing::test_seeds(40);
  Totals totals;
  for (const std::uint64_t seed : seeds) {
    std::printf("simulation seed %llu (replay: %s)\n", static_cast<unsigned long long>(seed),
                testing::replay_hint(seed).c_str());
    simulate(seed, &totals);
    if (HasFatalFailure()) return;
  }
  std::printf(
      "simulated %zu seeds: %llu IDs, %llu RETRY answers, %llu partial answers, %llu crashes, %llu clock "
      "steps back\n",
      seeds.size(), static_cast<unsigned long long>(totals.ids),
      static_cast<unsigned long long>(totals.retries), static_cast<unsigned long long>(totals.partial),
      static_cast<unsigned long long>(totals.crashes), static_cast<unsigned long long>(totals.steps_back));
  // The events must really have happened, or the checks above proved nothing.
  EXPECT_GT(totals.ids, 0U);
  EXPECT_GT(totals.crashes, 0U);
  EXPECT_GT(totals.steps_back, 0U);
  EXPECT_GT(totals.retries + totals.partial, 0U);
}

}  // namespace
}  // namespace flurry
