// tests/cluster/membership_test.cc — unit tests of cluster mode's pure pieces: base64 and
// endpoint parsing of the etcd client, the skew median, the owner value, MemoryStore's etcd
// semantics, and Membership's protocol on MemoryStore with a manual clock.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <utility>

#include "control/cluster/cluster_mode.h"
#include "control/cluster/etcd_client.h"
#include "control/cluster/membership.h"
#include "control/cluster/memory_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/status.h"

namespace flurry::control::cluster {
namespace {

using flurry::testing::failure;
using flurry::testing::is_ok;
using testing::ManualClock;

// The code of a status, its message kept in *error (when not null) for the next check.
StatusCode code_of(const Status& status, std::string* error) {
  if (error != nullptr) *error = status.message();
  return status.code();
}

TEST(Base64, KnownVectorsAndRoundTrips) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("/flurry/x/owner/0"), "L2ZsdXJyeS94L293bmVyLzA=");
  std::mt19937 rng(7);
  for (std::size_t n = 0; n < 70; ++n) {
    std::string bytes(n, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes) << n;
  }
}

TEST(Base64, RejectsMalformedText) {
  for (const char* bad : {"Zg=", "Z===", "=Zg=", "Zg==Zg==", "Zm9v@A==", "Zm=v"}) {
    EXPECT_FALSE(base64_decode(bad)) << bad;
  }
}

TEST(Endpoints, ParsesListsAndNamesWhatIsWrong) {
  auto list = parse_endpoints("http://127.0.0.1:2379,http://10.0.0.2:2379/");
  ASSERT_TRUE(is_ok(list));
  EXPECT_EQ(*list, (std::vector<std::string>{"http://127.0.0.1:2379", "http://10.0.0.2:2379"}));
  auto tls = parse_endpoints("https://10.0.0.1:2379/,https://10.0.0.2:2379");
  ASSERT_TRUE(is_ok(tls));
  EXPECT_EQ(*tls, (std::vector<std::string>{"https://10.0.0.1:2379", "https://10.0.0.2:2379"}));
  for (const char* bad : {"", "127.0.0.1:2379", "ftp://h:2379", "https://h", "https://:2379", "http://h",
                          "http://h:", "http://h:0", "http://h:99999", "http://h:12x"}) {
    EXPECT_FALSE(failure(parse_endpoints(bad)).empty()) << bad;
  }
}

TEST(ClockSkew, IsMeasuredFromThePeersMedian) {
  EXPECT_EQ(clock_skew_ms(1000, {}), 0);
  EXPECT_EQ(clock_skew_ms(1000, {900}), 100);
  EXPECT_EQ(clock_skew_ms(1000, {5000, 900, 1100}), -100);          // median 1100; the outlier does not count
  EXPECT_EQ(clock_skew_ms(1000, {800, 1200, 1000, 100000}), -100);  // even count: mean of 1000 and 1200
}

TEST(OwnerValue, RoundTripsAndRejectsGarbage) {
  OwnerValue v;
  ASSERT_TRUE(decode_owner_value(encode_owner_value({"abc", 42}), &v));
  EXPECT_EQ(v.instance_id, "abc");
  EXPECT_EQ(v.clock_ms, 42U);
  for (const char* bad : {"", "{", "[]", "{\"instance\":1,\"clock_ms\":2}", "{\"instance\":\"a\"}",
                          "{\"instance\":\"a\",\"clock_ms\":-1}"}) {
    EXPECT_FALSE(decode_owner_value(bad, &v)) << bad;
  }
}

TEST(MembershipConfig, BoundsAreChecked) {
  MembershipConfig c;
  c.cluster = "ok";
  c.instance_id = "i";
  EXPECT_TRUE(is_ok(validate(c)));
  auto bad = c;
  bad.cluster = "a/b";
  EXPECT_NE(failure(validate(bad)), "");
  bad = c;
  bad.lease_ttl_s = 1;
  EXPECT_NE(failure(validate(bad)).find("--lease-ttl-s"), std::string::npos);
  bad = c;
  bad.clock_skew_ms_max = 1;
  EXPECT_NE(failure(validate(bad)).find("--clock-skew-ms-max"), std::string::npos);
}

