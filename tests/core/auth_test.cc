// tests/core/auth_test.cc — authentication in core::Handler with a manual clock (the Burst):
// a signed request is served and its answer verifies; every tampered byte, a wrong key, an
// unknown key (dropped alike), a stale timestamp, a request for another server, one signed
// before the node was assigned here, and a replay (also on another worker, and across a wall
// clock step) are refused with their reason and issue nothing; permissions per opcode and
// batch; the token bucket; what a refused key can put into the replay table; --auth required
// / off; the replay filter when full and under concurrent checks; the key table's grace period.
#include <gtest/gtest.h>
#include <sodium.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/handler.h"
#include "core/keys.h"
#include "core/sequence_table.h"
#include "proto/auth.h"
#include "proto/wire.h"

namespace flurry::core {
namespace {

using proto::Opcode;
using proto::RequestError;
using proto::Status;
using Bytes = std::vector<std::uint8_t>;

constexpr std::uint64_t now_ms = 1'735'689'600'000;  // 2025-01-01T00:00:00Z
constexpr std::uint64_t t0 = 1'000'000;
constexpr std::uint32_t key_id = 7;

proto::MacKey secret_of(std::uint8_t seed) {
  proto::MacKey key{};
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(seed + i);
  return key;
}

Key make_key(std::uint32_t id, std::uint8_t seed, std::uint32_t slot) {
  Key key;
  key.id = id;
  key.slot = slot;
  key.name = "key" + std::to_string(id);
  key.secret = secret_of(seed);
  key.opcodes = (1U << 1) | (1U << 3);  // GET_IDS, INFO
  key.batch_max = 1000;
  return key;
}

constexpr std::uint32_t node = 5;  // the node id the handlers below serve

Bytes signed_request(Opcode opcode, std::uint32_t count, std::uint64_t request_id, std::uint64_t stamp_ms,
                     const proto::MacKey& secret, std::uint32_t id = key_id, std::size_t size = 44,
                     std::uint32_t server = node) {
  proto::Request request;
  request.opcode = opcode;
  request.count = count;
  request.request_id = request_id;
  Bytes bytes(size);
  EXPECT_EQ(proto::encode_signed_request(request, bytes, size, id, server, stamp_ms * 1000, secret,
                                         crypto_shorthash),
            size);
  return bytes;
}

class AuthTest : public ::testing::Test {
 protected:
  AuthTest() : replay_(4096), keys_({make_key(key_id, 1, 0), make_key(8, 50, 1)}) {
    EXPECT_GE(sodium_init(), 0);
    rebuild(AuthMode::required);
  }
  void rebuild(AuthMode mode, std::uint64_t node_since_ms = 0) {
    HandlerConfig config;
    config.layout.core_bits = 0;
    config.node_id = node;
    config.node_since_unix_ms = node_since_ms;
    config.auth = AuthConfig{mode, 5000, crypto_shorthash, &replay_};
    config.sequences = &sequences_;
    handler_.emplace(config, stats_);
    handler_->start_above(t0 - 1);
  }
  Burst burst(std::uint64_t ms = now_ms) const { return Burst{t0, t0 + 3000, ms, &keys_}; }
  Bytes handle(const Bytes& in, const Burst& at) {
    out_.fill(0xcd);
    const std::size_t size = handler_->handle(in, out_, at);
    return Bytes(out_.begin(), out_.begin() + static_cast<long>(size));
  }
  std::uint64_t errors(RequestError error) const {
    return stats_.request_errors[static_cast<std::size_t>(error)].get();
  }
  std::uint64_t key_rejected(std::uint32_t slot, RequestError error) const {
    return stats_.keys[slot].rejected[static_cast<std::size_t>(error) - 32].get();
  }
  // The answer's view after checking its MAC against the request's.
  proto::ResponseView verified(const Bytes& answer, const Bytes& request, const proto::MacKey& secret) {
    const std::uint64_t request_mac = proto::load_be<std::uint64_t>(request.data() + request.size() - 8);
    EXPECT_TRUE(proto::verify_answer(answer, request_mac, secret, crypto_shorthash));
    if (answer.size() < proto::answer_mac_size) return {};
    return proto::decode_response(std::span(answer).first(answer.size() - proto::answer_mac_size));
  }

