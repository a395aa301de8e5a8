// tests/cluster/sequence_cluster_test.cc — the SequenceManager in cluster mode: two nodes,
// each with its own table, manager and SeqBlocks, over one in-memory etcd (MemoryStore).
// Checked: a sequence created on one node is found by the other; numbers issued by both are
// unique; with etcd down a node issues what it holds, then RETRY, never more; a deleted
// sequence stops being served; monotonic and a second create are refused; a deleted name's
// floor refuses a lower create for good; a sequence at 2^63 answers EXHAUSTED on every node.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "control/cluster/memory_store.h"
#include "control/cluster/seq_blocks.h"
#include "control/node/sequence_manager.h"
#include "core/sequence_table.h"
#include "persist/sequence_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

namespace flurry::control {
namespace {

constexpr std::uint32_t workers = 2;

Result<std::unique_ptr<persist::SequenceStore>> open_store(const std::string& dir) {
  std::filesystem::create_directories(dir);
  return persist::SequenceStore::open(dir, false);
}

// One node: its table, its (unused, cluster mode) local store, its SeqBlocks and manager.
struct Node {
  Node(cluster::KvStore& kv, const std::string& dir, const std::string& instance,
       const Clock* clock = nullptr)
      : store(open_store(dir)),
        blocks(kv, "test", instance),
        manager(table, **store, options(), &blocks, clock) {}
  static SequenceOptions options() {
    SequenceOptions o;
    o.step_initial = 40;
    o.step_min = 8;
    o.step_max = 64;
    o.sync_period = std::chrono::milliseconds(0);
    o.shared_retry = std::chrono::milliseconds(0);
    return o;
  }
  // Issues up to `count` numbers from `worker`; records them in `seen`. The answer.
  core::SeqAnswer issue(std::uint32_t worker, std::uint32_t count, std::set<std::uint64_t>* seen,
                        std::string* duplicate) {
    std::array<proto::Range, 8> out{};
    const core::SeqIssued issued = table.issue(worker, "orders", count, out, 0);
    for (std::uint32_t r = 0; r < issued.range_count; ++r) {
      for (std::uint64_t n = out[r].first; n < out[r].first + out[r].count; ++n) {
        if (!seen->insert(n).second) *duplicate = std::to_string(n);
      }
    }
    return issued.answer;
  }