TEST(MemoryStore, FollowsEtcdSemantics) {
  ManualClock clock;
  MemoryStore store(clock);
  const Result<LeaseGrant> grant = store.lease_grant(2);
  ASSERT_TRUE(is_ok(grant));
  const std::int64_t lease = grant->lease_id;
  // A missing key compares as zero, except by value.
  Result<TxnResult> r =
      store.txn({{{"k", Compare::Target::create_revision, 0, {}}, {"k", Compare::Target::lease, 0, {}}},
                 {Op::put("k", "v", lease)},
                 {}});
  ASSERT_TRUE(is_ok(r));
  EXPECT_TRUE(r->succeeded);
  r = store.txn({{{"missing", Compare::Target::value, 0, ""}}, {}, {}});
  ASSERT_TRUE(is_ok(r));
  EXPECT_FALSE(r->succeeded);
  // A put under a lease that does not exist applies nothing.
  EXPECT_EQ(store.txn({{}, {Op::put("a", "1"), Op::put("b", "2", 999)}, {}}).code(), StatusCode::not_found);
  EXPECT_FALSE(store.get("a"));
  // Expiry takes the lease's keys; keys without a lease stay.
  ASSERT_TRUE(is_ok(store.txn({{}, {Op::put("w", "7")}, {}})));
  clock.advance_ms(2001);
  EXPECT_FALSE(store.get("k"));
  EXPECT_TRUE(store.get("w"));
  EXPECT_EQ(store.lease_keepalive(lease).code(), StatusCode::not_found);
}

// A store that hands everything to a MemoryStore; a test overrides txn() to get in the way.
class ForwardingStore : public KvStore {
 public:
  explicit ForwardingStore(MemoryStore& s) : store(s) {}
  Result<TxnResult> txn(const Txn& t) override { return store.txn(t); }
  Result<LeaseGrant> lease_grant(std::int64_t ttl) override { return store.lease_grant(ttl); }
  Result<std::int64_t> lease_keepalive(std::int64_t id) override { return store.lease_keepalive(id); }
  Status lease_revoke(std::int64_t id) override { return store.lease_revoke(id); }
  std::string endpoint() const override { return "forwarding"; }
  MemoryStore& store;
};

class MembershipTest : public ::testing::Test {
 protected:
  MembershipConfig config(const std::string& instance, unsigned node_bits = 10) {
    MembershipConfig c;
    c.cluster = "t";
    c.instance_id = instance;
    c.layout.node_bits = node_bits;
    c.layout.sequence_bits = 22 - node_bits;
    c.lease_ttl_s = 3;
    return c;
  }
  std::uint64_t watermark(std::uint32_t node) {
    auto kv = store.get("/flurry/t/watermark/" + std::to_string(node));
    return kv ? std::stoull(kv->value) : 0;
  }
  ManualClock clock;
  MemoryStore store{clock};
};

TEST_F(MembershipTest, ClaimsTheLowestFreeNodeIdsAndRefusesWhenAllAreTaken) {
  std::vector<std::unique_ptr<Membership>> members;
  for (int i = 0; i < 4; ++i) {
    members.push_back(std::make_unique<Membership>(store, clock, config("i" + std::to_string(i), 2)));
    std::string error;
    ASSERT_EQ(code_of(members.back()->claim(), &error), StatusCode::ok) << error;
    EXPECT_EQ(members.back()->node_id(), static_cast<std::uint32_t>(i));
  }
  Membership fifth(store, clock, config("i4", 2));
  std::string error;
  EXPECT_EQ(code_of(fifth.claim(), &error), StatusCode::refused);
  EXPECT_NE(error.find("all 4 node ids of cluster 't' are taken"), std::string::npos) << error;
  EXPECT_NE(error.find("2 node id bits"), std::string::npos) << error;
  // A freed node id is the next one claimed.
  members[2]->release();
  EXPECT_EQ(code_of(fifth.claim(), &error), StatusCode::ok) << error;
  EXPECT_EQ(fifth.node_id(), 2U);
}

TEST_F(MembershipTest, RefusesAClockFarFromThePeersMedian) {
  Membership a(store, clock, config("a"));
  Membership b(store, clock, config("b"));
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  ASSERT_EQ(code_of(b.claim(), nullptr), StatusCode::ok);
  testing::OffsetClock skewed(clock);
  skewed.offset_ms = -1500;
  auto c = config("c");
  c.clock_skew_ms_max = 1000;
  Membership late(store, skewed, c);
  std::string error;
  EXPECT_EQ(code_of(late.claim(), &error), StatusCode::refused);
  EXPECT_NE(error.find("1500 ms behind the median of its 2 live peers"), std::string::npos) << error;
  skewed.offset_ms += 600;  // 900 ms: allowed
  EXPECT_EQ(code_of(late.claim(), &error), StatusCode::ok) << error;
}

