// tests/dataplane/plain_path_test.cc — the DPDK fast path (frame::PlainPath) and the RFC 1624
// incremental checksum (frame::checksum_update), on plain byte buffers (no EAL).
//
// The fast path's contract is checked against the general path itself: two handlers in the
// same state take the same frames, one through PlainPath (falling back to process() where it
// declines) and one through process() alone; every answer must be the same bytes with the same
// offload flags, every counter and the generators' state the same, and a declined frame must be
// left untouched. Frames are valid requests of every padded size, with and without a UDP
// checksum, under every RX / TX checksum setting, and the same frames with one field or one
// random byte changed. Random cases use a printed seed (FLURRY_TEST_SEED replays one).
#include "dataplane/plain_path.h"

#include <gtest/gtest.h>

#include "tests/support/seed.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include "core/handler.h"
#include "core/source_limit.h"
#include "proto/layout.h"
#include "proto/wire.h"

namespace flurry::dataplane::frame {
namespace {

using Bytes = std::vector<std::uint8_t>;
using flurry::testing::test_seed;

constexpr MacAddress our_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
constexpr std::uint32_t our_ip = 0x0a4d0001;  // 10.77.0.1
constexpr std::uint16_t our_port = 7420;

// ---- an independent checksum (RFC 1071), not sharing code with frame.cc ----
std::uint16_t reference_checksum(const std::uint8_t* data, std::size_t size, std::uint32_t initial = 0) {
  std::uint32_t sum = initial;
  for (std::size_t i = 0; i < size; i += 2) {
    sum += (std::uint32_t{data[i]} << 8) | (i + 1 < size ? data[i + 1] : 0);
    sum = (sum & 0xffff) + (sum >> 16);
  }
  return static_cast<std::uint16_t>(~sum & 0xffff);
}

void put16(Bytes& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<std::uint8_t>(v >> 8);
  b[at + 1] = static_cast<std::uint8_t>(v);
}
void put32(Bytes& b, std::size_t at, std::uint32_t v) {
  put16(b, at, static_cast<std::uint16_t>(v >> 16));
  put16(b, at + 2, static_cast<std::uint16_t>(v));
}
void put64(Bytes& b, std::size_t at, std::uint64_t v) {
  put32(b, at, static_cast<std::uint32_t>(v >> 32));
  put32(b, at + 4, static_cast<std::uint32_t>(v));
}
std::uint16_t word_at(const Bytes& b, std::size_t at) {
  return static_cast<std::uint16_t>((b[at] << 8) | (at + 1 < b.size() ? b[at + 1] : 0));
}

// ---- RFC 1624: the incremental update against a fresh sum ----

std::uint16_t fresh(const Bytes& data) { return checksum_finish(checksum_add(0, data)); }

TEST(ChecksumUpdate, EqualsAFreshSumOnRandomData) {
  const std::uint64_t seed = test_seed();
  std::printf("seed %llu (FLURRY_TEST_SEED replays it)\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 20'000; ++trial) {
    Bytes data(1 + rng() % 1500);  // odd lengths too: the last word is padded with a zero byte
    for (auto& byte : data) byte = static_cast<std::uint8_t>(rng());
    std::uint16_t checksum = fresh(data);
    ASSERT_EQ(checksum, reference_checksum(data.data(), data.size()));
    for (int change = 0; change < 4; ++change) {  // several updates in a row
      const std::size_t at = 2 * (rng() % ((data.size() + 1) / 2));
      const std::uint16_t old_word = word_at(data, at);
      // Half the time a corner value: 0x0000 or 0xffff (one's-complement zeros).
      std::uint16_t new_word =
          rng() % 2 == 0 ? static_cast<std::uint16_t>(rng()) : (rng() % 2 == 0 ? 0 : 0xffff);
      if (at + 1 >= data.size()) new_word &= 0xff00;  // an odd tail holds one byte
      data[at] = static_cast<std::uint8_t>(new_word >> 8);
      if (at + 1 < data.size()) data[at + 1] = static_cast<std::uint8_t>(new_word);
      checksum = checksum_update(checksum, old_word, new_word);
      if (std::all_of(data.begin(), data.end(), [](std::uint8_t byte) { return byte == 0; })) {
        // All zero words: both are one's-complement zeros (see CornerCases); go on from fresh.
        ASSERT_TRUE(checksum == 0 || checksum == 0xffff);
        checksum = fresh(data);
        continue;
      }
      ASSERT_EQ(checksum, fresh(data)) << "trial " << trial << " size " << data.size() << " at " << at;
    }
  }
}

TEST(ChecksumUpdate, CornerCases) {
  // Data whose words sum to 0xffff (-0): its checksum is 0x0000; every word changed to and from
  // the corner values still matches the fresh sum.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 5'000; ++trial) {
    Bytes data(2 * (2 + rng() % 40));
    for (auto& byte : data) byte = static_cast<std::uint8_t>(rng());
    put16(data, data.size() - 2, 0);
    put16(data, data.size() - 2, fresh(data));  // now the data sums to 0xffff
    ASSERT_EQ(fresh(data), 0x0000);
    const std::size_t at = 2 * (rng() % (data.size() / 2));
    for (const std::uint16_t new_word : {std::uint16_t{0}, std::uint16_t{0xffff}, std::uint16_t{1},
                                         std::uint16_t{0xfffe}, word_at(data, at)}) {
      Bytes changed = data;
      put16(changed, at, new_word);
      ASSERT_EQ(checksum_update(0x0000, word_at(data, at), new_word), fresh(changed)) << "trial " << trial;
    }
  }
  // RFC 1624's own example (section 4): HC 0xdd2f, m 0x5555 -> m' 0x3285 gives 0x0000, not 0xffff.
  EXPECT_EQ(checksum_update(0xdd2f, 0x5555, 0x3285), 0x0000);
  // From all-zero data (checksum 0xffff) to a non-zero word: ~m'.
  EXPECT_EQ(checksum_update(0xffff, 0x0000, 0x1234), static_cast<std::uint16_t>(~0x1234));
  // The one place the two may differ is data left all zero words, where both are one's-complement
  // zeros: the fresh sum gives 0xffff (sum +0), the update 0x0000 (sum -0).
  EXPECT_EQ(fresh(Bytes(8, 0)), 0xffff);
  EXPECT_EQ(checksum_update(0xffff, 0x0000, 0x0000), 0x0000);
}

// ---- PlainPath against process() ----

struct Request {
  MacAddress client_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
  std::uint32_t client_ip = 0x0a4d0002;
  std::uint16_t client_port = 40000;
  std::uint64_t request_id = 77;
  std::uint32_t count = 1;
  std::size_t payload = proto::request_header_size;  // padded size
  bool udp_checksum = true;
};

std::uint32_t get32(const Bytes& b, std::size_t at) {
  return (std::uint32_t{word_at(b, at)} << 16) | word_at(b, at + 2);
}

// The UDP checksum of `b` made right again after a change (over the UDP length it announces).
void refresh_udp_checksum(Bytes& b) {
  const std::uint16_t udp_length = word_at(b, 38);
  if (udp_length < 8 || 34 + std::size_t{udp_length} > b.size()) return;
  const std::uint32_t source = get32(b, 26), destination = get32(b, 30);
  std::uint32_t pseudo =
      (source >> 16) + (source & 0xffff) + (destination >> 16) + (destination & 0xffff) + 17 + udp_length;
  pseudo = (pseudo & 0xffff) + (pseudo >> 16);
  put16(b, 40, 0);
  const std::uint16_t sum = reference_checksum(b.data() + 34, udp_length, pseudo);
  put16(b, 40, sum == 0 ? 0xffff : sum);
}

// A GET_IDS frame built byte by byte (not with the code under test), checksums correct.
Bytes build(const Request& r) {
  const auto udp_length = static_cast<std::uint16_t>(8 + r.payload);
  const auto ip_length = static_cast<std::uint16_t>(20 + udp_length);
  Bytes b(14 + ip_length, 0);
  std::copy(our_mac.begin(), our_mac.end(), b.begin());
  std::copy(r.client_mac.begin(), r.client_mac.end(), b.begin() + 6);
  put16(b, 12, 0x0800);
  b[14] = 0x45;
  b[15] = 0x10;  // any TOS
  put16(b, 16, ip_length);
  put16(b, 18, static_cast<std::uint16_t>(r.request_id * 7));  // any IP id
  put16(b, 20, 0x4000);                                        // DF
  b[22] = 57;                                                  // any TTL
  b[23] = 17;
  put32(b, 26, r.client_ip);
  put32(b, 30, our_ip);
  put16(b, 24, reference_checksum(b.data() + 14, 20));
  put16(b, 34, r.client_port);
  put16(b, 36, our_port);
  put16(b, 38, udp_length);
  // GET_IDS, PROTOCOL.md: magic "FL", version 1, opcode 1, flags 0, reserved 0, count, id.
  b[42] = 'F';
  b[43] = 'L';
  b[44] = 1;
  b[45] = 1;
  put32(b, 50, r.count);
  put64(b, 54, r.request_id);
  if (r.udp_checksum) refresh_udp_checksum(b);
  return b;
}

// Two handlers in the same state: `fast` answers through PlainPath first, `general` through
// process() alone.
class PlainPathTest : public ::testing::Test {
 protected:
  PlainPathTest() : PlainPathTest(nullptr) {}
  // With `limit`: both handlers bound per source, each by its own table of the same keys.
  explicit PlainPathTest(const core::SourceLimitConfig* limit)
      : fast_limit_(limit == nullptr ? nullptr
                                     : std::make_unique<core::SourceLimit>(*limit, fast_stats_.sources)),
        general_limit_(
            limit == nullptr ? nullptr : std::make_unique<core::SourceLimit>(*limit, general_stats_.sources)),
        fast_(make_config(fast_limit_.get()), fast_stats_),
        general_(make_config(general_limit_.get()), general_stats_) {
    fast_.start_above(999);
    general_.start_above(999);
    burst_.now_t = 1000;
    burst_.ceiling_t = 1'000'000;
    burst_.now_unix_ms = 1'760'000'000'000ULL;
    identity_.mac = our_mac;
    identity_.ip = our_ip;
    identity_.port = our_port;
  }