  ReplayFilter replay_;
  SequenceTable sequences_{1};
  KeyTable keys_;
  WorkerStats stats_;
  std::optional<Handler> handler_;
  std::array<std::uint8_t, proto::datagram_size_max> out_{};
};

TEST_F(AuthTest, SignedGetIdsIsServedAndTheAnswerVerifies) {
  const Bytes request = signed_request(Opcode::get_ids, 5, 42, now_ms, secret_of(1));
  const Bytes answer = handle(request, burst());
  const proto::ResponseView view = verified(answer, request, secret_of(1));
  ASSERT_EQ(view.error, proto::ResponseError::ok);
  EXPECT_EQ(view.header.status, Status::ok);
  EXPECT_EQ(view.header.request_id, 42u);
  EXPECT_EQ(view.range(0).count, 5u);
  EXPECT_EQ(stats_.keys[0].requests.get(), 1u);
  EXPECT_EQ(stats_.keys[0].ids.get(), 5u);
  // The same answer does not verify for another request's MAC or another key.
  EXPECT_FALSE(proto::verify_answer(answer, 1234, secret_of(1), crypto_shorthash));
  const std::uint64_t request_mac = proto::load_be<std::uint64_t>(request.data() + 36);
  EXPECT_FALSE(proto::verify_answer(answer, request_mac, secret_of(2), crypto_shorthash));
}

// Every byte of a signed request flipped, one at a time: nothing is issued, and whatever
// decodes is refused by the key id, the timestamp window or the MAC.
TEST_F(AuthTest, EveryTamperedByteIssuesNothing) {
  const Bytes good = signed_request(Opcode::get_ids, 5, 42, now_ms, secret_of(1), key_id, 64);
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (std::uint8_t flip : {0x01, 0x80, 0xff}) {
      SCOPED_TRACE(testing::Message() << "byte " << i << " ^ " << int{flip});
      Bytes tampered = good;
      tampered[i] ^= flip;
      const std::uint64_t issued_before = stats_.get(Outcome::ids_issued);
      const Bytes answer = handle(tampered, burst());
      EXPECT_EQ(stats_.get(Outcome::ids_issued), issued_before);
      if (!answer.empty()) {
        EXPECT_NE(proto::decode_response(answer).header.status, Status::ok);
      }
    }
  }
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 0u);
  EXPECT_GT(errors(RequestError::bad_mac), 0u);
  // The untouched request still works: no tampered copy was recorded as its replay.
  EXPECT_EQ(verified(handle(good, burst()), good, secret_of(1)).header.status, Status::ok);
}

TEST_F(AuthTest, WrongKeyIsDroppedAsBadMac) {
  const Bytes answer = handle(signed_request(Opcode::get_ids, 5, 1, now_ms, secret_of(9)), burst());
  EXPECT_TRUE(answer.empty());
  EXPECT_EQ(errors(RequestError::bad_mac), 1u);
  EXPECT_EQ(key_rejected(0, RequestError::bad_mac), 1u);
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 0u);
  EXPECT_EQ(stats_.get(Outcome::dropped), 1u);
}

// An unknown key id gets what a known one with a wrong MAC gets: nothing. Which key ids exist
// is not told to anyone (it was: an UNAUTHORIZED unknown_key answer, against a dropped bad MAC).
TEST_F(AuthTest, UnknownKeyIsDroppedLikeABadMac) {
  const Bytes unknown = handle(signed_request(Opcode::get_ids, 5, 1, now_ms, secret_of(1), 99), burst());
  const Bytes wrong_mac = handle(signed_request(Opcode::get_ids, 5, 2, now_ms, secret_of(9)), burst());
  EXPECT_TRUE(unknown.empty());
  EXPECT_TRUE(wrong_mac.empty());
  EXPECT_EQ(errors(RequestError::unknown_key), 1u);
  EXPECT_EQ(errors(RequestError::bad_mac), 1u);
  EXPECT_EQ(stats_.get(Outcome::dropped), 2u);
  EXPECT_EQ(stats_.get(Outcome::answered_unauthorized), 0u);
}

