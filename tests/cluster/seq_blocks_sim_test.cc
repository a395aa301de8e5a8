// tests/cluster/seq_blocks_sim_test.cc — seeded simulations of named sequences in cluster
// mode against the in-memory etcd, whose transactions lose answers (after applying the write,
// or without applying it), are delayed (applied later, while the caller heard nothing), or
// find etcd down:
//   * the block protocol of segment sequences (control/cluster/seq_blocks.h): three nodes
//     reserve blocks of random sizes while nodes crash (forgetting everything in memory) and
//     restart under a new instance tag. Checked: the blocks any node used never overlap, and
//     after the storm the key is above every block used.
//   * the whole node (SequenceManager, SequenceTable, SeqBlocks) with a segment and a
//     monotonic sequence: three nodes with node-id leases kept alive on a simulated clock,
//     refill steps and worker bursts in random order, crashes (kill -9: the lease stays
//     until its TTL), pauses past the lease TTL (SIGSTOP: a paused node neither steps nor
//     keeps its lease alive, and on waking its workers run before its next step), wall-clock
//     steps (less than the lease margin between two steps of a node). Checked: no segment
//     number twice; the monotonic sequence strictly increasing in the order numbers were
//     issued across the cluster (ownership moves on takeover with strictly increasing
//     numbers); the monotonic name changes owner at least once over the seeds. It found the
//     re-claim under a new lease that went on from the old published limit (settle_owner).
// Prints its seeds; FLURRY_TEST_SEED=N replays one.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "control/cluster/memory_store.h"
#include "control/cluster/seq_blocks.h"
#include "control/node/sequence_manager.h"
#include "core/sequence_table.h"
#include "persist/sequence_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/seed.h"
#include "tests/support/temp_dir.h"

namespace flurry::control::cluster {
namespace {

// etcd with faults. A delayed transaction is queued and applied at a later step (the caller
// was told unavailable); a lost answer applies the transaction and answers unavailable; a
// dropped one applies nothing.
class StormyStore final : public KvStore {
 public:
  StormyStore(MemoryStore& store, std::mt19937_64& rng) : store_(store), rng_(rng) {}
  Result<TxnResult> txn(const Txn& t) override {
    if (down) return unavailable();
    const auto roll = rng_() % 100;
    if (roll < 5) {
      delayed_.push_back(t);
      return unavailable();
    }
    if (roll < 10) return unavailable();  // dropped before etcd
    Result<TxnResult> result = store_.txn(t);
    if (roll < 20) return unavailable();  // applied, answer lost
    return result;
  }
  // Applies one delayed transaction, if any, now.
  void deliver_one() {
    if (delayed_.empty()) return;
    const std::size_t index = rng_() % delayed_.size();
    (void)store_.txn(delayed_[index]);
    delayed_.erase(delayed_.begin() + static_cast<std::ptrdiff_t>(index));
  }
  Result<LeaseGrant> lease_grant(std::int64_t ttl) override { return store_.lease_grant(ttl); }
  Result<std::int64_t> lease_keepalive(std::int64_t id) override { return store_.lease_keepalive(id); }
  Status lease_revoke(std::int64_t id) override { return store_.lease_revoke(id); }
  std::string endpoint() const override { return "storm"; }

  bool down = false;

 private:
  static Error unavailable() { return Error{"simulated: no answer", StatusCode::unavailable}; }
  MemoryStore& store_;
  std::mt19937_64& rng_;
  std::deque<Txn> delayed_;
};

TEST(SeqBlocksSimulation, BlocksOfAllNodesNeverOverlapThroughLossDelayAndCrashes) {
  for (const std::uint64_t seed : testing::test_seeds(200)) {
    SCOPED_TRACE(testing::replay_hint(seed));
    std::mt19937_64 rng(seed);
    testing::ManualClock clock;
    MemoryStore etcd(clock);
    StormyStore storm(etcd, rng);
    constexpr int nodes = 3;
    std::vector<std::unique_ptr<SeqBlocks>> node(nodes);
    std::vector<int> starts(nodes, 0);
    auto restart = [&](int n) {
      node[n] = std::make_unique<SeqBlocks>(storm, "c",
                                            "node" + std::to_string(n) + "." + std::to_string(starts[n]++));
    };
    for (int n = 0; n < nodes; ++n) restart(n);
    // Created once: an answer lost after the put makes the next try say "exists".
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const Status created = node[0]->create("orders", 1000, core::SeqMode::segment);
      if (created.ok() || created.code() == StatusCode::refused) break;
    }
    ASSERT_TRUE(etcd.get("/flurry/c/seq/orders"));
    std::map<std::uint64_t, std::uint64_t> used;  // first -> end, every block any node used
    std::uint64_t reserved = 0;
    for (int step = 0; step < 400; ++step) {
      const int n = static_cast<int>(rng() % nodes);
      const auto action = rng() % 100;
      if (action < 3) {
        restart(n);  // a crash: whatever was pending is forgotten
      } else if (action < 8) {
        storm.down = !storm.down;
      } else if (action < 20) {
        storm.deliver_one();
      } else {
        Result<core::SeqBlock> block = node[n]->reserve("orders", 0, 1 + rng() % 100);
        if (!block.ok()) continue;
        ASSERT_GE(block->first, 1000u);
        const auto after = used.lower_bound(block->first);
        ASSERT_TRUE(after == used.end() || after->first >= block->end)
            << "block [" << block->first << ", " << block->end << ") overlaps one used before";
        ASSERT_TRUE(after == used.begin() || std::prev(after)->second <= block->first)
            << "block [" << block->first << ", " << block->end << ") overlaps one used before";
        used[block->first] = block->end;
        ++reserved;
      }
    }
    storm.down = false;
    const auto final_value = etcd.get("/flurry/c/seq/orders");
    ASSERT_TRUE(final_value);
    if (!used.empty()) {
      EXPECT_GE(std::stoull(final_value->value), used.rbegin()->second) << "the key fell below a used block";
    }
    EXPECT_GT(reserved, 0u);
  }
}

// One flurryd of the node simulation: its table, manager and SeqBlocks over the stormy etcd,
// its node-id lease kept alive like flurryd's (deadline from when the last keep-alive was
// sent; the holder's serving deadline that less the margin, as ClusterMode computes it).
struct SimNode {
  static constexpr std::int64_t lease_ttl_s = 3;
  static constexpr std::uint64_t margin_ms = 600;  // ClusterMode::sequence_lease_margin_ms() for 3 s

