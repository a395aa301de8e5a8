// tests/cluster/cluster_sim_test.cc — seeded simulation of a cluster that drives the real
// parts: cluster::Membership (claims, renewals, keep-alives, the lease deadline, clone
// detection) over the in-memory etcd model, cluster::ClusterDurability with a crash-prone
// local disk, control::WatermarkScheduler, core::Assignment / Ceiling / load_burst_ceiling and
// core::Handler. Only ClusterMode's glue (fence when the lease is gone, claim again, reassign
// above max(local, etcd) watermark) is written out here, because ClusterMode builds real etcd
// clients; it is the same dozen lines.
//
// Faults, at random: etcd down, answers lost after the write was applied, nodes paused past
// their lease (and resumed with a burst served *before* flurry-renew or the control loop runs, as a real
// SIGCONT does), crashes (kill -9: no lease revoke) and restarts, wall-clock steps of up to an
// hour on one node, and a clone (a copy of a running member's state dir started beside it).
// Checks, for every ID issued anywhere:
//   * unique across every node, node id and restart;
//   * its time field is at or below the watermark durable in etcd for its node id when it
//     was issued (so a later owner of that node id, starting above it, never repeats it).
// The seed is printed; FLURRY_TEST_SEED=N replays one seed, FLURRY_TEST_SEEDS=N runs N seeds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <unordered_set>
#include <vector>

#include "control/cluster/cluster_durability.h"
#include "control/cluster/membership.h"
#include "control/cluster/memory_store.h"
#include "control/scheduler.h"
#include "core/handler.h"
#include "dataplane/backend.h"
#include "proto/wire.h"
#include "tests/support/manual_clock.h"
#include "tests/support/seed.h"
#include "tests/support/sim_workers.h"

namespace flurry::control::cluster {
namespace {

using NodeClock = testing::OffsetClock;

// etcd with faults: down (nothing applied), or an answer lost after the write was applied.
class FaultyStore final : public KvStore {
 public:
  FaultyStore(MemoryStore& store, std::mt19937_64& rng) : store_(store), rng_(rng) {}
  Result<TxnResult> txn(const Txn& t) override {
    if (down) return unavailable();
    Result<TxnResult> r = store_.txn(t);
    if (lose()) return unavailable();
    return r;
  }
  Result<LeaseGrant> lease_grant(std::int64_t ttl) override {
    if (down) return unavailable();
    Result<LeaseGrant> r = store_.lease_grant(ttl);
    if (lose()) return unavailable();
    return r;
  }
  Result<std::int64_t> lease_keepalive(std::int64_t id) override {
    if (down) return unavailable();
    Result<std::int64_t> r = store_.lease_keepalive(id);
    if (lose()) return unavailable();
    return r;
  }
  Status lease_revoke(std::int64_t id) override {
    if (down) return unavailable();
    return store_.lease_revoke(id);
  }
  std::string endpoint() const override { return "sim"; }

  bool down = false;
  std::uint32_t lose_percent = 0;

 private:
  bool lose() { return lose_percent != 0 && rng_() % 100 < lose_percent; }
  static Error unavailable() { return Error{"simulated: no answer", StatusCode::unavailable}; }
  MemoryStore& store_;
  std::mt19937_64& rng_;
};

struct Crash {};

// The local watermark file: survives crashes; a write cut by a crash may land or not.
struct Disk {
  std::uint64_t durable_t = 0;
};

class SimLocal final : public Durability {
 public:
  SimLocal(Disk& disk, std::mt19937_64& rng) : disk_(disk), rng_(rng) {}
  Status make_durable(std::uint64_t watermark_t) override {
    if (watermark_t < disk_.durable_t) return Error{"refusing to lower the watermark"};
    if (crash_in_next_write) {
      crash_in_next_write = false;
      if (rng_() % 2 == 0) disk_.durable_t = watermark_t;
      throw Crash{};
    }
    disk_.durable_t = watermark_t;
    return {};
  }
  DegradedCause failure_cause() const override { return DegradedCause::disk; }
  bool crash_in_next_write = false;

 private:
  Disk& disk_;
  std::mt19937_64& rng_;
};

constexpr std::uint32_t workers = 2;

// One running incarnation of a member: lost in a crash (its disk and instance id are not).
struct Process {
  Process(const proto::Layout& layout, std::uint32_t lead_ms, FaultyStore& store, NodeClock& clock,
          const MembershipConfig& config, Disk& disk, std::mt19937_64& rng)
      : membership(store, clock, config),
        local(disk, rng),
        durability(&local, membership),
        shared(workers),
        scheduler(layout, control::Timings::of_lead(lead_ms, layout.time_unit_ms), durability, shared,
                  clock) {}

