// tests/cluster/lease_sim_test.cc — seeded simulation of the node-id lease protocol.
//
// Several flurry nodes run control/cluster/Membership against one linearizable in-memory
// store (MemoryStore, etcd's semantics) through a faulty network: requests dropped, answers
// lost after the write was applied, transactions delayed and delivered later in random
// order, the store down for a while. Nodes pause (like SIGSTOP) past their lease, crash and
// restart with the same instance id, and their wall clocks step both ways. Each node runs
// the scheduler's rule (publish ceiling W only after renew said ok) and issues IDs at
// t = max(now, last_t), sometimes borrowing t + 1.
// Checked on every issue:
//   * no two claims ever issue in the same (node, time unit);
//   * nothing is issued above the watermark durable in the store for that node.
// Prints its seed; FLURRY_TEST_SEED=N replays one seed, FLURRY_TEST_SEEDS=K runs K seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/clock.h"
#include "control/cluster/membership.h"
#include "control/cluster/memory_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/seed.h"

namespace flurry::control::cluster {
namespace {

using testing::ManualClock;
using testing::OffsetClock;

constexpr std::uint64_t ms_ns = 1'000'000;

// The world's clock: shared monotonic time (the store's lease clock) from 1 s, wall time one
// day after the layout's epoch plus that; both only move forward together. A node's wall clock
// is an OffsetClock over it, stepped either way by the chaos.
constexpr std::uint64_t world_start_wall_ms = proto::default_epoch_ms + 86'400'000ULL + 1'000;

struct Faults {
  int drop_percent = 4;        // request never reaches the store
  int lose_reply_percent = 4;  // applied, but the caller hears nothing (ambiguous)
  int delay_percent = 4;       // transaction delivered later, out of order; caller times out
};

// A delayed transaction, applied to the store when it comes due.
struct InFlight {
  std::uint64_t due_ns;
  Txn txn;
};

// One node's connection to the store, with faults.
class SimLink final : public KvStore {
 public:
  SimLink(MemoryStore& store, std::mt19937_64& rng, const Faults& faults, std::vector<InFlight>& in_flight,
          const Clock& world_clock)
      : store_(store), rng_(rng), faults_(faults), in_flight_(in_flight), world_clock_(world_clock) {}

  Result<TxnResult> txn(const Txn& txn) override {
    const int roll = percent();
    if (roll < faults_.drop_percent) return unavailable();
    if (roll < faults_.drop_percent + faults_.delay_percent) {
      in_flight_.push_back({world_clock_.mono_ns() + (rng_() % 4000) * ms_ns, txn});
      return unavailable();
    }
    Result<TxnResult> result = store_.txn(txn);
    if (roll < faults_.drop_percent + faults_.delay_percent + faults_.lose_reply_percent)
      return unavailable();
    return result;
  }
  Result<LeaseGrant> lease_grant(std::int64_t ttl_s) override {
    const int roll = percent();
    if (roll < faults_.drop_percent) return unavailable();
    Result<LeaseGrant> grant = store_.lease_grant(ttl_s);
    if (roll < faults_.drop_percent + faults_.lose_reply_percent) return unavailable();
    return grant;
  }
  Result<std::int64_t> lease_keepalive(std::int64_t id) override {
    const int roll = percent();
    if (roll < faults_.drop_percent) return unavailable();
    Result<std::int64_t> ttl_left = store_.lease_keepalive(id);
    if (roll < faults_.drop_percent + faults_.lose_reply_percent) return unavailable();
    return ttl_left;
  }
  Status lease_revoke(std::int64_t id) override {
    if (percent() < faults_.drop_percent) return unavailable();
    return store_.lease_revoke(id);
  }
  std::string endpoint() const override { return "sim"; }

 private:
  int percent() { return static_cast<int>(rng_() % 100); }
  static Error unavailable() { return Error{"sim: no answer", StatusCode::unavailable}; }
  MemoryStore& store_;
  std::mt19937_64& rng_;
  const Faults& faults_;
  std::vector<InFlight>& in_flight_;
  const Clock& world_clock_;
};

struct SimConfig {
  std::uint32_t nodes = 4;
  unsigned node_bits = 2;  // 4 node ids for up to `nodes` claimers: contention on purpose
  std::uint64_t steps = 12'000;
  std::uint64_t lead_ms = 3000;
  std::int64_t lease_ttl_s = 4;
  Faults faults;
  bool break_floor = false;  // test the checker: start at `now`, ignoring the watermark
};

struct SimReport {
  std::string violation;  // empty: every check held
  std::uint64_t issued = 0, claims = 0, lost = 0, takeovers = 0, restarts = 0, pauses = 0, steps_back = 0;
};

class Simulation {
 public:
  Simulation(std::uint64_t seed, const SimConfig& config)
      : config_(config), rng_(seed), world_clock_(world_start_wall_ms), store_(world_clock_) {
    layout_.node_bits = config.node_bits;
    layout_.sequence_bits = 22 - config.node_bits;
    for (std::uint32_t i = 0; i < config.nodes; ++i) {
      auto node = std::make_unique<Node>(world_clock_);
      node->instance = "instance-" + std::to_string(i);
      node->link = std::make_unique<SimLink>(store_, rng_, config_.faults, in_flight_, world_clock_);
      node->keeper_link = std::make_unique<SimLink>(store_, rng_, config_.faults, in_flight_, world_clock_);
      nodes_.push_back(std::move(node));
      restart(*nodes_.back());
    }
  }