TEST_F(MembershipTest, AheadOfAStaleDeadPeerIsNotRefused) {
  auto dead = std::make_unique<Membership>(store, clock, config("dead"));
  ASSERT_EQ(code_of(dead->claim(), nullptr), StatusCode::ok);
  dead.reset();            // crashed: its owner key (and old clock) live until the lease ends
  clock.advance_ms(2500);  // the key's clock_ms is now 2.5 s stale
  auto c = config("c");
  c.clock_skew_ms_max = 1000;
  Membership fresh(store, clock, c);
  std::string error;
  EXPECT_EQ(code_of(fresh.claim(), &error), StatusCode::unavailable) << error;  // suspicious, not refused
  EXPECT_TRUE(fresh.waiting_on_peers());
  EXPECT_EQ(code_of(fresh.claim(), &error), StatusCode::unavailable) << error;  // the dead peer never renews
  EXPECT_TRUE(fresh.waiting_on_peers());
  clock.advance_ms(600);  // its lease ends
  EXPECT_EQ(code_of(fresh.claim(), &error), StatusCode::ok) << error;
  EXPECT_FALSE(fresh.waiting_on_peers());
}

// Two members, a and b, b on its own wall clock and allowed 1 s of skew.
class PairTest : public MembershipTest {
 protected:
  void claim_both() {
    ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
    ASSERT_EQ(code_of(b.claim(), nullptr), StatusCode::ok);
  }
  testing::OffsetClock b_clock{clock};
  MembershipConfig c = [this] {
    MembershipConfig config = this->config("b");
    config.clock_skew_ms_max = 1000;
    return config;
  }();
  Membership a{store, clock, config("a")};
  Membership b{store, b_clock, c};
};

// After an etcd outage every owner value is stale by about the outage. A member whose clock
// did not step since its last acknowledged write re-claims at once; it does not wait for the
// peers to renew (they cannot before they hold node ids again) or for their leases to end.
class OutageTest : public PairTest {
 protected:
  OutageTest() {
    EXPECT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
    EXPECT_EQ(code_of(b.claim(), nullptr), StatusCode::ok);
    EXPECT_EQ(code_of(b.renew(10), nullptr), StatusCode::ok);
    // etcd is away for 3.5 s: nothing is written; a's lease lives on (etcd's restart renews
    // every lease), b's ends and b counts itself fenced.
    for (int i = 0; i < 7; ++i) {
      clock.advance_ms(500);
      EXPECT_EQ(code_of(a.keepalive(store), nullptr), StatusCode::ok);
    }
    EXPECT_TRUE(b.lease_expired());
  }
};

TEST_F(OutageTest, AMemberReclaimsAtOnceAfterTheOutage) {
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::ok) << error;
  EXPECT_FALSE(b.waiting_on_peers());
}

TEST_F(OutageTest, AStepWithinTheLimitMeanwhileStillReclaimsAtOnce) {
  // 3.5 s stale + a 600 ms step = 4.1 s measured: at most 600 ms real, within 1 s.
  b_clock.offset_ms = 600;
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::ok) << error;
}

TEST_F(OutageTest, AStepBeyondTheLimitMeanwhileWaitsAndIsRefused) {
  b_clock.offset_ms = 1600;  // 5.1 s measured against 1 s + 3.5 s since b's last write
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;
  EXPECT_TRUE(b.waiting_on_peers());
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);  // newer than b's look: 1.6 s ahead
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;  // maybe read before it
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);  // read after b's look: still 1.6 s
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::refused) << error;
}

// etcd away 3.5 s; a wrote last before it went (so b gets no outage credit against a's
// value), etcd's restart kept every lease alive, b counts its own lease expired and is fenced.
// b takes back its own node id at once if its clock did not step, as if it had served on.
class ReownTest : public PairTest {
 protected:
  ReownTest() {
    EXPECT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
    EXPECT_EQ(code_of(b.claim(), nullptr), StatusCode::ok);
    EXPECT_EQ(code_of(b.renew(10), nullptr), StatusCode::ok);
    EXPECT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);  // a's value is newer than b's write
    const std::int64_t lease_b = b.status().lease_id;
    for (int i = 0; i < 7; ++i) {
      clock.advance_ms(500);
      EXPECT_EQ(code_of(a.keepalive(store), nullptr), StatusCode::ok);
      EXPECT_TRUE(store.lease_keepalive(lease_b).ok());  // etcd's restart, not b
    }
    EXPECT_TRUE(b.lease_expired());
    node_b = b.node_id();
  }
  std::uint32_t node_b = 0;
};