  static core::HandlerConfig make_config(core::SourceLimit* limit) {
    core::HandlerConfig config;
    config.source_limit = limit;
    config.layout = *proto::layout_preset("snowflake");  // 4096 IDs a unit: large counts straddle
    config.node_id = 517;
    return config;
  }

  // Runs `frame` through both; checks the contract. Returns true if the fast path answered it.
  bool compare(const Bytes& frame, const RxMeta& rx, const TxOffload& tx) {
    PlainPath plain(identity_, tx);
    Bytes a(std::max(frame.size(), buffer_size_min), 0xee);
    std::copy(frame.begin(), frame.end(), a.begin());
    Bytes b = a;
    const Bytes untouched = a;
    Result fast_result;
    bool taken = false;
    if (plain.prepare(fast_, burst_)) {
      fast_result.length = plain.answer(a, frame.size(), rx, fast_, burst_);
      taken = fast_result.length != 0;
    }
    if (taken) {
      fast_result.action = Action::udp_answer;
      fast_result.offload_ipv4_checksum = plain.offload_ipv4_checksum();
      fast_result.offload_udp_checksum = plain.offload_udp_checksum();
    } else {
      EXPECT_EQ(a, untouched) << "a declined frame was written";
      fast_result = process(a, frame.size(), rx, identity_, tx, fast_, burst_);
    }
    plain.finish(fast_);
    const Result general_result = process(b, frame.size(), rx, identity_, tx, general_, burst_);
    EXPECT_EQ(fast_result.action, general_result.action);
    EXPECT_EQ(fast_result.drop, general_result.drop);
    EXPECT_EQ(fast_result.length, general_result.length);
    EXPECT_EQ(fast_result.offload_ipv4_checksum, general_result.offload_ipv4_checksum);
    EXPECT_EQ(fast_result.offload_udp_checksum, general_result.offload_udp_checksum);
    if (general_result.action != Action::drop && general_result.action != Action::payload_dropped) {
      EXPECT_TRUE(
          std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(general_result.length), b.begin()))
          << "answers differ";
    }
    for (std::size_t i = 0; i < core::outcome_count; ++i) {
      EXPECT_EQ(fast_stats_.outcomes[i].get(), general_stats_.outcomes[i].get())
          << core::to_string(static_cast<core::Outcome>(i));
    }
    for (std::size_t i = 0; i < proto::request_error_slots; ++i) {
      EXPECT_EQ(fast_stats_.request_errors[i].get(), general_stats_.request_errors[i].get()) << i;
    }
    EXPECT_EQ(fast_stats_.sources.limited.get(), general_stats_.sources.limited.get());
    EXPECT_EQ(fast_stats_.sources.trimmed.get(), general_stats_.sources.trimmed.get());
    EXPECT_EQ(fast_.generator().last_t(), general_.generator().last_t());
    return taken;
  }