  SimReport run() {
    for (std::uint64_t step = 0; step < config_.steps && report_.violation.empty(); ++step) {
      world_clock_.advance_ms(1 + rng_() % 40);
      deliver_due();
      chaos();
      for (auto& node : nodes_) {
        if (node->paused_until_ns > world_clock_.mono_ns()) continue;
        act(*node);
        if (!report_.violation.empty()) break;
      }
    }
    return report_;
  }

 private:
  struct Node {
    explicit Node(const Clock& world_clock) : clock(world_clock) {}
    std::string instance;
    OffsetClock clock;
    std::unique_ptr<SimLink> link, keeper_link;
    std::unique_ptr<Membership> membership;
    bool holding = false;
    std::uint32_t node_id = 0;
    std::uint64_t claim_id = 0;
    std::uint64_t ceiling_t = 0;  // 0: nothing published
    std::uint64_t last_t = 0;
    std::uint64_t local_durable_t = 0;  // the node's local watermark file: survives restarts
    std::uint64_t next_claim_ns = 0, next_keepalive_ns = 0;
    std::uint64_t paused_until_ns = 0;
  };

  void restart(Node& node) {
    MembershipConfig config;
    config.cluster = "sim";
    config.instance_id = node.instance;
    config.layout = layout_;
    config.lease_ttl_s = config_.lease_ttl_s;
    config.clock_skew_ms_max = 3'600'000;  // clocks step on purpose here; sanity has its own tests
    node.membership = std::make_unique<Membership>(*node.link, node.clock, config);
    node.holding = false;
    node.ceiling_t = 0;
    node.last_t = 0;
    node.next_claim_ns = world_clock_.mono_ns();
  }

  std::uint64_t now_t(const Node& node) const { return layout_.time_from_unix_ms(node.clock.wall_ms()); }