  core::SequenceTable table{workers};
  Result<std::unique_ptr<persist::SequenceStore>> store;
  cluster::SeqBlocks blocks;
  SequenceManager manager;
};

class SequenceCluster : public ::testing::Test {
 protected:
  testing::ManualClock clock_;
  cluster::MemoryStore kv_{clock_};
  flurry::testing::TempDir dir_{"flurry-seq-cluster."};
};

TEST_F(SequenceCluster, TwoNodesShareASequenceWithoutSharingANumber) {
  Node a(kv_, dir_.path() + "/a", "a"), b(kv_, dir_.path() + "/b", "b");
  ASSERT_TRUE(a.manager.create("orders", 100, core::SeqMode::segment).ok());
  EXPECT_EQ(b.manager.create("orders", 0, core::SeqMode::segment).code(), StatusCode::refused);
  EXPECT_EQ(a.manager.create("m", 0, core::SeqMode::monotonic).code(), StatusCode::refused);  // no holder
  std::set<std::uint64_t> seen;
  std::string duplicate;
  for (int round = 0; round < 400; ++round) {
    a.manager.step();
    b.manager.step();
    for (std::uint32_t w = 0; w < workers; ++w) {
      (void)a.issue(w, 1 + static_cast<std::uint32_t>(round % 7), &seen, &duplicate);
      (void)b.issue(w, 1 + static_cast<std::uint32_t>(round % 5), &seen, &duplicate);
    }
  }
  EXPECT_EQ(duplicate, "") << "issued twice";
  ASSERT_FALSE(seen.empty());
  EXPECT_GE(*seen.begin(), 100U);
  EXPECT_GT(seen.size(), 2000U);
  ASSERT_TRUE(b.manager.show("orders").ok());
  EXPECT_EQ(b.manager.show("orders")->at("store"), "etcd");
}

TEST_F(SequenceCluster, EtcdDownIssuesWhatIsHeldThenRetriesNeverMore) {
  Node a(kv_, dir_.path() + "/a", "a");
  ASSERT_TRUE(a.manager.create("orders", 0, core::SeqMode::segment).ok());
  a.manager.step();
  const std::uint64_t granted =
      *a.manager.show("orders")->at("durable_upper").get_ptr<const std::uint64_t*>();
  kv_.set_available(false);
  std::set<std::uint64_t> seen;
  std::string duplicate;
  core::SeqAnswer last = core::SeqAnswer::issued;
  for (int round = 0; round < 200 && last != core::SeqAnswer::retry; ++round) {
    a.manager.step();
    last = a.issue(0, 3, &seen, &duplicate);
  }
  EXPECT_EQ(last, core::SeqAnswer::retry);
  ASSERT_FALSE(seen.empty());
  EXPECT_LT(*seen.rbegin(), granted) << "issued beyond the block etcd granted";
  EXPECT_EQ(a.manager.show("orders")->at("etcd_reachable"), false);
  EXPECT_NE(a.manager.metrics_text().find("flurry_seq_etcd_reachable 0\n"), std::string::npos)
      << a.manager.metrics_text();
  kv_.set_available(true);
  a.manager.step();
  EXPECT_EQ(a.issue(0, 3, &seen, &duplicate), core::SeqAnswer::issued);
  EXPECT_EQ(duplicate, "");
}

TEST_F(SequenceCluster, DeletedSequenceStopsBeingServedOnEveryNode) {
  Node a(kv_, dir_.path() + "/a", "a"), b(kv_, dir_.path() + "/b", "b");
  ASSERT_TRUE(a.manager.create("orders", 0, core::SeqMode::segment).ok());
  b.manager.step();
  std::set<std::uint64_t> seen;
  std::string duplicate;
  EXPECT_EQ(b.issue(0, 1, &seen, &duplicate), core::SeqAnswer::issued);
  ASSERT_TRUE(a.manager.remove("orders").ok());
  EXPECT_EQ(a.issue(0, 1, &seen, &duplicate), core::SeqAnswer::unknown);
  b.manager.step();  // sync_period 0: B lists at once
  EXPECT_EQ(b.issue(0, 1, &seen, &duplicate), core::SeqAnswer::unknown);
  EXPECT_EQ(a.manager.remove("orders").code(), StatusCode::failed);
  // Made again at once: not below the deleted one's bound (a node may still hold blocks of
  // it), at it or above: a new incarnation, served afresh (the old queued blocks dropped).
  const Status lower = a.manager.create("orders", 0, core::SeqMode::segment);
  EXPECT_EQ(lower.code(), StatusCode::refused);
  EXPECT_NE(lower.message().find("--start"), std::string::npos) << lower.message();
  const auto tombstone = kv_.get("/flurry/test/seq/orders/deleted");
  ASSERT_TRUE(tombstone);
  ASSERT_TRUE(a.manager.create("orders", std::stoull(tombstone->value), core::SeqMode::segment).ok());
  // Worker 1 still holds sub-blocks of the old incarnation: it discards them (RETRY once),
  // the next step queues new ones.
  std::set<std::uint64_t> fresh;
  core::SeqAnswer answer = core::SeqAnswer::retry;
  for (int round = 0; round < 3 && answer != core::SeqAnswer::issued; ++round) {
    b.manager.step();
    answer = b.issue(1, 1, &fresh, &duplicate);
  }
  EXPECT_EQ(answer, core::SeqAnswer::issued);
}

// Monotonic: the node that claims the owner key (under its lease) issues, the other answers
// NOT_OWNER naming it; when the owner's lease is gone, the other takes over above it.
TEST_F(SequenceCluster, MonotonicHasOneOwnerAndTheNextStartsAboveTheOld) {
  Node a(kv_, dir_.path() + "/a", "a"), b(kv_, dir_.path() + "/b", "b");
  const std::int64_t lease_a = kv_.lease_grant(10)->lease_id;
  const std::int64_t lease_b = kv_.lease_grant(10)->lease_id;
  std::optional<SequenceManager::Holder> holder_a = SequenceManager::Holder{1, lease_a};
  a.manager.set_holder([&] { return holder_a; });
  b.manager.set_holder([&] {
    return std::optional<SequenceManager::Holder>(SequenceManager::Holder{2, lease_b});
  });
  ASSERT_TRUE(a.manager.create("orders", 50, core::SeqMode::monotonic).ok());
  std::vector<std::uint64_t> numbers;
  std::array<proto::Range, 8> out{};
  for (int round = 0; round < 50; ++round) {
    a.manager.step();
    b.manager.step();
    const core::SeqIssued issued =
        a.table.issue(static_cast<std::uint32_t>(round % workers), "orders", 7, out, 0);
    for (std::uint32_t r = 0; r < issued.range_count; ++r) {
      for (std::uint64_t n = out[r].first; n < out[r].first + out[r].count; ++n) numbers.push_back(n);
    }
  }
  const core::SeqIssued refused = b.table.issue(0, "orders", 1, out, 0);
  EXPECT_EQ(refused.answer, core::SeqAnswer::not_owner);
  EXPECT_EQ(refused.owner, 1U);
  ASSERT_GT(numbers.size(), 100U);
  EXPECT_EQ(numbers.front(), 50U);
  holder_a.reset();  // A's lease is gone: A stops at once, etcd drops its owner key
  ASSERT_TRUE(kv_.lease_revoke(lease_a).ok());
  a.manager.step();
  EXPECT_NE(a.table.issue(0, "orders", 1, out, 0).answer, core::SeqAnswer::issued);
  for (int round = 0; round < 50; ++round) {
    b.manager.step();
    const core::SeqIssued issued =
        b.table.issue(static_cast<std::uint32_t>(round % workers), "orders", 7, out, 0);
    for (std::uint32_t r = 0; r < issued.range_count; ++r) {
      for (std::uint64_t n = out[r].first; n < out[r].first + out[r].count; ++n) numbers.push_back(n);
    }
  }
  ASSERT_GT(numbers.size(), 200U);
  for (std::size_t i = 1; i < numbers.size(); ++i) {
    ASSERT_GT(numbers[i], numbers[i - 1]) << "not strictly increasing at " << i;
  }
  a.manager.step();                                      // lists B as the owner
  EXPECT_EQ(a.manager.show("orders")->at("owner"), 2U);  // B's node id
  EXPECT_EQ(b.manager.show("orders")->at("owner"), "this node");
}

// A process restarted inside its lease TTL holds the same node id under a new lease, while the
// sequence's owner key still names that node id under the old lease and start: it answers
// NOT_OWNER with no owner known (clients wait), not naming itself (clients would give up).
TEST_F(SequenceCluster, ARestartedOwnerDoesNotNameItselfWhileItsOldKeyLives) {
  const std::int64_t lease_old = kv_.lease_grant(10)->lease_id;
  const std::int64_t lease_new = kv_.lease_grant(10)->lease_id;
  std::array<proto::Range, 8> out{};
  {
    Node before(kv_, dir_.path() + "/a", "a");
    before.manager.set_holder([&] {
      return std::optional<SequenceManager::Holder>(SequenceManager::Holder{1, lease_old});
    });
    ASSERT_TRUE(before.manager.create("orders", 50, core::SeqMode::monotonic).ok());
    before.manager.step();
    ASSERT_EQ(before.table.issue(0, "orders", 1, out, 0).answer, core::SeqAnswer::issued);
  }  // killed: its owner key lives on under lease_old
  Node after(kv_, dir_.path() + "/a2", "a-restarted");
  after.manager.set_holder([&] {
    return std::optional<SequenceManager::Holder>(SequenceManager::Holder{1, lease_new});
  });
  after.manager.step();
  const core::SeqIssued refused = after.table.issue(0, "orders", 1, out, 0);
  EXPECT_EQ(refused.answer, core::SeqAnswer::not_owner);
  EXPECT_EQ(refused.owner, proto::not_owner_unknown);
}

// Delete, then create again (issues 9 and 24): node B holds sub-blocks of the first
// incarnation and hears nothing from etcd (no step). A lower start is refused, and stays
// refused after the tombstone's lease ran out (the floor is kept for good); B stops serving
// the old blocks once etcd has not confirmed them for serve_unconfirmed_max; created again at
// the floor, nothing B issues afterwards is of the old incarnation and no number repeats. A
// reservation or owner claim naming the old incarnation is refused.
TEST_F(SequenceCluster, RecreatedLowerNeverMeetsBlocksOfTheDeletedIncarnation) {
  Node a(kv_, dir_.path() + "/a", "a", &clock_), b(kv_, dir_.path() + "/b", "b", &clock_);
  ASSERT_TRUE(a.manager.create("orders", 0, core::SeqMode::segment).ok());
  b.manager.step();
  const std::int64_t old_incarnation = b.manager.show("orders")->at("incarnation").get<std::int64_t>();
  std::set<std::uint64_t> old_numbers;
  std::string duplicate;
  std::array<proto::Range, 8> out{};
  auto take = [&](Node& node, std::uint32_t worker, std::set<std::uint64_t>* seen) {
    const core::SeqIssued issued = node.table.issue(worker, "orders", 2, out, clock_.wall_ms());
    for (std::uint32_t r = 0; r < issued.range_count; ++r) {
      for (std::uint64_t n = out[r].first; n < out[r].first + out[r].count; ++n) {
        if (!seen->insert(n).second) duplicate = std::to_string(n);
      }
    }
    return issued.answer;
  };
  ASSERT_EQ(take(b, 0, &old_numbers), core::SeqAnswer::issued);
  ASSERT_TRUE(a.manager.remove("orders").ok());
  EXPECT_EQ(a.manager.create("orders", 0, core::SeqMode::segment).code(), StatusCode::refused);
  // B, cut off: still serves what it holds while etcd's confirmation is fresh.
  clock_.advance_ms(1000);
  EXPECT_EQ(take(b, 0, &old_numbers), core::SeqAnswer::issued);
  const auto tombstone = kv_.get("/flurry/test/seq/orders/deleted");
  ASSERT_TRUE(tombstone);
  EXPECT_LT(*old_numbers.rbegin(), std::stoull(tombstone->value)) << "the tombstone is below a number issued";
  // Past serve_unconfirmed_max B serves none of it; the tombstone is still there.
  clock_.advance_ms(static_cast<std::uint64_t>(SharedSequences::serve_unconfirmed_max.count()));
  EXPECT_EQ(take(b, 0, &old_numbers), core::SeqAnswer::retry);
  EXPECT_EQ(take(b, 1, &old_numbers), core::SeqAnswer::retry) << "worker 1's queued sub-blocks too";
  EXPECT_EQ(a.manager.create("orders", 0, core::SeqMode::segment).code(), StatusCode::refused);
  const std::uint64_t floor = std::stoull(tombstone->value);
  clock_.advance_ms(static_cast<std::uint64_t>(cluster::SeqBlocks::tombstone_ttl_s) * 1000);
  EXPECT_FALSE(kv_.get("/flurry/test/seq/orders/deleted")) << "the tombstone outlived its lease";
  const auto kept = kv_.get("/flurry/test/seq/orders/floor");
  ASSERT_TRUE(kept) << "the floor must outlive the tombstone";
  EXPECT_EQ(std::stoull(kept->value), floor);
  const Status lower = a.manager.create("orders", 0, core::SeqMode::segment);
  EXPECT_EQ(lower.code(), StatusCode::refused) << "created again below its floor once the tombstone was gone";
  EXPECT_NE(lower.message().find("--start " + std::to_string(floor)), std::string::npos) << lower.message();
  EXPECT_EQ(a.manager.create("orders", floor - 1, core::SeqMode::segment).code(), StatusCode::refused);
  ASSERT_TRUE(a.manager.create("orders", floor, core::SeqMode::segment).ok());
  const std::int64_t new_incarnation = a.manager.show("orders")->at("incarnation").get<std::int64_t>();
  EXPECT_NE(new_incarnation, old_incarnation);
  // The old incarnation is refused by name: a reservation and an owner claim.
  EXPECT_EQ(b.blocks.reserve("orders", old_incarnation, 10).code(), StatusCode::not_found);
  const std::int64_t lease = kv_.lease_grant(10)->lease_id;
  const Result<bool> claimed = b.blocks.claim_owner("orders", old_incarnation, 2, lease);
  ASSERT_TRUE(claimed.ok());
  EXPECT_FALSE(*claimed);
  // Both nodes serve the new incarnation; B never again issues an old-incarnation number.
  std::set<std::uint64_t> new_numbers;
  std::size_t b_issued = 0;
  for (int round = 0; round < 100; ++round) {
    a.manager.step();
    b.manager.step();
    clock_.advance_ms(1);
    for (std::uint32_t w = 0; w < workers; ++w) {
      (void)take(a, w, &new_numbers);
      b_issued += take(b, w, &new_numbers) == core::SeqAnswer::issued ? 1 : 0;
    }
  }
  EXPECT_EQ(duplicate, "") << "issued twice within one incarnation";
  EXPECT_GT(b_issued, 0U);
  ASSERT_FALSE(new_numbers.empty());
  EXPECT_EQ(*new_numbers.begin(), floor) << "the new incarnation starts at its own --start";
  for (std::uint64_t n : new_numbers)
    EXPECT_EQ(old_numbers.count(n), 0U) << n << " issued by both incarnations";
  EXPECT_EQ(b.manager.show("orders")->at("incarnation").get<std::int64_t>(), new_incarnation);
  // Deleted again: the floor rises to the new bound; it never falls.
  ASSERT_TRUE(a.manager.remove("orders").ok());
  const auto raised = kv_.get("/flurry/test/seq/orders/floor");
  ASSERT_TRUE(raised);
  EXPECT_GT(std::stoull(raised->value), *new_numbers.rbegin());
  EXPECT_EQ(a.manager.create("orders", floor, core::SeqMode::segment).code(), StatusCode::refused);
}

// A sequence created just below 2^63: both nodes issue up to 2^63 - 1, every number once, then
// every worker of both answers EXHAUSTED (never RETRY for ever); show and metrics say so.
TEST_F(SequenceCluster, ASequenceAt2To63IsExhaustedOnEveryNode) {
  Node a(kv_, dir_.path() + "/a", "a"), b(kv_, dir_.path() + "/b", "b");
  const std::uint64_t start = core::seq_value_limit - 300;
  ASSERT_TRUE(a.manager.create("orders", start, core::SeqMode::segment).ok());
  std::set<std::uint64_t> seen;
  std::string duplicate;
  bool all_exhausted = false;
  for (int round = 0; round < 1000 && !all_exhausted; ++round) {
    a.manager.step();
    b.manager.step();
    all_exhausted = true;
    for (std::uint32_t w = 0; w < workers; ++w) {
      for (Node* node : {&a, &b}) {
        const core::SeqAnswer answer = node->issue(w, 7, &seen, &duplicate);
        EXPECT_NE(answer, core::SeqAnswer::unknown);
        all_exhausted = all_exhausted && answer == core::SeqAnswer::exhausted;
      }
    }
  }
  EXPECT_TRUE(all_exhausted) << "some worker never answered EXHAUSTED";
  EXPECT_EQ(duplicate, "") << "issued twice";
  EXPECT_EQ(seen.size(), 300U) << "numbers lost before 2^63 (the last block must be shortened, not refused)";
  EXPECT_EQ(*seen.begin(), start);
  EXPECT_EQ(*seen.rbegin(), core::seq_value_limit - 1);
  EXPECT_EQ(a.manager.show("orders")->at("exhausted"), true);
  EXPECT_EQ(b.manager.show("orders")->at("exhausted"), true);
  EXPECT_EQ(b.manager.exhausted(), (std::vector<std::string>{"orders"}));
  EXPECT_NE(b.manager.metrics_text().find("\nflurry_seq_exhausted{sequence=\"orders\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(a.blocks.reserve("orders", 0, 10).code(), StatusCode::refused);
  // Deleted: not served, nor listed as exhausted; never created again below 2^63.
  ASSERT_TRUE(a.manager.remove("orders").ok());
  EXPECT_TRUE(a.manager.exhausted().empty());
  EXPECT_EQ(a.manager.create("orders", core::seq_value_limit - 1, core::SeqMode::segment).code(),
            StatusCode::refused);
}

// Monotonic at 2^63: the owner issues up to 2^63 - 1, strictly increasing, then answers
// EXHAUSTED; an owner that claims the name afterwards (a new lease) answers EXHAUSTED too,
// not NOT_OWNER (it never publishes a block).
TEST_F(SequenceCluster, MonotonicAt2To63IsExhaustedForItsOwnerAndTheNext) {
  Node a(kv_, dir_.path() + "/a", "a", &clock_);
  std::int64_t lease = kv_.lease_grant(60)->lease_id;
  a.manager.set_holder([&] {
    return std::optional<SequenceManager::Holder>(SequenceManager::Holder{1, lease});
  });
  const std::uint64_t start = core::seq_value_limit - 100;
  ASSERT_TRUE(a.manager.create("m", start, core::SeqMode::monotonic).ok());
  std::vector<std::uint64_t> numbers;
  std::array<proto::Range, 8> out{};
  core::SeqAnswer answer = core::SeqAnswer::issued;
  for (int round = 0; round < 1000 && answer != core::SeqAnswer::exhausted; ++round) {
    a.manager.step();
    const core::SeqIssued issued = a.table.issue(round % workers, "m", 7, out, clock_.wall_ms());
    answer = issued.answer;
    EXPECT_NE(answer, core::SeqAnswer::not_owner);
    for (std::uint32_t r = 0; r < issued.range_count; ++r) {
      for (std::uint64_t n = out[r].first; n < out[r].first + out[r].count; ++n) numbers.push_back(n);
    }
  }
  ASSERT_EQ(answer, core::SeqAnswer::exhausted);
  ASSERT_EQ(numbers.size(), 100U);
  for (std::size_t i = 0; i < numbers.size(); ++i)
    EXPECT_EQ(numbers[i], start + i) << "not strictly increasing";
  // The owner's lease goes (its owner key with it); the next lease claims the name again.
  ASSERT_TRUE(kv_.lease_revoke(lease).ok());
  lease = kv_.lease_grant(60)->lease_id;
  for (int round = 0; round < 4; ++round) a.manager.step();
  EXPECT_EQ(a.table.issue(0, "m", 1, out, clock_.wall_ms()).answer, core::SeqAnswer::exhausted);
  EXPECT_EQ(a.table.issue(1, "m", 1, out, clock_.wall_ms()).answer, core::SeqAnswer::exhausted);
  EXPECT_EQ(a.manager.exhausted(), (std::vector<std::string>{"m"}));
}

// list() finds a sequence's /mode key although other names sort between them ("a/mode" comes
// after "a-b" and "a.b"): a monotonic "a" is not listed as segment.
TEST_F(SequenceCluster, ListKeepsTheModeOfANameThatPrefixesOthers) {
  cluster::SeqBlocks blocks(kv_, "test", "x");
  ASSERT_TRUE(blocks.create("a", 0, core::SeqMode::monotonic).ok());
  ASSERT_TRUE(blocks.create("a-b", 0, core::SeqMode::segment).ok());
  ASSERT_TRUE(blocks.create("a.b", 0, core::SeqMode::segment).ok());
  const auto listed = blocks.list();
  ASSERT_TRUE(listed.ok()) << listed.message();
  ASSERT_EQ(listed->size(), 3U);
  for (const SharedSequences::Listed& entry : *listed) {
    EXPECT_EQ(entry.mode, entry.name == "a" ? core::SeqMode::monotonic : core::SeqMode::segment)
        << entry.name;
  }
}

// Monotonic, deleted and created again: refused at any --start while the tombstone lives (an
// old owner's late numbers would follow the new incarnation's), accepted after it.
TEST_F(SequenceCluster, MonotonicCreatedAgainOnlyOnceTheTombstoneIsGone) {
  Node a(kv_, dir_.path() + "/a", "a", &clock_);
  const std::int64_t lease_a = kv_.lease_grant(60)->lease_id;
  a.manager.set_holder([&] {
    return std::optional<SequenceManager::Holder>(SequenceManager::Holder{1, lease_a});
  });
  ASSERT_TRUE(a.manager.create("m", 0, core::SeqMode::monotonic).ok());
  a.manager.step();
  std::array<proto::Range, 8> out{};
  const core::SeqIssued issued = a.table.issue(0, "m", 5, out, clock_.wall_ms());
  ASSERT_EQ(issued.answer, core::SeqAnswer::issued);
  EXPECT_EQ(out[0], (proto::Range{0, 5}));
  ASSERT_TRUE(a.manager.remove("m").ok());
  const Status again = a.manager.create("m", 1'000'000, core::SeqMode::monotonic);
  EXPECT_EQ(again.code(), StatusCode::refused);
  EXPECT_NE(again.message().find("once that time has passed"), std::string::npos) << again.message();
  clock_.advance_ms(static_cast<std::uint64_t>(cluster::SeqBlocks::tombstone_ttl_s) * 1000);
  EXPECT_TRUE(a.manager.create("m", 1'000'000, core::SeqMode::monotonic).ok());
}

// Monotonic, the serving deadline: the owner's workers stop at the holder's serve_until (its
// lease may expire in etcd after it) even with numbers left below the published limit, and
// continue, still increasing, once a step publishes a later deadline (a renewal).
TEST_F(SequenceCluster, MonotonicOwnerStopsAtItsLeaseDeadlineUntilTheNextRenewal) {
  Node a(kv_, dir_.path() + "/a", "a", &clock_);
  const std::int64_t lease_a = kv_.lease_grant(10)->lease_id;
  SequenceManager::Holder holder{1, lease_a, clock_.wall_ms() + 1000};
  a.manager.set_holder([&] { return std::optional<SequenceManager::Holder>(holder); });
  ASSERT_TRUE(a.manager.create("orders", 0, core::SeqMode::monotonic).ok());
  a.manager.step();
  std::vector<std::uint64_t> numbers;
  std::array<proto::Range, 8> out{};
  auto take = [&](std::uint64_t now_ms) {
    const core::SeqIssued issued = a.table.issue(0, "orders", 3, out, now_ms);
    for (std::uint32_t r = 0; r < issued.range_count; ++r) {
      for (std::uint64_t n = out[r].first; n < out[r].first + out[r].count; ++n) numbers.push_back(n);
    }
    return issued;
  };
  ASSERT_EQ(take(clock_.wall_ms()).answer, core::SeqAnswer::issued);
  const core::SeqIssued late = take(clock_.wall_ms() + 1000);
  EXPECT_EQ(late.answer, core::SeqAnswer::not_owner);
  EXPECT_EQ(late.owner, proto::not_owner_unknown);
  a.manager.step();  // no renewal: the deadline stays
  EXPECT_EQ(take(clock_.wall_ms() + 5000).answer, core::SeqAnswer::not_owner);
  clock_.advance_ms(5000);
  holder.serve_until_unix_ms = clock_.wall_ms() + 1000;  // renewed
  a.manager.step();
  ASSERT_EQ(take(clock_.wall_ms()).answer, core::SeqAnswer::issued);
  ASSERT_EQ(numbers.size(), 6U);
  for (std::size_t i = 1; i < numbers.size(); ++i) EXPECT_GT(numbers[i], numbers[i - 1]);
}

}  // namespace
}  // namespace flurry::control