TEST_F(AuthTest, StaleTimestampIsRefusedEitherWayAndSigned) {
  for (std::int64_t skew_ms : {-5001, 5001, -600'000, 600'000}) {
    SCOPED_TRACE(skew_ms);
    const Bytes request =
        signed_request(Opcode::get_ids, 5, 1, now_ms + static_cast<std::uint64_t>(skew_ms), secret_of(1));
    const proto::ResponseView view = verified(handle(request, burst()), request, secret_of(1));
    EXPECT_EQ(view.header.status, Status::unauthorized);
    EXPECT_EQ(view.header.detail, static_cast<std::uint32_t>(RequestError::stale_timestamp));
  }
  EXPECT_EQ(errors(RequestError::stale_timestamp), 4u);
  EXPECT_EQ(key_rejected(0, RequestError::stale_timestamp), 4u);
  // At the edges of the window the request is served.
  for (std::int64_t skew_ms : {-5000, 5000}) {
    const Bytes request =
        signed_request(Opcode::get_ids, 5, 2, now_ms + static_cast<std::uint64_t>(skew_ms), secret_of(1));
    EXPECT_EQ(verified(handle(request, burst()), request, secret_of(1)).header.status, Status::ok);
  }
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 10u);
}

TEST_F(AuthTest, ReplayIsDroppedOnEveryWorkerUntilStale) {
  const Bytes request = signed_request(Opcode::get_ids, 5, 1, now_ms, secret_of(1));
  ASSERT_FALSE(handle(request, burst()).empty());
  EXPECT_TRUE(handle(request, burst(now_ms + 10)).empty());
  // Another worker (same replay filter, own stats) refuses it too.
  WorkerStats other_stats;
  HandlerConfig config;
  config.node_id = 5;
  config.core = 1;
  config.auth = AuthConfig{AuthMode::required, 5000, crypto_shorthash, &replay_};
  Handler other(config, other_stats);
  other.start_above(t0 - 1);
  std::array<std::uint8_t, proto::datagram_size_max> out{};
  EXPECT_EQ(other.handle(request, out, burst(now_ms + 20)), 0u);
  EXPECT_EQ(other_stats.request_errors[static_cast<std::size_t>(RequestError::replay)].get(), 1u);
  EXPECT_EQ(other_stats.get(Outcome::ids_issued), 0u);
  // Once out of the window it is stale, not a replay, and still issues nothing.
  EXPECT_EQ(verified(handle(request, burst(now_ms + 5001)), request, secret_of(1)).header.detail,
            static_cast<std::uint32_t>(RequestError::stale_timestamp));
  EXPECT_EQ(errors(RequestError::replay), 1u);
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 5u);
}

TEST_F(AuthTest, PermissionsPerOpcodeAndBatch) {
  Key ping_only = make_key(9, 70, 2);
  ping_only.opcodes = 0;
  const KeyTable keys({ping_only});
  Burst at = burst();
  at.keys = &keys;
  for (Opcode opcode : {Opcode::get_ids, Opcode::info}) {
    const Bytes request =
        signed_request(opcode, opcode == Opcode::get_ids ? 5 : 0, 3, now_ms, secret_of(70), 9);
    const proto::ResponseView view = verified(handle(request, at), request, secret_of(70));
    EXPECT_EQ(view.header.status, Status::unauthorized);
    EXPECT_EQ(view.header.detail, static_cast<std::uint32_t>(RequestError::not_permitted));
  }
  const Bytes ping = signed_request(Opcode::ping, 0, 4, now_ms, secret_of(70), 9);
  EXPECT_EQ(verified(handle(ping, at), ping, secret_of(70)).header.status, Status::ok);
  // Key 7 may ask for 1000 IDs at most.
  const Bytes big = signed_request(Opcode::get_ids, 1001, 5, now_ms, secret_of(1));
  EXPECT_EQ(verified(handle(big, burst()), big, secret_of(1)).header.detail,
            static_cast<std::uint32_t>(RequestError::not_permitted));
  EXPECT_EQ(key_rejected(2, RequestError::not_permitted), 2u);
  EXPECT_EQ(key_rejected(0, RequestError::not_permitted), 1u);
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 0u);
}

TEST_F(AuthTest, TokenBucketLimitsRequestsPerSecond) {
  Key limited = make_key(10, 90, 3);
  limited.rate_per_s = 1000;  // holds 100 requests (100 ms)
  const KeyTable keys({limited});
  Burst at = burst();
  at.keys = &keys;
  auto served_of = [&](int requests, std::uint64_t ms, std::uint64_t first_id) {
    int served = 0;
    at.now_unix_ms = ms;
    for (int i = 0; i < requests; ++i) {
      const Bytes request =
          signed_request(Opcode::get_ids, 1, first_id + static_cast<std::uint64_t>(i), ms, secret_of(90), 10);
      const proto::ResponseView view = verified(handle(request, at), request, secret_of(90));
      if (view.header.status == Status::ok) ++served;
      if (view.header.status == Status::retry) {
        EXPECT_GT(view.header.detail, 0u);
      }
    }
    return served;
  };
  EXPECT_EQ(served_of(300, now_ms, 0), 100);
  EXPECT_EQ(served_of(300, now_ms + 50, 1000), 50);
  EXPECT_EQ(served_of(300, now_ms + 1000, 2000), 100);  // refill is capped at the bucket
  EXPECT_EQ(key_rejected(3, RequestError::rate_limited), 650u);
}