TEST_F(ReownTest, AFencedMemberTakesBackItsOwnNodeIdAtOnce) {
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::ok) << error;
  EXPECT_EQ(b.node_id(), node_b);
  EXPECT_FALSE(b.waiting_on_peers());
}

TEST_F(ReownTest, NotWithAClockThatSteppedMeanwhile) {
  b_clock.offset_ms = 700;  // more than half the allowed 1 s
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;
  EXPECT_TRUE(b.waiting_on_peers());
}

// A clock that runs fast moves its monotonic clock with it (adjtime slews both): wall minus
// monotonic stays put, so only a check against the peers sees it.
class DriftingClock final : public Clock {
 public:
  explicit DriftingClock(const Clock& base) : base_(base) {}
  std::uint64_t wall_ms() const override { return base_.wall_ms() + ahead_ms; }
  std::uint64_t mono_ns() const override { return base_.mono_ns() + ahead_ms * 1'000'000; }
  std::uint64_t ahead_ms = 0;  // only grows: monotonic time never goes back

 private:
  const Clock& base_;
};

// The take-back needs a recent pass of a real check: not one found wrong since, not a claim
// with no peer to compare with, not one older than 4 lease TTLs.
class TakeBackTest : public MembershipTest {
 protected:
  TakeBackTest() { c.clock_skew_ms_max = 1000; }
  MembershipConfig c = config("b");
  DriftingClock b_clock{clock};
  Membership a{store, clock, config("a")};
};

TEST_F(TakeBackTest, NotAfterADriftFoundWhileServing) {
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  Membership b(store, b_clock, c);
  ASSERT_EQ(code_of(b.claim(), nullptr), StatusCode::ok);
  b_clock.ahead_ms = 10'000;  // drifted 10 s while serving, no step
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);
  auto seen = b.observe_peer_clocks(store);
  ASSERT_TRUE(seen.ok() && *seen) << "the look while serving finds it beyond the limit";
  b.release();
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);  // may have been composed before b looked
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);  // composed after: refused on it
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::refused) << error;
}

TEST_F(TakeBackTest, NotAfterAClaimWithNoPeerToCompareWith) {
  Membership b(store, b_clock, c);
  b_clock.ahead_ms = 3'600'000;  // an hour ahead, alone: nothing to compare with
  ASSERT_EQ(code_of(b.claim(), nullptr), StatusCode::ok);
  auto lenient = config("a2");
  lenient.clock_skew_ms_max = 3'600'000;  // joins beside b's hour-ahead clock
  Membership a2(store, clock, lenient);
  ASSERT_EQ(code_of(a2.claim(), nullptr), StatusCode::ok);
  ASSERT_NE(a2.node_id(), b.node_id());
  b.release();  // b's node id is free to take back, were its clock ever found right
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;
  ASSERT_EQ(code_of(a2.renew(10), nullptr), StatusCode::ok);
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;
  ASSERT_EQ(code_of(a2.renew(10), nullptr), StatusCode::ok);
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::refused) << error;
}

TEST_F(TakeBackTest, NotOnAPassOlderThanFourLeaseTtls) {
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  Membership b(store, b_clock, c);
  ASSERT_EQ(code_of(b.claim(), nullptr), StatusCode::ok);
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);  // newer than b's write: no outage credit
  for (int i = 0; i < 13; ++i) {  // 13 s > 4 x the 3 s TTL, no look at the peers meanwhile
    clock.advance_ms(1000);
    ASSERT_EQ(code_of(a.keepalive(store), nullptr), StatusCode::ok);
  }
  b_clock.ahead_ms = 1'500;  // drifted meanwhile
  b.release();
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;
}

TEST_F(PairTest, AMemberCutOffAloneGetsNoOutageCredit) {
  // Only b lost etcd (a partition, a frozen VM) while a kept renewing: a's value is newer than
  // b's last write, so the time b was away says nothing about its age. b's clock stepped 1.5 s
  // ahead while it served (its renews went on writing it): refused on a's fresh value, not let
  // through on the 5 s it was away.
  claim_both();
  b_clock.offset_ms = 1500;
  ASSERT_EQ(code_of(b.renew(10), nullptr), StatusCode::ok);
  for (int i = 0; i < 10; ++i) {  // 5 s: a renews, b hears nothing
    clock.advance_ms(500);
    ASSERT_EQ(code_of(a.keepalive(store), nullptr), StatusCode::ok);
    ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);
  }
  b.release();
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;  // suspected, not excused
  clock.advance_ms(100);
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;  // a first renewal: wait
  clock.advance_ms(100);
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::refused) << error;
  EXPECT_NE(error.find("ms ahead of the median of its 1 live peers"), std::string::npos) << error;
}