  core::WorkerStats fast_stats_;
  core::WorkerStats general_stats_;
  std::unique_ptr<core::SourceLimit> fast_limit_;
  std::unique_ptr<core::SourceLimit> general_limit_;
  core::Handler fast_;
  core::Handler general_;
  core::Burst burst_;
  Identity identity_;
};

const std::array<RxMeta, 4> rx_settings = {RxMeta{}, RxMeta{Checksum::good, Checksum::good},
                                           RxMeta{Checksum::good, Checksum::unknown},
                                           RxMeta{Checksum::unknown, Checksum::good}};
const std::array<TxOffload, 3> tx_settings = {TxOffload{}, TxOffload{true, true}, TxOffload{true, false}};

TEST_F(PlainPathTest, AnswersEveryPaddedSizeLikeProcess) {
  int taken = 0;
  for (std::size_t payload = proto::request_header_size; payload <= proto::datagram_size_max; ++payload) {
    Request r;
    r.payload = payload;
    r.request_id = 0x0102030405060708ULL + payload;
    r.client_port = static_cast<std::uint16_t>(1 + payload);
    r.udp_checksum = payload % 3 != 0;
    const RxMeta& rx = rx_settings[payload % rx_settings.size()];
    const TxOffload& tx = tx_settings[payload % tx_settings.size()];
    taken += compare(build(r), rx, tx) ? 1 : 0;
    ASSERT_FALSE(HasFailure()) << "payload " << payload;
  }
  EXPECT_EQ(taken, static_cast<int>(proto::datagram_size_max - proto::request_header_size + 1));
}