TEST_F(AuthTest, AnswerAllowanceOfTheKey) {
  Key large = make_key(11, 110, 4);
  large.answer_bytes_max = proto::datagram_size_max;
  large.batch_max = proto::count_max;
  const KeyTable keys({large});
  Burst at = burst();
  at.keys = &keys;
  // 44 bytes buy 132 bytes: (132 - 20 - 8) / 12 = 8 ranges; the key's allowance buys 120.
  const Bytes small = signed_request(Opcode::get_ids, 1000, 1, now_ms, secret_of(1));
  const proto::ResponseView view8 = verified(handle(small, burst()), small, secret_of(1));
  EXPECT_LE(view8.header.range_count, 8);
  const Bytes request = signed_request(Opcode::get_ids, 100'000, 2, now_ms, secret_of(110), 11);
  const Bytes answer = handle(request, at);
  EXPECT_LE(answer.size(), proto::datagram_size_max);
  EXPECT_GT(answer.size(), 3 * request.size());
}

TEST_F(AuthTest, ModesRequiredOptionalOff) {
  proto::Request plain;
  plain.opcode = Opcode::get_ids;
  plain.count = 5;
  Bytes unsigned_get(20);
  proto::encode_request(plain, unsigned_get);
  EXPECT_EQ(proto::decode_response(handle(unsigned_get, burst())).header.detail,
            static_cast<std::uint32_t>(RequestError::auth_required));
  plain.opcode = Opcode::ping;
  plain.count = 0;
  Bytes unsigned_ping(20);
  proto::encode_request(plain, unsigned_ping);
  EXPECT_EQ(proto::decode_response(handle(unsigned_ping, burst())).header.status, Status::ok);
  rebuild(AuthMode::optional);
  EXPECT_EQ(proto::decode_response(handle(unsigned_get, burst())).header.status, Status::ok);
  const Bytes request = signed_request(Opcode::get_ids, 5, 1, now_ms, secret_of(1));
  EXPECT_EQ(verified(handle(request, burst()), request, secret_of(1)).header.status, Status::ok);
  rebuild(AuthMode::off);
  const Bytes again = signed_request(Opcode::get_ids, 5, 2, now_ms, secret_of(1));
  EXPECT_EQ(proto::decode_response(handle(again, burst())).header.detail,
            static_cast<std::uint32_t>(RequestError::auth_unsupported));
  // No key table yet (optional, before a key file loaded): a signed request names no key.
  rebuild(AuthMode::optional);
  Burst no_keys = burst();
  no_keys.keys = nullptr;
  EXPECT_TRUE(handle(again, no_keys).empty());
  EXPECT_EQ(errors(RequestError::unknown_key), 1u);
}

// A signed GET_IDS or GET_SEQ names the node id it is for: another node refuses it (signed,
// naming its own node id, so a client can sign again for it), and so does a request for any
// server; PING and INFO may name any server. Nothing is issued or stored for the refused.
TEST_F(AuthTest, ARequestForAnotherServerIsRefusedNamingThisOne) {
  for (std::uint32_t server : {node + 1, proto::any_server, 0U}) {
    SCOPED_TRACE(server);
    const Bytes request =
        signed_request(Opcode::get_ids, 5, server, now_ms, secret_of(1), key_id, 44, server);
    const proto::ResponseView view = verified(handle(request, burst()), request, secret_of(1));
    EXPECT_EQ(view.header.status, Status::unauthorized);
    EXPECT_EQ(view.header.detail, static_cast<std::uint32_t>(RequestError::wrong_server));
    EXPECT_EQ(view.header.node, node);
    // Not put into the replay table: signed again for this node (a new MAC) it is served, and
    // the refused copy itself is refused the same way again, not as a replay.
    EXPECT_EQ(verified(handle(request, burst()), request, secret_of(1)).header.detail,
              static_cast<std::uint32_t>(RequestError::wrong_server));
  }
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 0u);
  EXPECT_EQ(errors(RequestError::replay), 0u);
  const Bytes info = signed_request(Opcode::info, 0, 9, now_ms, secret_of(1), key_id, 44, proto::any_server);
  EXPECT_EQ(verified(handle(info, burst()), info, secret_of(1)).header.status, Status::ok);
  const Bytes right = signed_request(Opcode::get_ids, 5, 10, now_ms, secret_of(1));
  EXPECT_EQ(verified(handle(right, burst()), right, secret_of(1)).header.status, Status::ok);
}