TEST_F(PairTest, AheadByMoreThanTheOutageStillWaits) {
  // a stopped renewing its value 2 s before b's last write (its control thread stuck; its
  // lease kept alive). 0.5 s later b's clock steps 600 ms (so it may not simply take back its
  // node id) and b reads 3.1 s ahead of a's value, more than the allowed 1 s plus the 0.5 s
  // since its own write: that is not the outage, b waits for a fresh value, and passes on it
  // (600 ms is allowed).
  claim_both();
  clock.advance_ms(1000);
  ASSERT_EQ(code_of(a.keepalive(store), nullptr), StatusCode::ok);
  clock.advance_ms(1000);
  ASSERT_EQ(code_of(a.keepalive(store), nullptr), StatusCode::ok);
  ASSERT_EQ(code_of(b.keepalive(store), nullptr), StatusCode::ok);
  ASSERT_EQ(code_of(b.renew(10), nullptr), StatusCode::ok);
  clock.advance_ms(500);
  b.release();
  b_clock.offset_ms = 600;
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;
  EXPECT_NE(error.find("3100 ms ahead"), std::string::npos) << error;
  EXPECT_TRUE(b.waiting_on_peers());
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::ok) << error;
}

TEST_F(MembershipTest, AMemberWhoseClockWasRightTakesBackItsNodeIdDespiteAStuckPeer) {
  // As above without the step: b's clock passed the check at its claim and has not stepped,
  // so it takes back the node id it held without waiting on a's stale value.
  auto c = config("b");
  c.clock_skew_ms_max = 1000;
  Membership a(store, clock, config("a"));
  Membership b(store, clock, c);
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  ASSERT_EQ(code_of(b.claim(), nullptr), StatusCode::ok);
  const std::uint32_t held = b.node_id();
  for (int i = 0; i < 5; ++i) {
    clock.advance_ms(500);
    ASSERT_EQ(code_of(a.keepalive(store), nullptr), StatusCode::ok);
  }
  b.release();
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::ok) << error;
  EXPECT_EQ(b.node_id(), held);
}

TEST_F(MembershipTest, AServingNodeSeesItsPeersClocks) {
  auto c = config("b");
  c.clock_skew_ms_max = 1000;
  testing::OffsetClock b_clock(clock);
  Membership a(store, clock, config("a"));
  Membership b(store, b_clock, c);
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  auto alone = a.observe_peer_clocks(store);
  ASSERT_TRUE(alone.ok());
  EXPECT_FALSE(*alone);
  EXPECT_EQ(a.status().peers, 0U);
  EXPECT_EQ(a.status().peer_clock_skew_ms, 0);
  b_clock.offset_ms = 400;
  ASSERT_EQ(code_of(b.claim(), nullptr), StatusCode::ok);
  auto seen = b.observe_peer_clocks(store);
  ASSERT_TRUE(seen.ok());
  EXPECT_FALSE(*seen);
  EXPECT_EQ(b.status().peers, 1U);
  EXPECT_EQ(b.status().peer_clock_skew_ms, 400);
  seen = a.observe_peer_clocks(store);
  EXPECT_EQ(a.status().peer_clock_skew_ms, -400);
  // b's clock drifts on while it serves: a renew of a, then b is 1.5 s ahead.
  b_clock.offset_ms = 1500;
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);
  seen = b.observe_peer_clocks(store);
  ASSERT_TRUE(seen.ok());
  EXPECT_TRUE(*seen) << "beyond --clock-skew-ms-max";
  EXPECT_EQ(b.status().peer_clock_skew_ms, 1500);
  EXPECT_EQ(b.status().state, LeaseState::serving) << "a reading, not a fence";
  // Values older than b's last write are aged by the time since it: 800 ms later a's value
  // (written before b's renew below) does not read as 800 ms more skew.
  b_clock.offset_ms = 0;
  ASSERT_EQ(code_of(b.renew(20), nullptr), StatusCode::ok);
  clock.advance_ms(800);
  ASSERT_TRUE(b.observe_peer_clocks(store).ok());
  EXPECT_EQ(b.status().peer_clock_skew_ms, 0);
}