TEST_F(PlainPathTest, AnswersRandomRequestsLikeProcess) {
  const std::uint64_t seed = test_seed();
  std::printf("seed %llu (FLURRY_TEST_SEED replays it)\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int taken = 0, declined = 0;
  for (int i = 0; i < 20'000; ++i) {
    Request r;
    for (auto& byte : r.client_mac) byte = static_cast<std::uint8_t>(rng());
    r.client_mac[0] &= 0xfe;  // unicast
    r.client_ip = static_cast<std::uint32_t>(rng());
    r.client_port = static_cast<std::uint16_t>(rng());
    r.request_id = rng();
    // Mostly small counts; some straddle a 4096-ID unit (two ranges: the general path's).
    r.count = static_cast<std::uint32_t>(rng() % 16 == 0 ? 1 + rng() % proto::count_max : 1 + rng() % 64);
    r.payload = rng() % 2 == 0 ? proto::request_size_for_ids(r.count, 4096) : 20 + rng() % 1453;
    r.udp_checksum = rng() % 4 != 0;
    if (rng() % 50 == 0) burst_.now_t += 1 + rng() % 3;
    if (rng() % 500 == 0) burst_.ceiling_t = burst_.now_t - 1;  // RETRY for a while
    if (rng() % 100 == 0) burst_.ceiling_t = burst_.now_t + 1'000'000;
    const bool fast =
        compare(build(r), rx_settings[rng() % rx_settings.size()], tx_settings[rng() % tx_settings.size()]);
    (fast ? taken : declined) += 1;
    ASSERT_FALSE(HasFailure()) << "request " << i;
  }
  EXPECT_GT(taken, 10'000);
  EXPECT_GT(declined, 100);
}

// One field changed: each change below either makes process() drop or answer otherwise (so the
// fast path must decline) or is harmless (the answers must agree).
TEST_F(PlainPathTest, ChangedFieldsFallBack) {
  struct Change {
    const char* name;
    void (*apply)(Bytes&);
    bool fast;  // still a plain request the fast path answers
  };
  const std::vector<Change> changes = {
      {"flags auth", [](Bytes& b) { b[47] = 1; }, false},
      {"flags unknown", [](Bytes& b) { b[46] = 0x80; }, false},
      {"reserved", [](Bytes& b) { b[49] = 1; }, false},
      {"version", [](Bytes& b) { b[44] = 2; }, false},
      {"opcode ping", [](Bytes& b) { b[45] = 2; }, false},
      {"opcode response", [](Bytes& b) { b[45] = 0x81; }, false},
      {"magic", [](Bytes& b) { b[42] = 'G'; }, false},
      {"count 0", [](Bytes& b) { put32(b, 50, 0); }, false},
      {"count too large", [](Bytes& b) { put32(b, 50, proto::count_max + 1); }, false},
      {"padding byte", [](Bytes& b) { b.back() = 1; }, false},
      {"IP checksum", [](Bytes& b) { b[25] ^= 1; }, false},
      {"UDP checksum", [](Bytes& b) { b[41] ^= 1; }, false},
      {"UDP checksum none", [](Bytes& b) { put16(b, 40, 0); }, true},
      {"IP options", [](Bytes& b) { b[14] = 0x46; }, false},
      {"fragment", [](Bytes& b) { b[20] |= 0x20; }, false},
      {"multicast source MAC", [](Bytes& b) { b[6] |= 1; }, false},
      {"other destination MAC", [](Bytes& b) { b[5] ^= 1; }, false},
      {"IPv6", [](Bytes& b) { b[12] = 0x86; }, false},
      {"ICMP", [](Bytes& b) { b[23] = 1; }, false},
      {"other destination IP", [](Bytes& b) { b[33] ^= 1; }, false},
      {"source 127/8", [](Bytes& b) { b[26] = 127; }, false},
      {"source 0/8", [](Bytes& b) { b[26] = 0; }, false},
      {"source multicast", [](Bytes& b) { b[26] = 224; }, false},
      {"source port 0", [](Bytes& b) { put16(b, 34, 0); }, false},
      {"other destination port", [](Bytes& b) { put16(b, 36, 7421); }, false},
      {"Ethernet padding", [](Bytes& b) { b.push_back(0); }, false},
      {"UDP length short", [](Bytes& b) { put16(b, 38, static_cast<std::uint16_t>(b.size() - 34 - 1)); },
       false},
  };
  for (const Change& change : changes) {
    for (const RxMeta& rx : rx_settings) {
      for (const TxOffload& tx : tx_settings) {
        Request r;
        r.payload = 37;
        Bytes frame = build(r);
        change.apply(frame);
        // The checksum changes are the only ones meant to break a checksum; the others keep
        // them right where they cover the field, so that the case tests the field itself.
        if (std::string_view(change.name).find("checksum") == std::string_view::npos) {
          if (frame.size() >= 34 && frame[14] == 0x45) {
            put16(frame, 24, 0);
            put16(frame, 24, reference_checksum(frame.data() + 14, 20));
          }
          if (word_at(frame, 40) != 0) refresh_udp_checksum(frame);
        }
        const bool taken = compare(frame, rx, tx);
        const bool checksum_trusted = std::string_view(change.name) == "IP checksum" ? rx.ip == Checksum::good
                                      : std::string_view(change.name) == "UDP checksum"
                                          ? rx.l4 == Checksum::good
                                          : false;
        EXPECT_EQ(taken, change.fast || checksum_trusted) << change.name;
        ASSERT_FALSE(HasFailure()) << change.name;
      }
    }
  }
}

// The per-source bound (docs/fairness.md) on the fast path: a few clients asking more than
// their buckets hold, the buckets refilled now and then. The fast path charges a request whole
// or hands it to process(); either way each client's answers, RETRYs and counters equal those
// of process() alone with the same table.
core::SourceLimitConfig tight_limit() {
  core::SourceLimitConfig config;
  config.ids_per_s = 50'000;  // 50 a ms
  config.burst_ids = 300;
  config.entries = 64;
  for (std::size_t i = 0; i < config.seed.size(); ++i) config.seed[i] = 0x9e37'79b9'7f4a'7c15ULL * (i + 3);
  return config;
}

class PlainPathLimitTest : public PlainPathTest {
 protected:
  PlainPathLimitTest() : PlainPathTest(&limit_) {}
  static inline const core::SourceLimitConfig limit_ = tight_limit();
};

TEST_F(PlainPathLimitTest, ChargesEachClientsBucketLikeProcess) {
  const std::uint64_t seed = test_seed();
  std::printf("seed %llu (FLURRY_TEST_SEED replays it)\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int taken = 0, declined = 0;
  for (int i = 0; i < 5'000; ++i) {
    Request r;
    r.client_ip = 0x0a00'0001U + static_cast<std::uint32_t>(rng() % 4);  // four clients, 10.0.0.1-4
    r.client_port = static_cast<std::uint16_t>(1 + rng() % 60'000);
    r.request_id = rng();
    r.count = static_cast<std::uint32_t>(1 + rng() % 120);
    r.payload = proto::request_size_for_ids(r.count, 4096);
    r.udp_checksum = true;
    if (rng() % 20 == 0) burst_.now_unix_ms += 1 + rng() % 4;  // refills 50 IDs a ms
    if (rng() % 40 == 0) ++burst_.now_t;
    if (rng() % 500 == 0) burst_.ceiling_t = burst_.now_t - 1;  // the ceiling: refunds
    if (rng() % 100 == 0) burst_.ceiling_t = burst_.now_t + 1'000'000;
    const bool fast = compare(build(r), RxMeta{}, TxOffload{});
    (fast ? taken : declined) += 1;
    ASSERT_FALSE(HasFailure()) << "request " << i;
  }
  // Both ways were taken: the buckets ran dry (process() answered fewer IDs or RETRY) and refilled.
  EXPECT_GT(taken, 100);
  EXPECT_GT(declined, 100);
  EXPECT_GT(general_stats_.sources.limited.get() + general_stats_.sources.trimmed.get(), 100U);
}

}  // namespace
}  // namespace flurry::dataplane::frame