// What was signed before this process began serving its node id is stale, even inside the
// window: after a restart or a takeover the replay table is empty, and such a request may have
// been served before (by the previous run, or by the node id's previous holder).
TEST_F(AuthTest, ARequestSignedBeforeTheNodeWasAssignedHereIsStale) {
  rebuild(AuthMode::required, now_ms);
  const Bytes before = signed_request(Opcode::get_ids, 5, 1, now_ms - 1, secret_of(1));
  const proto::ResponseView view = verified(handle(before, burst(now_ms + 100)), before, secret_of(1));
  EXPECT_EQ(view.header.status, Status::unauthorized);
  EXPECT_EQ(view.header.detail, static_cast<std::uint32_t>(RequestError::stale_timestamp));
  const Bytes at = signed_request(Opcode::get_ids, 5, 2, now_ms, secret_of(1));
  EXPECT_EQ(verified(handle(at, burst(now_ms + 100)), at, secret_of(1)).header.status, Status::ok);
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 5u);
}

// The reviewer's replay: requests served, the wall clock stepped 70 s ahead (their entries
// expire) and back. The window is measured on the replay filter's clock, which stayed 70 s
// ahead: every one of them is stale now, none is served again. (With the window on the wall
// clock, 43 of 60 such requests were served twice.)
TEST_F(AuthTest, AWallClockStepAheadAndBackServesNoRequestTwice) {
  std::vector<Bytes> served;
  for (int i = 0; i < 60; ++i) {
    served.push_back(
        signed_request(Opcode::get_ids, 1, 1000 + static_cast<std::uint64_t>(i), now_ms, secret_of(1)));
    ASSERT_EQ(verified(handle(served.back(), burst()), served.back(), secret_of(1)).header.status,
              Status::ok);
  }
  // A request stamped with the stepped clock (a client that believes it) moves the clock.
  const Bytes ahead = signed_request(Opcode::get_ids, 1, 2000, now_ms + 70'000, secret_of(1));
  EXPECT_EQ(verified(handle(ahead, burst(now_ms + 70'000)), ahead, secret_of(1)).header.status, Status::ok);
  const std::uint64_t issued = stats_.get(Outcome::ids_issued);
  for (const Bytes& again : served) {
    const Bytes answer = handle(again, burst(now_ms + 1));  // the wall clock is back
    ASSERT_FALSE(answer.empty());
    EXPECT_EQ(verified(answer, again, secret_of(1)).header.detail,
              static_cast<std::uint32_t>(RequestError::stale_timestamp));
  }
  EXPECT_EQ(stats_.get(Outcome::ids_issued), issued);
}

// A key limited to INFO and 1 request a second signs a flood: its refused requests never reach
// the replay table (permission and rate come first), so a tiny table still takes another
// key's requests. (Before: the flood filled it and they were refused replay_full.)
TEST_F(AuthTest, ARefusedKeyCannotFillTheSharedReplayTable) {
  ReplayFilter tiny(ReplayFilter::slots_min);
  HandlerConfig config;
  config.layout.core_bits = 0;
  config.node_id = node;
  config.auth = AuthConfig{AuthMode::required, 5000, crypto_shorthash, &tiny};
  Handler handler(config, stats_);
  handler.start_above(t0 - 1);
  Key flooder = make_key(20, 120, 5);
  flooder.opcodes = 1U << 3;  // INFO only
  flooder.rate_per_s = 1;
  const KeyTable keys({flooder, make_key(key_id, 1, 0)});
  Burst at = burst();
  at.keys = &keys;
  std::array<std::uint8_t, proto::datagram_size_max> out{};
  for (std::uint64_t i = 0; i < 4 * ReplayFilter::slots_min; ++i) {
    const Opcode opcode = i % 2 == 0 ? Opcode::get_ids : Opcode::info;
    const Bytes flood =
        signed_request(opcode, opcode == Opcode::get_ids ? 1 : 0, i, now_ms, secret_of(120), 20);
    handler.handle(flood, out, at);
  }
  EXPECT_LE(key_rejected(5, RequestError::rate_limited) + key_rejected(5, RequestError::not_permitted),
            4 * ReplayFilter::slots_min);
  EXPECT_GT(key_rejected(5, RequestError::not_permitted), 0u);
  EXPECT_GT(key_rejected(5, RequestError::rate_limited), 0u);
  for (std::uint64_t i = 0; i < 50; ++i) {
    const Bytes request = signed_request(Opcode::get_ids, 1, 100'000 + i, now_ms, secret_of(1));
    const std::size_t size = handler.handle(request, out, at);
    const Bytes answer(out.begin(), out.begin() + static_cast<long>(size));
    EXPECT_EQ(verified(answer, request, secret_of(1)).header.status, Status::ok) << i;
  }
  EXPECT_EQ(errors(RequestError::replay_full), 0u);
}

TEST(ReplayFilterTest, FullRefusesRatherThanAccepts) {
  ReplayFilter filter(1024);
  // Every MAC with the same home slot: the 17th finds no free slot in its probe window.
  for (std::uint64_t i = 0; i < ReplayFilter::probe_max; ++i) {
    EXPECT_EQ(filter.check((i + 1) << 32, 100, 200), ReplayFilter::Verdict::fresh);
  }
  EXPECT_EQ(filter.check(std::uint64_t{99} << 32, 100, 200), ReplayFilter::Verdict::full);
  EXPECT_EQ(filter.check(std::uint64_t{1} << 32, 100, 200), ReplayFilter::Verdict::replay);
  // After expiry the slots are free again.
  EXPECT_EQ(filter.check(std::uint64_t{99} << 32, 200, 300), ReplayFilter::Verdict::fresh);
}

// Four threads check the same MACs at once. At most one of them may accept a MAC, and after
// the race every MAC is remembered. How many were accepted by one rather than refused by all
// (twins that claimed two slots at once refuse each other) is the scheduler's choice: printed,
// not bounded. The table is large enough (at most 4 slots a MAC, under 8 % full) that a probe
// window is never found full.
TEST(ReplayFilterTest, ConcurrentChecksOfOneMacAcceptAtMostOne) {
  ReplayFilter filter(1 << 20);
  constexpr int threads = 4, macs = 20'000;
  std::vector<std::vector<std::uint8_t>> fresh(threads, std::vector<std::uint8_t>(macs));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < macs; ++i) {
        const std::uint64_t mac = 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(i + 1);
        fresh[t][i] = filter.check(mac, 1, 1000) == ReplayFilter::Verdict::fresh;
      }
    });
  }
  for (auto& worker : workers) worker.join();
  int accepted = 0;
  for (int i = 0; i < macs; ++i) {
    int count = 0;
    for (int t = 0; t < threads; ++t) count += fresh[t][i];
    EXPECT_LE(count, 1) << "mac " << i;
    accepted += count;
    const std::uint64_t mac = 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(i + 1);
    EXPECT_EQ(filter.check(mac, 1, 1000), ReplayFilter::Verdict::replay) << "mac " << i << " was forgotten";
  }
  std::printf("ReplayFilter: %d of %d MACs accepted by one of %d racing threads, the rest refused by all\n",
              accepted, macs, threads);
}

TEST(KeyTableSlotTest, OldTableLivesUntilEveryWorkerQuiesced) {
  KeyTableSlot slot(2);
  slot.quiesce(0);
  slot.quiesce(1);
  slot.publish(std::make_unique<KeyTable>(std::vector<Key>{make_key(1, 1, 0)}));
  const KeyTable* first = slot.load();
  ASSERT_NE(first, nullptr);
  slot.quiesce(0);
  slot.quiesce(1);
  slot.publish(std::make_unique<KeyTable>(std::vector<Key>{make_key(2, 2, 1)}));
  EXPECT_EQ(slot.retired(), 1u) << "no worker passed a burst boundary since the swap";
  EXPECT_NE(slot.load()->find(2), nullptr);
  slot.quiesce(0);
  EXPECT_EQ(slot.reclaim(), 1u) << "worker 1 may still hold the first table";
  slot.leave(1);
  EXPECT_EQ(slot.reclaim(), 0u);
}

// Workers quiesce, load and read the table while the control loop (flurryd's main thread) publishes
// and reclaims thousands of times; one worker also leaves and comes back as at start. Under ASan a table
// read after it was freed is reported (the check this test exists for); without it, the
// values read must still be those of a live table.
TEST(KeyTableSlotTest, ConcurrentPublishAndReclaimNeverFreesATableInUse) {
  constexpr std::uint32_t workers = 3;
  KeyTableSlot slot(workers);
  slot.publish(std::make_unique<KeyTable>(std::vector<Key>{make_key(1, 1, 0)}));
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> reads{0};
  std::vector<std::thread> threads;
  for (std::uint32_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      for (std::uint64_t round = 0; !stop.load(std::memory_order_relaxed); ++round) {
        if (w == 0 && round % 64 == 0) slot.leave(w);  // as a worker that has not started yet
        slot.quiesce(w);
        const KeyTable* table = slot.load();
        const Key* key = table->find(table->keys().front().id);
        if (key == nullptr || key->name != "key" + std::to_string(key->id)) std::abort();
        reads.fetch_add(1, std::memory_order_relaxed);
      }
      slot.leave(w);
    });
  }
  // At least 3000 swaps, and on until the readers have read 1000 times (a loaded machine may
  // start them late, and a sanitizer build swaps slowly): bounded in time, not in swaps, so a
  // slow machine gets as long as it needs up to the bound.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (std::uint32_t i = 2; i < 3000 || (reads.load() < 1000 && std::chrono::steady_clock::now() < until);
       ++i) {
    slot.publish(
        std::make_unique<KeyTable>(std::vector<Key>{make_key(i, static_cast<std::uint8_t>(i), i % 100)}));
    slot.reclaim();
  }
  stop.store(true);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(slot.reclaim(), 0u) << "every worker left: nothing may stay retired";
  EXPECT_GE(reads.load(), 1000u);
}