TEST_F(MembershipTest, WaitingOnPeersIsOnlyTheClockCheck) {
  Membership a(store, clock, config("a"));
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  class Down final : public KvStore {
   public:
    Result<TxnResult> txn(const Txn&) override { return Error{"down", StatusCode::unavailable}; }
    Result<LeaseGrant> lease_grant(std::int64_t) override { return Error{"down", StatusCode::unavailable}; }
    Result<std::int64_t> lease_keepalive(std::int64_t) override {
      return Error{"down", StatusCode::unavailable};
    }
    Status lease_revoke(std::int64_t) override { return {}; }
    std::string endpoint() const override { return "down"; }
  } down;
  Membership cut_off(down, clock, config("x"));
  EXPECT_EQ(code_of(cut_off.claim(), nullptr), StatusCode::unavailable);
  EXPECT_FALSE(cut_off.waiting_on_peers()) << "an unreachable etcd is not a wait on peers";
  testing::OffsetClock ahead(clock);
  ahead.offset_ms = 5000;
  auto c = config("c");
  c.clock_skew_ms_max = 1000;
  Membership skewed(store, ahead, c);
  EXPECT_EQ(code_of(skewed.claim(), nullptr), StatusCode::unavailable);
  EXPECT_TRUE(skewed.waiting_on_peers());
}

TEST(ClaimRetry, BacksOffTo1sAndWaitsShortlyOnPeers) {
  std::uint32_t backoff = 0;
  std::vector<std::uint32_t> waits;
  for (int i = 0; i < 6; ++i) waits.push_back(claim_retry_ms(&backoff, false));
  EXPECT_EQ(waits, (std::vector<std::uint32_t>{200, 400, 800, 1000, 1000, 1000}));
  EXPECT_EQ(claim_retry_ms(&backoff, true), 250U);
  EXPECT_EQ(backoff, 1000U) << "a wait on peers leaves the backoff as it was";
  backoff = 0;
  EXPECT_EQ(claim_retry_ms(&backoff, true), 250U);
  EXPECT_EQ(backoff, 0U);
}

TEST_F(MembershipTest, AheadOfLivePeersIsRefusedOnceTheyRenewedTwice) {
  Membership a(store, clock, config("a"));
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  testing::OffsetClock ahead(clock);
  ahead.offset_ms = 5000;
  auto c = config("c");
  c.clock_skew_ms_max = 1000;
  Membership skewed(store, ahead, c);
  std::string error;
  EXPECT_EQ(code_of(skewed.claim(), &error), StatusCode::unavailable) << error;
  clock.advance_ms(200);                                     // both clocks: `ahead` is `clock` plus 5 s
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);  // newer than the look, maybe not read after it
  EXPECT_EQ(code_of(skewed.claim(), &error), StatusCode::unavailable) << error;
  EXPECT_NE(error.find("waiting for their next renewal"), std::string::npos) << error;
  EXPECT_TRUE(skewed.waiting_on_peers());
  clock.advance_ms(200);
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);  // read after the look
  EXPECT_EQ(code_of(skewed.claim(), &error), StatusCode::refused);
  EXPECT_NE(error.find("ms ahead of the median of its 1 live peers"), std::string::npos) << error;
}

// A peer reads its clock when it composes its owner value; etcd commits the write later (a
// TLS connect, an authentication, a loaded host). A value read before a member's first look
// but committed after it is not the evidence of a skew: it overstates "ahead" by that delay.
// Found by a flake hunt (etcd_tls, TSan): one host clock, "1016 ms ahead", refused at start.
TEST_F(MembershipTest, AValueReadBeforeTheLookButCommittedAfterItIsNoReasonToRefuse) {
  class Delayed final : public ForwardingStore {  // runs `meanwhile` between composing and committing
   public:
    using ForwardingStore::ForwardingStore;
    Result<TxnResult> txn(const Txn& t) override {
      if (meanwhile) std::exchange(meanwhile, nullptr)();
      return store.txn(t);
    }
    std::function<void()> meanwhile;
  } slow(store);
  Membership a(slow, clock, config("a"));
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  auto c = config("b");
  c.clock_skew_ms_max = 1000;
  Membership b(store, clock, c);  // the same clock as a: no skew at all
  for (int i = 0; i < 4; ++i) {   // 2 s with keep-alives only: a's value grows stale
    clock.advance_ms(500);
    ASSERT_EQ(code_of(a.keepalive(slow), nullptr), StatusCode::ok);
  }
  std::string error;
  slow.meanwhile = [&] {  // a's renew has read its clock; its write lands 1.5 s later
    clock.advance_ms(1500);
    EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << "3.5 s stale: suspected";
  };
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);
  ASSERT_FALSE(slow.meanwhile) << "b looked while a's write was on its way";
  clock.advance_ms(100);
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable) << error;  // was: refused, 1500 ms ahead
  EXPECT_TRUE(b.waiting_on_peers());
  ASSERT_EQ(code_of(a.renew(10), nullptr), StatusCode::ok);
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::ok) << error;
}