  void sync_assignment(const proto::Layout& layout) { sim.sync(shared, layout, workers); }

  Membership membership;
  SimLocal local;
  ClusterDurability durability;
  core::Shared shared;
  WatermarkScheduler scheduler;
  testing::SimWorkers sim;
  bool started = false;
};

struct Member {
  std::string instance_id;
  Disk disk;
  std::unique_ptr<NodeClock> clock;
  std::optional<Process> process;
  bool paused = false;
};

struct Totals {
  std::uint64_t ids = 0;
  std::uint64_t crashes = 0;
  std::uint64_t reclaims = 0;
  std::uint64_t clones = 0;
};

void simulate(std::uint64_t seed, Totals* totals) {
  SCOPED_TRACE(testing::replay_hint(seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  proto::Layout layout;
  layout.core_bits = proto::core_bits_for(workers);
  layout.node_bits = 3;  // 8 node ids: re-claims and takeovers land on each other often
  layout.sequence_bits = static_cast<unsigned>(uniform(layout.core_bits + 1, 10));
  const std::int64_t ttl_s = 3;
  const auto lead_ms = static_cast<std::uint32_t>(uniform(20, ttl_s * 2000 / 3));

  testing::ManualClock base;
  MemoryStore etcd(base);
  FaultyStore store(etcd, rng);
  std::vector<std::unique_ptr<Member>> members;
  for (int i = 0; i < 3; ++i) {
    auto m = std::make_unique<Member>();
    m->instance_id = "member-" + std::to_string(i);
    m->clock = std::make_unique<NodeClock>(base);
    members.push_back(std::move(m));
  }
  MembershipConfig config;
  config.cluster = "sim";
  config.layout = layout;
  config.lease_ttl_s = ttl_s;
  config.clock_skew_ms_max = 24ULL * 3600 * 1000;  // steps are the point here, not refusals

  std::unordered_set<std::uint64_t> seen;
  const auto watermark_in_etcd = [&](std::uint32_t node) -> std::uint64_t {
    const auto kv = etcd.get("/flurry/sim/watermark/" + std::to_string(node));
    return kv ? std::strtoull(kv->value.c_str(), nullptr, 10) : 0;
  };

  // ClusterMode's glue: start, and each tick fence on a lost lease, claim again, reassign.
  const auto start = [&](Member& m) {
    Process& p = *m.process;
    if (!p.membership.claim().ok()) return;
    const std::uint64_t floor = std::max(m.disk.durable_t, p.membership.floor_t());
    (void)p.scheduler.start(p.membership.node_id(), floor);  // a failed first write retries on ticks
    p.started = true;
    p.sync_assignment(layout);
  };
  const auto tick = [&](Member& m) {
    Process& p = *m.process;
    if (!p.started) return start(m);
    p.scheduler.tick();
    if (p.scheduler.state() != ServeState::fenced && p.membership.lease_expired()) p.scheduler.fence();
    if (p.scheduler.state() == ServeState::fenced) {
      if (p.membership.clone_detected()) {
        p.membership.set_instance_id(m.instance_id + "-remade-" + std::to_string(rng() % 1000000));
        m.instance_id = p.membership.instance_id();
      }
      if (p.membership.claim().ok()) {
        ++totals->reclaims;
        (void)p.scheduler.reassign(p.membership.node_id(),
                                   std::max(m.disk.durable_t, p.membership.floor_t()));
      }
    }
    p.sync_assignment(layout);
  };
  const auto boot = [&](Member& m) {
    MembershipConfig c = config;
    c.instance_id = m.instance_id;
    m.process.emplace(layout, lead_ms, store, *m.clock, c, m.disk, rng);
    m.paused = false;
  };
  for (auto& m : members) boot(*m);

  std::array<std::uint8_t, proto::datagram_size_max> request{};
  std::array<std::uint8_t, proto::datagram_size_max> answer{};
  const auto serve = [&](Member& m) {
    Process& p = *m.process;
    if (!p.started || p.sim.handlers.empty()) return;
    const std::uint32_t core = static_cast<std::uint32_t>(uniform(0, workers - 1));
    core::Burst burst;
    burst.now_t = layout.time_from_unix_ms(m.clock->wall_ms());
    burst.ceiling_t = core::load_burst_ceiling(p.shared.ceiling, p.shared.assignment, p.sim.seen_generation,
                                               [&] { p.sync_assignment(layout); });
    proto::Request get;
    get.opcode = proto::Opcode::get_ids;
    get.count = static_cast<std::uint32_t>(uniform(1, 400));
    get.request_id = rng();
    const std::size_t size =
        proto::encode_request(get, request, proto::request_size_for_ranges(uniform(1, 60)));
    const std::size_t answered =
        p.sim.handlers[core].handle(std::span<const std::uint8_t>(request.data(), size), answer, burst);
    ASSERT_GT(answered, 0U);
    const auto view = proto::decode_response(std::span<const std::uint8_t>(answer.data(), answered));
    ASSERT_EQ(view.error, proto::ResponseError::ok);
    if (view.header.status != proto::Status::ok) return;
    const std::uint32_t node = view.header.node;
    const std::uint64_t durable = watermark_in_etcd(node);
    for (std::size_t i = 0; i < view.header.range_count; ++i) {
      const proto::Range range = view.range(i);
      for (std::uint32_t k = 0; k < range.count; ++k) {
        const std::uint64_t id = range.first + k;
        ASSERT_TRUE(seen.insert(id).second) << "duplicate ID " << id << " from " << m.instance_id;
        ASSERT_LE(layout.decode(id).time, durable)
            << "issued on node " << node << " above its etcd watermark";
      }
      totals->ids += range.count;
    }
    p.sim.handlers[core].publish();
  };

  bool cloned = false;
  for (int step = 0; step < 3000; ++step) {
    Member& m = *members[uniform(0, members.size() - 1)];
    const std::uint64_t event = uniform(0, 999);
    try {
      if (event < 550) {
        if (!m.paused) serve(m);
      } else if (event < 800) {
        base.advance_ms(uniform(0, lead_ms / 3 + 1));
        for (auto& each : members) {
          if (each->paused) continue;
          tick(*each);
          if (uniform(0, 2) != 0) (void)each->process->membership.keepalive(store);
        }
      } else if (event < 830) {
        store.down = !store.down;
      } else if (event < 850) {
        store.lose_percent = static_cast<std::uint32_t>(uniform(0, 1) * uniform(0, 30));
      } else if (event < 880) {
        // Pause past the lease or not; on resume the workers serve before flurry-renew or the control loop.
        if (!m.paused) {
          m.paused = true;
        } else {
          m.paused = false;
          for (int i = 0; i < 3; ++i) serve(m);
          tick(m);
        }
      } else if (event < 900) {
        const auto magnitude = static_cast<std::int64_t>(uniform(1, 3'600'000));
        m.clock->offset_ms += uniform(0, 1) == 0 ? -magnitude : magnitude;
      } else if (event < 930) {
        if (!m.paused && m.process->started) {
          m.process->local.crash_in_next_write = true;
          base.advance_ms(lead_ms);
          tick(m);
        }
      } else if (event < 960) {
        throw Crash{};
      } else if (event < 962 && !cloned) {
        // A copy of this member's state dir (disk and instance id) starts beside it.
        cloned = true;
        ++totals->clones;
        auto clone = std::make_unique<Member>();
        clone->instance_id = m.instance_id;
        clone->disk = m.disk;
        clone->clock = std::make_unique<NodeClock>(base);
        boot(*clone);
        members.push_back(std::move(clone));
      } else {
        base.advance_ms(uniform(0, 5));
      }
    } catch (const Crash&) {
      ++totals->crashes;
      m.process.reset();
      base.advance_ms(uniform(0, 50));
      boot(m);
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(ClusterSimulation, NoDuplicateAcrossTakeoversCrashesPausesClonesAndEtcdFaults) {
  const std::vector<std::uint64_t> seeds = testing::test_seeds(40);
  Totals totals;
  for (const std::uint64_t seed : seeds) {
    std::printf("cluster simulation seed %llu (replay: %s)\n", static_cast<unsigned long long>(seed),
                testing::replay_hint(seed).c_str());
    simulate(seed, &totals);
    if (::testing::Test::HasFatalFailure()) break;
  }
  std::printf("simulated %zu seeds: %llu IDs, %llu crashes, %llu re-claims, %llu clones\n", seeds.size(),
              static_cast<unsigned long long>(totals.ids), static_cast<unsigned long long>(totals.crashes),
              static_cast<unsigned long long>(totals.reclaims),
              static_cast<unsigned long long>(totals.clones));
  EXPECT_GT(totals.ids, 0U);
  EXPECT_GT(totals.reclaims, 0U) << "the simulation never exercised a re-claim";
}

}  // namespace
}  // namespace flurry::control::cluster