TEST(KeyTest, AllowsSequence) {
  Key key;
  key.sequences = {"orders", "invoices"};
  EXPECT_TRUE(key.allows_sequence("orders"));
  EXPECT_FALSE(key.allows_sequence("order"));
  key.sequences = {"*"};
  EXPECT_TRUE(key.allows_sequence("anything"));
}

}  // namespace
}  // namespace flurry::core

namespace flurry::core {
namespace {

// GET_SEQ signed: the name sits between the header and the trailer; the key's opcode bit,
// batch limit and sequence names all apply; unsigned GET_SEQ is refused under --auth required.
Bytes signed_seq(std::string_view name, std::uint32_t count, std::uint64_t request_id,
                 const proto::MacKey& secret, std::uint32_t id) {
  proto::Request request;
  request.opcode = Opcode::get_seq;
  request.count = count;
  request.request_id = request_id;
  std::copy(name.begin(), name.end(), request.name.bytes.begin());
  request.name.size = static_cast<std::uint8_t>(name.size());
  Bytes bytes(proto::datagram_size_max);
  const std::size_t size =
      proto::encode_signed_request(request, bytes, 44, id, node, now_ms * 1000, secret, crypto_shorthash);
  EXPECT_GE(size, 20U + 1 + name.size() + 24) << "the name ends before the trailer";
  bytes.resize(size);
  return bytes;
}

TEST_F(AuthTest, SignedGetSeqChecksTheKeysSequenceNames) {
  const std::optional<std::size_t> orders = sequences_.create("orders", SeqMode::segment, 1);
  const std::optional<std::size_t> invoices = sequences_.create("invoices-2026", SeqMode::segment, 2);
  ASSERT_TRUE(orders && invoices);
  ASSERT_TRUE(sequences_.push(*orders, 0, SeqBlock{100, 200}));
  ASSERT_TRUE(sequences_.push(*invoices, 0, SeqBlock{500, 600}));
  Key allowed = make_key(key_id, 1, 0);
  allowed.opcodes |= 1U << 4;  // GET_SEQ
  allowed.sequences = {"orders"};
  Key no_seq = make_key(8, 50, 1);
  no_seq.sequences = {"*"};  // every name, but not the opcode
  keys_ = KeyTable({allowed, no_seq});

  // Each answer stays in `answer` while its view (which points into it) is read.
  Bytes request = signed_seq("orders", 3, 1, secret_of(1), key_id);
  Bytes answer = handle(request, burst());
  proto::ResponseView view = verified(answer, request, secret_of(1));
  ASSERT_EQ(view.error, proto::ResponseError::ok);
  ASSERT_EQ(view.header.status, Status::ok);
  EXPECT_EQ(view.range(0), (proto::Range{100, 3}));

  // A name the key may not use: refused, signed, nothing issued from it.
  request = signed_seq("invoices-2026", 3, 2, secret_of(1), key_id);
  answer = handle(request, burst());
  view = verified(answer, request, secret_of(1));
  EXPECT_EQ(view.header.status, Status::unauthorized);
  EXPECT_EQ(view.header.detail, static_cast<std::uint32_t>(RequestError::not_permitted));
  // A key without the GET_SEQ opcode: refused whatever the name.
  request = signed_seq("orders", 3, 3, secret_of(50), 8);
  answer = handle(request, burst());
  view = verified(answer, request, secret_of(50));
  EXPECT_EQ(view.header.detail, static_cast<std::uint32_t>(RequestError::not_permitted));
  EXPECT_EQ(key_rejected(0, RequestError::not_permitted), 1U);
  EXPECT_EQ(key_rejected(1, RequestError::not_permitted), 1U);

  // Unsigned GET_SEQ under --auth required: auth_required.
  proto::Request plain;
  plain.opcode = Opcode::get_seq;
  plain.count = 1;
  plain.request_id = 4;
  plain.name.size = 6;
  std::copy_n("orders", 6, plain.name.bytes.begin());
  Bytes unsigned_request(64);
  unsigned_request.resize(proto::encode_request(plain, unsigned_request, 64));
  answer = handle(unsigned_request, burst());
  const proto::ResponseView refused = proto::decode_response(answer);
  EXPECT_EQ(refused.header.status, Status::unauthorized);
  EXPECT_EQ(refused.header.detail, static_cast<std::uint32_t>(RequestError::auth_required));

  // The sequence still hands out what nobody took: the refusals issued nothing.
  request = signed_seq("orders", 100, 5, secret_of(1), key_id);
  answer = handle(request, burst());
  view = verified(answer, request, secret_of(1));
  ASSERT_EQ(view.header.status, Status::ok);
  EXPECT_EQ(view.range(0), (proto::Range{103, 97}));
}

}  // namespace
}  // namespace flurry::core