TEST_F(MembershipTest, ALeaseThatRanOutWhileClaimingIsReplaced) {
  // First attempt: the lease is granted, then every transaction goes unanswered for longer
  // than the TTL (a partition at start).
  class Flaky final : public ForwardingStore {
   public:
    using ForwardingStore::ForwardingStore;
    Result<TxnResult> txn(const Txn& t) override {
      if (down) return Error{"flaky: no answer", StatusCode::unavailable};
      return store.txn(t);
    }
    bool down = true;
  } flaky(store);
  Membership b(flaky, clock, config("b"));
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable);
  const std::int64_t first_lease = b.status().lease_id;
  ASSERT_NE(first_lease, 0);
  // The lease is revoked behind our back (etcd lost it) while our own deadline has not passed.
  ASSERT_EQ(code_of(store.lease_revoke(first_lease), nullptr), StatusCode::ok);
  flaky.down = false;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::unavailable)
      << error;                                                    // "lease not found": not a refusal
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::ok) << error;  // with a fresh lease
  const std::int64_t second_lease = b.status().lease_id;
  EXPECT_NE(second_lease, first_lease);

  // The lease's own TTL runs out on the monotonic clock while etcd is unreachable: the node
  // counts it expired by itself (before it hears from etcd) and takes a fresh one at once.
  flaky.down = true;
  clock.advance_ms(2999);
  EXPECT_FALSE(b.lease_expired());
  clock.advance_ms(2);
  EXPECT_TRUE(b.lease_expired());
  flaky.down = false;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::ok) << error;
  EXPECT_NE(b.status().lease_id, second_lease);
  EXPECT_FALSE(b.lease_expired());
}

TEST_F(MembershipTest, RenewWritesTheWatermarkAndNeverLowersIt) {
  Membership a(store, clock, config("a"));
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  EXPECT_EQ(code_of(a.renew(5000), nullptr), StatusCode::ok);
  EXPECT_EQ(watermark(0), 5000U);
  EXPECT_EQ(code_of(a.renew(4000), nullptr), StatusCode::ok);  // a clock that stepped back
  EXPECT_EQ(watermark(0), 5000U);
  EXPECT_EQ(a.status().durable_watermark_t, 5000U);
}

TEST_F(MembershipTest, LeaseExpiryLosesTheNodeAndTheNextHolderStartsAboveTheWatermark) {
  Membership a(store, clock, config("a"));
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  ASSERT_EQ(code_of(a.renew(7000), nullptr), StatusCode::ok);
  clock.advance_ms(3001);  // no keep-alive: the lease expires
  Membership b(store, clock, config("b"));
  ASSERT_EQ(code_of(b.claim(), nullptr), StatusCode::ok);
  EXPECT_EQ(b.node_id(), 0U);
  EXPECT_EQ(b.floor_t(), 7000U);
  std::string error;
  EXPECT_EQ(code_of(a.renew(8000), &error), StatusCode::lost);
  EXPECT_NE(error.find("instance 'b' holds it"), std::string::npos) << error;
  EXPECT_EQ(a.status().state, LeaseState::fenced);
  EXPECT_EQ(watermark(0), 7000U) << "the fenced holder must not have written";
  EXPECT_EQ(code_of(a.keepalive(store), nullptr),
            StatusCode::ok);  // nothing to keep alive until it claims again
  ASSERT_EQ(code_of(a.claim(), &error), StatusCode::ok) << error;
  EXPECT_EQ(a.node_id(), 1U);
}

TEST_F(MembershipTest, KeepAliveKeepsTheNodeAndSeesExpiry) {
  Membership a(store, clock, config("a"));
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  for (int i = 0; i < 5; ++i) {
    clock.advance_ms(1000);
    ASSERT_EQ(code_of(a.keepalive(store), nullptr), StatusCode::ok);
  }
  EXPECT_EQ(code_of(a.renew(100), nullptr), StatusCode::ok);
  clock.advance_ms(3001);
  EXPECT_EQ(code_of(a.keepalive(store), nullptr), StatusCode::not_found);
  EXPECT_TRUE(a.lease_expired());
}