  SimNode(KvStore& kv, const testing::ManualClock& base, const std::string& dir, const std::string& instance,
          std::uint32_t id)
      : clock(base),
        node_id(id),
        store(open(dir)),
        blocks(kv, "c", instance),
        manager(table, *store, options(), &blocks, &clock) {
    manager.set_holder([this]() -> std::optional<control::SequenceManager::Holder> {
      const std::uint64_t now_ns = clock.mono_ns();
      if (lease_id == 0 || now_ns >= lease_deadline_ns) return std::nullopt;
      const std::uint64_t margin_ns = margin_ms * 1'000'000;
      const std::uint64_t until = lease_deadline_ns > now_ns + margin_ns
                                      ? clock.wall_ms() + (lease_deadline_ns - now_ns - margin_ns) / 1'000'000
                                      : 0;
      return control::SequenceManager::Holder{node_id, lease_id, until};
    });
  }
  static std::unique_ptr<persist::SequenceStore> open(const std::string& dir) {
    std::filesystem::create_directories(dir);
    auto store = persist::SequenceStore::open(dir, false);
    return store.ok() ? std::move(store).value() : nullptr;
  }
  static control::SequenceOptions options() {
    control::SequenceOptions o;
    o.step_initial = 20;
    o.step_min = 4;
    o.step_max = 64;
    o.sync_period = std::chrono::milliseconds(0);  // real time: every step lists
    o.shared_retry = std::chrono::milliseconds(0);
    return o;
  }
  // A keep-alive (or a new lease once the old one is gone), straight to etcd unless it is down.
  void keep_alive(MemoryStore& etcd, bool down) {
    if (down) return;
    const std::uint64_t sent_ns = clock.mono_ns();
    if (lease_id != 0) {
      Result<std::int64_t> ttl = etcd.lease_keepalive(lease_id);
      if (ttl.ok()) {
        lease_deadline_ns = sent_ns + static_cast<std::uint64_t>(*ttl) * 1'000'000'000ULL;
        return;
      }
      lease_id = 0;  // expired: the node id is gone; claim again
    }
    Result<LeaseGrant> grant = etcd.lease_grant(lease_ttl_s);
    if (!grant.ok()) return;
    lease_id = grant->lease_id;
    lease_deadline_ns = sent_ns + static_cast<std::uint64_t>(grant->ttl_s) * 1'000'000'000ULL;
  }

