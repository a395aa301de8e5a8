// tests/dataplane/door_auth_test.cc — dataplane/door_auth: the front doors' login and the key
// limits every logged-in request meets (the door's logic over a real KeyTableSlot and
// WorkerStats, with a stand-in for the password hash: that one is tested in keys_file_test).
//
//   * the token forms: AUTH's NAME:PASSWORD and HTTP's "Bearer NAME:PASSWORD";
//   * --auth required refuses a caller without a login, optional and off serve it;
//   * a login with a wrong password, an unknown name or a key without a door password fails;
//   * a logged-in request meets its key's opcodes, batch limits, sequence names and token
//     bucket, counted in the key's counters of the door's WorkerStats slot;
//   * a session ends when its key is removed or its door password changes.
#include "dataplane/door_auth.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace flurry::dataplane {
namespace {

// The stand-in hash: "hash-of:" + password.
bool fake_verify(const std::string& hash, std::string_view password) {
  return !hash.empty() && hash == "hash-of:" + std::string(password);
}

core::Key key(std::uint32_t id, std::string name, std::string password, std::uint32_t rate = 0) {
  core::Key key;
  key.id = id;
  key.slot = id - 1;
  key.generation = id;
  key.name = std::move(name);
  key.opcodes = (1U << 1) | (1U << 3) | (1U << 4);  // get_ids, info, get_seq
  key.sequences = {"orders"};
  key.batch_max = 100;
  key.seq_batch_max = 10;
  key.rate_per_s = rate;
  if (!password.empty()) {
    key.door_password_hash = "hash-of:" + password;
    key.door_tag = std::hash<std::string>{}(key.door_password_hash) | 1;
  }
  return key;
}

std::uint64_t rejected(const core::KeyCounters& counters, proto::RequestError error) {
  return counters.rejected[static_cast<std::size_t>(error) - 32].get();
}

class DoorAuthTest : public ::testing::Test {
 protected:
  static constexpr std::uint32_t door_core = 2;  // two workers, then this door's slice
  void publish(std::vector<core::Key> keys) {
    shared_.keys.publish(std::make_unique<core::KeyTable>(std::move(keys)));
  }
  core::Shared shared_{3};
};

TEST(DoorTokens, SplitAtTheFirstColonAndBearerScheme) {
  std::string_view name, password;
  ASSERT_TRUE(split_door_token("billing:s3cret:with:colons", &name, &password));
  EXPECT_EQ(name, "billing");
  EXPECT_EQ(password, "s3cret:with:colons");
  EXPECT_FALSE(split_door_token("billing", &name, &password));
  EXPECT_FALSE(split_door_token(":password", &name, &password));
  EXPECT_FALSE(split_door_token("billing:", &name, &password));
  EXPECT_EQ(bearer_token("Bearer billing:pw"), "billing:pw");
  EXPECT_EQ(bearer_token("bearer   billing:pw  "), "billing:pw");
  EXPECT_EQ(bearer_token("  BEARER billing:pw"), "billing:pw");
  EXPECT_EQ(bearer_token("Basic YmlsbGluZzpwdw=="), "");
  EXPECT_EQ(bearer_token("Bearer"), "");
  EXPECT_EQ(bearer_token("Bearer "), "");
  EXPECT_EQ(bearer_token("Bearerbilling:pw"), "");
  EXPECT_EQ(bearer_token(""), "");
}

TEST_F(DoorAuthTest, RequiredRefusesWithoutLoginOptionalAndOffServe) {
  publish({key(1, "billing", "good-password-123")});
  const core::Key* used = nullptr;
  DoorSession none;
  DoorAuth required(core::AuthMode::required, &fake_verify, shared_, door_core);
  EXPECT_EQ(required.admit(none, DoorUse::ids, 1, {}, 1000, &used), DoorVerdict::login_needed);
  EXPECT_EQ(required.admit(none, DoorUse::other, 1, {}, 1000, &used), DoorVerdict::login_needed);
  DoorAuth optional(core::AuthMode::optional, &fake_verify, shared_, door_core);
  EXPECT_EQ(optional.admit(none, DoorUse::ids, 100000, {}, 1000, &used), DoorVerdict::served);
  EXPECT_EQ(used, nullptr) << "an anonymous caller has no key";
  DoorAuth off(core::AuthMode::off, &fake_verify, shared_, door_core);
  EXPECT_EQ(off.admit(none, DoorUse::ids, 1, {}, 1000, &used), DoorVerdict::served);
  EXPECT_NE(off.login(none, "billing", "good-password-123").find("--auth off"), std::string::npos);
  EXPECT_FALSE(none.logged_in());
}

TEST_F(DoorAuthTest, LoginNeedsTheRightPasswordOfAKeyWithOne) {
  publish({key(1, "billing", "good-password-123"), key(2, "nodoor", "")});
  DoorAuth auth(core::AuthMode::required, &fake_verify, shared_, door_core);
  DoorSession session;
  EXPECT_FALSE(auth.login(session, "billing", "wrong-password-123").empty());
  EXPECT_FALSE(session.logged_in());
  EXPECT_FALSE(auth.login(session, "nobody", "good-password-123").empty());
  EXPECT_FALSE(auth.login(session, "nodoor", "").empty()) << "a key without door_password_hash";
  EXPECT_FALSE(auth.login(session, "nodoor", "hash-of:").empty());
  const core::KeyCounters& counters = shared_.stats[door_core].keys[0];
  EXPECT_EQ(rejected(counters, proto::RequestError::bad_mac), 1u) << "the wrong password, counted";
  EXPECT_EQ(auth.login(session, "billing", "good-password-123"), "");
  EXPECT_TRUE(session.logged_in());
  EXPECT_EQ(auth.key_name(session), "billing");
  // A failed login ends the session it was tried on.
  EXPECT_FALSE(auth.login(session, "billing", "wrong-password-123").empty());
  EXPECT_FALSE(session.logged_in());
}

TEST_F(DoorAuthTest, ALoggedInRequestMeetsItsKeysPermissionsAndIsCounted) {
  core::Key limited = key(1, "billing", "good-password-123");
  limited.opcodes = (1U << 1) | (1U << 4);  // get_ids, get_seq: no info
  publish({limited});
  DoorAuth auth(core::AuthMode::optional, &fake_verify, shared_, door_core);
  DoorSession session;
  ASSERT_EQ(auth.login(session, "billing", "good-password-123"), "");
  const core::Key* used = nullptr;
  EXPECT_EQ(auth.admit(session, DoorUse::ids, 100, {}, 1000, &used), DoorVerdict::served);
  ASSERT_NE(used, nullptr);
  auth.count_issued(used, 100);
  EXPECT_EQ(auth.admit(session, DoorUse::ids, 101, {}, 1000, &used), DoorVerdict::not_permitted)
      << "above batch_max";
  EXPECT_EQ(used, nullptr);
  EXPECT_EQ(auth.admit(session, DoorUse::seq, 10, "orders", 1000, &used), DoorVerdict::served);
  EXPECT_EQ(auth.admit(session, DoorUse::seq, 11, "orders", 1000, &used), DoorVerdict::not_permitted)
      << "above seq_batch_max";
  EXPECT_EQ(auth.admit(session, DoorUse::seq, 1, "invoices", 1000, &used), DoorVerdict::not_permitted)
      << "a sequence not in its list";
  EXPECT_EQ(auth.admit(session, DoorUse::info, 1, {}, 1000, &used), DoorVerdict::not_permitted)
      << "no info opcode";
  EXPECT_EQ(auth.admit(session, DoorUse::other, 1, {}, 1000, &used), DoorVerdict::served) << "PING-like";
  const core::KeyCounters& counters = shared_.stats[door_core].keys[0];
  EXPECT_EQ(counters.requests.get(), 8u) << "the login and seven requests";
  EXPECT_EQ(counters.ids.get(), 100u);
  EXPECT_EQ(rejected(counters, proto::RequestError::not_permitted), 4u);
  EXPECT_EQ(counters.generation.load(), 1u);
  EXPECT_EQ(shared_.stats[0].keys[0].requests.get(), 0u) << "a worker's slot is not the door's";
}

TEST_F(DoorAuthTest, TheKeysTokenBucketLimitsItsRate) {
  publish({key(1, "billing", "good-password-123", /*rate=*/10)});  // holds 100 ms: one request
  DoorAuth auth(core::AuthMode::required, &fake_verify, shared_, door_core);
  DoorSession session;
  ASSERT_EQ(auth.login(session, "billing", "good-password-123"), "");
  const core::Key* used = nullptr;
  std::uint64_t now = 1'000'000;
  EXPECT_EQ(auth.admit(session, DoorUse::ids, 1, {}, now, &used), DoorVerdict::served);
  EXPECT_EQ(auth.admit(session, DoorUse::ids, 1, {}, now, &used), DoorVerdict::rate_limited);
  EXPECT_EQ(auth.admit(session, DoorUse::ids, 1, {}, now + 50, &used), DoorVerdict::rate_limited);
  EXPECT_EQ(auth.admit(session, DoorUse::ids, 1, {}, now + 100, &used), DoorVerdict::served)
      << "10 a second: one more after 100 ms";
  // Over 10 s at one request a millisecond: about 10 a second, the bucket's 1 at most more.
  int served = 0;
  for (std::uint64_t ms = 1; ms <= 10'000; ++ms) {
    served += auth.admit(session, DoorUse::ids, 1, {}, now + 100 + ms, &used) == DoorVerdict::served;
  }
  EXPECT_GE(served, 99);
  EXPECT_LE(served, 101);
  EXPECT_GT(rejected(shared_.stats[door_core].keys[0], proto::RequestError::rate_limited), 9000u);
}

TEST_F(DoorAuthTest, ASessionEndsWhenItsKeyGoesOrItsPasswordChanges) {
  publish({key(1, "billing", "good-password-123"), key(2, "other", "other-password-12")});
  DoorAuth auth(core::AuthMode::optional, &fake_verify, shared_, door_core);
  DoorSession first, second;
  ASSERT_EQ(auth.login(first, "billing", "good-password-123"), "");
  ASSERT_EQ(auth.login(second, "other", "other-password-12"), "");
  const core::Key* used = nullptr;
  // A reload that keeps both keys as they are: both sessions go on.
  publish({key(1, "billing", "good-password-123"), key(2, "other", "other-password-12")});
  EXPECT_EQ(auth.admit(first, DoorUse::ids, 1, {}, 1000, &used), DoorVerdict::served);
  EXPECT_EQ(auth.admit(second, DoorUse::ids, 1, {}, 1000, &used), DoorVerdict::served);
  // billing's password changes, other is removed: both must log in again.
  publish({key(1, "billing", "new-password-4567")});
  EXPECT_EQ(auth.admit(first, DoorUse::ids, 1, {}, 1000, &used), DoorVerdict::session_ended);
  EXPECT_FALSE(first.logged_in());
  EXPECT_EQ(auth.admit(second, DoorUse::ids, 1, {}, 1000, &used), DoorVerdict::session_ended);
  // Ended under optional: served anonymously from then on (as unsigned UDP is).
  EXPECT_EQ(auth.admit(first, DoorUse::ids, 1, {}, 1000, &used), DoorVerdict::served);
  EXPECT_EQ(used, nullptr);
  EXPECT_EQ(auth.login(first, "billing", "new-password-4567"), "");
  EXPECT_EQ(auth.admit(first, DoorUse::ids, 1, {}, 1000, &used), DoorVerdict::served);
  EXPECT_NE(used, nullptr);
}

}  // namespace
}  // namespace flurry::dataplane