  void deliver_due() {
    std::shuffle(in_flight_.begin(), in_flight_.end(), rng_);  // out of order
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if (it->due_ns <= world_clock_.mono_ns()) {
        (void)store_.txn(it->txn);  // a late delivery: nobody hears the answer
        it = in_flight_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void chaos() {
    const std::uint64_t roll = rng_() % 10'000;
    Node& node = *nodes_[rng_() % nodes_.size()];
    if (roll < 8) {  // pause past the lease TTL (SIGSTOP)
      node.paused_until_ns = world_clock_.mono_ns() +
                             (static_cast<std::uint64_t>(config_.lease_ttl_s) * 1000 + rng_() % 8000) * ms_ns;
      ++report_.pauses;
    } else if (roll < 14) {  // crash and restart: memory gone, local watermark file kept
      restart(node);
      ++report_.restarts;
    } else if (roll < 24) {  // wall clock steps, either way, up to 2 s
      const std::int64_t step = static_cast<std::int64_t>(rng_() % 4001) - 2000;
      if (step < 0) ++report_.steps_back;
      node.clock.offset_ms += step;
    } else if (roll < 28) {  // the store goes down for a while
      store_down_until_ns_ = world_clock_.mono_ns() + (rng_() % 6000) * ms_ns;
    }
    store_.set_available(world_clock_.mono_ns() >= store_down_until_ns_);
  }

  void fence(Node& node) {
    node.holding = false;
    node.ceiling_t = 0;
    node.next_claim_ns = world_clock_.mono_ns() + 100 * ms_ns;
  }

  void renew(Node& node) {
    const std::uint64_t w = std::max({now_t(node), node.last_t, node.ceiling_t}) + config_.lead_ms;
    node.local_durable_t = std::max(node.local_durable_t, w);  // local write first, like ClusterDurability
    const Status renewed = node.membership->renew(w);
    if (renewed.ok()) {
      node.ceiling_t = w;  // durable everywhere: publish
    } else if (renewed.code() == StatusCode::lost) {
      ++report_.lost;
      fence(node);
    }  // otherwise keep the held ceiling
  }

  void act(Node& node) {
    if (!node.holding) {
      if (world_clock_.mono_ns() < node.next_claim_ns) return;
      if (!node.membership->claim().ok()) {
        node.next_claim_ns = world_clock_.mono_ns() + (50 + rng_() % 500) * ms_ns;
        return;
      }
      node.holding = true;
      node.node_id = node.membership->node_id();
      node.claim_id = ++claims_;
      ++report_.claims;
      const std::uint64_t floor =
          config_.break_floor ? now_t(node) : std::max(node.membership->floor_t(), node.local_durable_t);
      if (node_last_claim_.count(node.node_id) != 0 && node_last_claim_[node.node_id] != node.instance)
        ++report_.takeovers;
      node_last_claim_[node.node_id] = node.instance;
      node.last_t = floor;  // start_above(floor)
      node.ceiling_t = 0;
      renew(node);
      return;
    }
    if (world_clock_.mono_ns() >= node.next_keepalive_ns) {
      (void)node.membership->keepalive(*node.keeper_link);
      node.next_keepalive_ns = world_clock_.mono_ns() +
                               static_cast<std::uint64_t>(node.membership->keepalive_interval_ms()) * ms_ns;
      if (node.membership->lease_expired()) {
        ++report_.lost;
        fence(node);
        return;
      }
    }
    const std::uint64_t lead_left = node.ceiling_t > std::max(now_t(node), node.last_t)
                                        ? node.ceiling_t - std::max(now_t(node), node.last_t)
                                        : 0;
    if (lead_left <= config_.lead_ms * 3 / 4) {
      renew(node);
      if (!node.holding) return;
    }
    const int burst = static_cast<int>(rng_() % 4);
    for (int i = 0; i < burst; ++i) issue(node, rng_() % 8 == 0);
  }

  void issue(Node& node, bool borrow) {
    std::uint64_t t = std::max(now_t(node), node.last_t);
    if (borrow || t == node.last_t) t = node.last_t + 1;    // counter ran out: borrow the next unit
    if (node.ceiling_t == 0 || t > node.ceiling_t) return;  // RETRY
    ++report_.issued;
    node.last_t = t;
    const auto key = std::make_pair(node.node_id, t);
    const auto [it, fresh] = slots_.emplace(key, node.claim_id);
    if (!fresh && it->second != node.claim_id) {
      report_.violation = "duplicate: node " + std::to_string(node.node_id) + " time " + std::to_string(t) +
                          " issued by claim " + std::to_string(it->second) + " and claim " +
                          std::to_string(node.claim_id) + " (" + node.instance + ")";
      return;
    }
    const auto stored = store_.get("/flurry/sim/watermark/" + std::to_string(node.node_id));
    std::uint64_t durable = 0;
    if (stored) std::from_chars(stored->value.data(), stored->value.data() + stored->value.size(), durable);
    if (t > durable) {
      report_.violation = "issued above the durable watermark: node " + std::to_string(node.node_id) +
                          " time " + std::to_string(t) + " > " + std::to_string(durable) + " (" +
                          node.instance + ")";
    }
  }

  SimConfig config_;
  std::mt19937_64 rng_;
  ManualClock world_clock_;
  MemoryStore store_;
  proto::Layout layout_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<InFlight> in_flight_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> slots_;
  std::map<std::uint32_t, std::string> node_last_claim_;
  std::uint64_t claims_ = 0;
  std::uint64_t store_down_until_ns_ = 0;
  SimReport report_;
};

TEST(LeaseSimulation, NoDuplicateAndNothingAboveTheDurableWatermark) {
  SimReport total;
  for (const std::uint64_t seed : testing::test_seeds(12)) {
    std::printf("lease simulation seed %llu (replay: %s)\n", static_cast<unsigned long long>(seed),
                testing::replay_hint(seed).c_str());
    const SimReport r = Simulation(seed, SimConfig{}).run();
    ASSERT_EQ(r.violation, "") << "seed " << seed << " (replay with " << testing::replay_hint(seed) << ")";
    total.issued += r.issued;
    total.claims += r.claims;
    total.lost += r.lost;
    total.takeovers += r.takeovers;
    total.restarts += r.restarts;
    total.pauses += r.pauses;
    total.steps_back += r.steps_back;
  }
  std::printf(
      "issued %llu, claims %llu, node ids lost %llu, takeovers %llu, restarts %llu, pauses %llu, clock steps "
      "back %llu\n",
      static_cast<unsigned long long>(total.issued), static_cast<unsigned long long>(total.claims),
      static_cast<unsigned long long>(total.lost), static_cast<unsigned long long>(total.takeovers),
      static_cast<unsigned long long>(total.restarts), static_cast<unsigned long long>(total.pauses),
      static_cast<unsigned long long>(total.steps_back));
  // The run must have exercised what it claims to check.
  EXPECT_GT(total.issued, 10'000U);
  EXPECT_GT(total.takeovers, 0U);
  EXPECT_GT(total.lost, 0U);
  EXPECT_GT(total.restarts, 0U);
}

// The checker has teeth: a protocol that ignores the claimed watermark is caught.
TEST(LeaseSimulation, CatchesANodeThatIgnoresTheWatermark) {
  SimConfig config;
  config.break_floor = true;
  bool caught = false;
  std::uint64_t seed = testing::env_u64("FLURRY_TEST_SEED", 1);
  for (int i = 0; i < 20 && !caught; ++i, ++seed) {
    caught = !Simulation(seed, config).run().violation.empty();
  }
  EXPECT_TRUE(caught) << "a broken floor went unnoticed for 20 seeds";
}

}  // namespace
}  // namespace flurry::control::cluster