  testing::OffsetClock clock;
  std::uint32_t node_id;
  core::SequenceTable table{2};
  std::unique_ptr<persist::SequenceStore> store;
  SeqBlocks blocks;
  control::SequenceManager manager;
  std::int64_t lease_id = 0;
  std::uint64_t lease_deadline_ns = 0;
  std::uint64_t paused_until_ns = 0;  // SIGSTOP until then
  std::int64_t wall_moved_ms = 0;     // wall-clock steps since the last manager step
};

TEST(SequenceClusterSimulation, SegmentNeverTwiceMonotonicStrictlyIncreasingThroughFaultsPausesAndCrashes) {
  std::uint64_t owner_changes = 0;
  std::uint64_t monotonic_issued = 0;
  std::uint64_t segment_issued = 0;
  std::uint64_t paused_refusals = 0;
  for (const std::uint64_t seed : testing::test_seeds(30)) {
    SCOPED_TRACE(testing::replay_hint(seed));
    std::mt19937_64 rng(seed);
    testing::ManualClock clock;
    MemoryStore etcd(clock);
    StormyStore storm(etcd, rng);
    flurry::testing::TempDir dir("flurry-seq-cluster-sim.");
    constexpr int nodes = 3;
    std::vector<std::unique_ptr<SimNode>> node(nodes);
    std::vector<int> starts(nodes, 0);
    auto restart = [&](int n) {
      const std::string name = std::to_string(n) + "." + std::to_string(starts[n]++);
      node[n] = std::make_unique<SimNode>(storm, clock, dir.sub(name), "node" + name,
                                          static_cast<std::uint32_t>(n + 1));
      ASSERT_TRUE(node[n]->store) << "the local store did not open";
      node[n]->keep_alive(etcd, false);
    };
    for (int n = 0; n < nodes; ++n) restart(n);
    for (const auto& [name, mode] :
         {std::pair{"seg", core::SeqMode::segment}, std::pair{"mono", core::SeqMode::monotonic}}) {
      for (int attempt = 0; attempt < 1000; ++attempt) {
        const Status created = node[0]->manager.create(name, 100, mode);
        if (created.ok() || created.code() == StatusCode::refused) break;
      }
    }
    ASSERT_TRUE(etcd.get("/flurry/c/seq/seg") && etcd.get("/flurry/c/seq/mono"));
    std::set<std::uint64_t> segment_seen;
    std::uint64_t monotonic_last = 0;
    int monotonic_last_node = -1;
    std::array<proto::Range, 8> out{};
    auto take = [&](int n, std::uint32_t worker, bool monotonic) {
      SimNode& s = *node[n];
      const core::SeqIssued issued =
          s.table.issue(worker, monotonic ? "mono" : "seg", 1 + rng() % 8, out, s.clock.wall_ms());
      if (monotonic && issued.answer == core::SeqAnswer::not_owner && s.paused_until_ns != 0)
        ++paused_refusals;
      for (std::uint32_t r = 0; r < issued.range_count; ++r) {
        for (std::uint64_t x = out[r].first; x < out[r].first + out[r].count; ++x) {
          if (monotonic) {
            ASSERT_GT(x, monotonic_last) << "monotonic: node " << n << " issued " << x << " after node "
                                         << monotonic_last_node << " issued " << monotonic_last;
            if (monotonic_last_node >= 0 && monotonic_last_node != n) ++owner_changes;
            monotonic_last = x;
            monotonic_last_node = n;
            ++monotonic_issued;
          } else {
            ASSERT_TRUE(segment_seen.insert(x).second)
                << "segment: " << x << " issued twice (node " << n << ")";
            ++segment_issued;
          }
        }
      }
    };
    for (int round = 0; round < 3000; ++round) {
      clock.advance_ms(rng() % 60);
      const int n = static_cast<int>(rng() % nodes);
      SimNode& s = *node[n];
      const bool paused = clock.mono_ns() < s.paused_until_ns;
      if (!paused && s.paused_until_ns != 0) {
        // Waking: the workers answer what waited in the socket before the next step runs.
        for (std::uint32_t w = 0; w < 2; ++w) take(n, w, true);
        s.paused_until_ns = 0;
      }
      const auto action = rng() % 100;
      if (action < 2) {
        restart(n);  // kill -9: the lease stays in etcd until its TTL
      } else if (action < 4 && !paused) {
        s.paused_until_ns = clock.mono_ns() + (2000 + rng() % 4000) * 1'000'000ULL;  // past the TTL, or not
      } else if (action < 6) {
        storm.down = !storm.down;
      } else if (action < 8) {
        // A wall-clock step either way. The serving deadline is published in wall-clock terms
        // on every step, so a step back since the last one extends it: the margin covers up to
        // margin_ms (flurryd steps every millisecond; a larger step back inside one is the
        // documented limit), and so does this simulation, across pauses too.
        const std::int64_t delta = static_cast<std::int64_t>(rng() % 401) - 200;
        if (std::abs(s.wall_moved_ms + delta) < static_cast<std::int64_t>(SimNode::margin_ms) - 100) {
          s.clock.offset_ms += delta;
          s.wall_moved_ms += delta;
        }
      } else if (action < 18) {
        storm.deliver_one();
      } else if (paused) {
        continue;
      } else if (action < 35) {
        s.keep_alive(etcd, storm.down);
      } else if (action < 60) {
        s.manager.step();
        s.wall_moved_ms = 0;
      } else {
        take(n, static_cast<std::uint32_t>(rng() % 2), rng() % 2 == 0);
      }
      if (HasFatalFailure()) return;
    }
  }
  std::printf(
      "cluster sequence simulation: %llu segment and %llu monotonic numbers, %llu owner changes, "
      "%llu NOT_OWNER answers from paused owners on waking\n",
      static_cast<unsigned long long>(segment_issued), static_cast<unsigned long long>(monotonic_issued),
      static_cast<unsigned long long>(owner_changes), static_cast<unsigned long long>(paused_refusals));
  EXPECT_GT(segment_issued, 0U);
  EXPECT_GT(monotonic_issued, 0U);
  EXPECT_GT(owner_changes, 0U)
      << "the monotonic sequence never changed owner: the takeover was not exercised";
}

}  // namespace
}  // namespace flurry::control::cluster