TEST_F(MembershipTest, ARestartWithTheSameInstanceIdReownsItsNodeId) {
  auto first = std::make_unique<Membership>(store, clock, config("same"));
  Membership other(store, clock, config("other"));
  ASSERT_EQ(code_of(first->claim(), nullptr), StatusCode::ok);
  ASSERT_EQ(code_of(other.claim(), nullptr), StatusCode::ok);
  ASSERT_EQ(code_of(first->renew(9000), nullptr), StatusCode::ok);
  first.reset();    // crashed: its owner key lives on until the lease expires
  other.release();  // node 1 free now; the restart still takes its own node 0
  Membership restarted(store, clock, config("same"));
  std::string error;
  ASSERT_EQ(code_of(restarted.claim(), &error), StatusCode::ok) << error;
  EXPECT_EQ(restarted.node_id(), 0U);
  EXPECT_EQ(restarted.floor_t(), 9000U);
}

TEST_F(MembershipTest, ACopiedStateDirIsDetectedAndTheTwoStopTakingTheNodeIdFromEachOther) {
  Membership original(store, clock, config("copied"));
  ASSERT_EQ(code_of(original.claim(), nullptr), StatusCode::ok);
  ASSERT_EQ(code_of(original.renew(5000), nullptr), StatusCode::ok);
  // A clone starts with the same instance id: like a restart, it re-owns node 0.
  Membership clone(store, clock, config("copied"));
  std::string error;
  ASSERT_EQ(code_of(clone.claim(), &error), StatusCode::ok) << error;
  EXPECT_EQ(clone.node_id(), 0U);
  EXPECT_GE(clone.floor_t(), 5000U);
  // The original, alive, sees its node id held by its own instance id: a clone, not a peer.
  EXPECT_EQ(code_of(original.renew(6000), &error), StatusCode::lost);
  EXPECT_TRUE(original.clone_detected());
  EXPECT_NE(error.find("state dir was copied"), std::string::npos) << error;
  EXPECT_NE(error.find("copied"), std::string::npos) << error;
  // Re-made with a new instance id, it claims another node id, and both keep theirs.
  original.set_instance_id("remade");
  EXPECT_FALSE(original.clone_detected());
  ASSERT_EQ(code_of(original.claim(), &error), StatusCode::ok) << error;
  EXPECT_NE(original.node_id(), clone.node_id());
  for (int round = 0; round < 5; ++round) {
    clock.advance_ms(500);
    EXPECT_EQ(code_of(clone.renew(7000 + round), &error), StatusCode::ok) << error;
    EXPECT_EQ(code_of(original.renew(7000 + round), &error), StatusCode::ok) << error;
    ASSERT_EQ(code_of(clone.keepalive(store), &error), StatusCode::ok) << error;
    ASSERT_EQ(code_of(original.keepalive(store), &error), StatusCode::ok) << error;
  }
  EXPECT_EQ(original.instance_id(), "remade");
  // A peer that took a node id (another instance id) is no clone.
  Membership peer(store, clock, config("peer"));
  ASSERT_EQ(code_of(peer.claim(), &error), StatusCode::ok) << error;
  EXPECT_FALSE(peer.clone_detected());
}

TEST_F(MembershipTest, ALayoutMismatchIsRefused) {
  Membership a(store, clock, config("a"));
  ASSERT_EQ(code_of(a.claim(), nullptr), StatusCode::ok);
  Membership b(store, clock, config("b", 8));
  std::string error;
  EXPECT_EQ(code_of(b.claim(), &error), StatusCode::refused);
  EXPECT_NE(error.find("uses the ID layout"), std::string::npos) << error;
}

TEST_F(MembershipTest, AnUnreachableStoreIsRetryNotRefusal) {
  Membership a(store, clock, config("a"));
  store.set_available(false);
  std::string error;
  EXPECT_EQ(code_of(a.claim(), &error), StatusCode::unavailable);
  store.set_available(true);
  ASSERT_EQ(code_of(a.claim(), &error), StatusCode::ok) << error;
  store.set_available(false);
  EXPECT_EQ(code_of(a.renew(10), &error), StatusCode::unavailable);
  EXPECT_EQ(a.status().state, LeaseState::degraded_etcd);
  store.set_available(true);
  EXPECT_EQ(code_of(a.renew(10), &error), StatusCode::ok);
  EXPECT_EQ(a.status().state, LeaseState::serving);
}

}  // namespace
}  // namespace flurry::control::cluster
