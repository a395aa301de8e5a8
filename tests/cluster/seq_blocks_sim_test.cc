// tests/cluster/seq_blocks_sim_test.cc — a seeded simulation of the cluster block protocol
// of segment sequences (control/cluster/seq_blocks.h) against the in-memory etcd: three
// nodes reserve blocks of random sizes while etcd loses answers (after applying the write, or
// without applying it), delays transactions (applied later, while the caller heard nothing),
// goes down, and nodes crash (forgetting everything in memory) and restart under a new
// instance tag. Checked: the blocks any node used never overlap, and after the storm the key
// is above every block used. Prints its seeds; FLURRY_TEST_SEED=N replays one.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "control/cluster/memory_store.h"
#include "control/cluster/seq_blocks.h"
#include "tests/support/manual_clock.h"
#include "tests/support/seed.h"

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

}  // namespace
}  // namespace flurry::control::cluster