namespace flurry::core {
namespace {

// batch_max bounds GET_IDS only (PROTOCOL.md, docs/authentication.md); seq_batch_max bounds GET_SEQ. A key
// with batch_max 10 and seq_batch_max 50: GET_SEQ of 40 is served, of 51 refused; GET_IDS of
// 10 is served, of 11 refused. Every refusal is signed not_permitted and issues nothing.
TEST_F(AuthTest, BatchMaxBoundsGetIdsAndSeqBatchMaxBoundsGetSeq) {
  const std::optional<std::size_t> orders = sequences_.create("orders", SeqMode::segment, 1);
  ASSERT_TRUE(orders);
  ASSERT_TRUE(sequences_.push(*orders, 0, SeqBlock{100, 200}));
  Key key = make_key(key_id, 1, 0);
  key.opcodes |= 1U << 4;  // GET_SEQ
  key.sequences = {"orders"};
  key.batch_max = 10;
  key.seq_batch_max = 50;
  keys_ = KeyTable({key});

  Bytes request = signed_seq("orders", 40, 1, secret_of(1), key_id);
  Bytes answer = handle(request, burst());
  proto::ResponseView view = verified(answer, request, secret_of(1));
  ASSERT_EQ(view.header.status, Status::ok) << "batch_max must not bound GET_SEQ";
  EXPECT_EQ(view.range(0), (proto::Range{100, 40}));

  request = signed_seq("orders", 51, 2, secret_of(1), key_id);
  answer = handle(request, burst());
  view = verified(answer, request, secret_of(1));
  EXPECT_EQ(view.header.status, Status::unauthorized);
  EXPECT_EQ(view.header.detail, static_cast<std::uint32_t>(RequestError::not_permitted));

  request = signed_request(Opcode::get_ids, 10, 3, now_ms, secret_of(1));
  answer = handle(request, burst());
  view = verified(answer, request, secret_of(1));
  EXPECT_EQ(view.header.status, Status::ok);
  request = signed_request(Opcode::get_ids, 11, 4, now_ms, secret_of(1));
  answer = handle(request, burst());
  view = verified(answer, request, secret_of(1));
  EXPECT_EQ(view.header.status, Status::unauthorized);
  EXPECT_EQ(view.header.detail, static_cast<std::uint32_t>(RequestError::not_permitted));
  EXPECT_EQ(key_rejected(0, RequestError::not_permitted), 2U);
  EXPECT_EQ(stats_.get(Outcome::seq_ids_issued), 40U);
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 10U);
}

}  // namespace
}  // namespace flurry::core
