// tests/core/handler_test.cc — core::Handler on byte buffers: answers decode and carry IDs of
// this node and core; every datagram is counted exactly once (one outcome, one reason); no
// answer exceeds proto::response_size_max of its request for any size and count; answering in
// place gives the same bytes; RETRY / FENCED / PING / INFO; and no heap allocation in handle()
// (global operator new is replaced below and counted around the calls).
// Random datagrams use a seed that is printed; FLURRY_TEST_SEED replays one.
#include <gtest/gtest.h>
#include <sodium.h>

#include "tests/support/seed.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/ceiling.h"
#include "core/handler.h"
#include "core/keys.h"
#include "proto/auth.h"
#include "proto/layout.h"
#include "proto/wire.h"

// ---- allocation counting: every global operator new of this program goes through here ----
namespace {
std::atomic<std::uint64_t> allocations{0};
void* volatile allocation_sink = nullptr;  // keeps the probe allocation from being elided

void* counted_alloc(std::size_t size, std::size_t alignment) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = nullptr;
  if (alignment <= alignof(std::max_align_t)) {
    p = std::malloc(size);
  } else if (posix_memalign(&p, alignment, size) != 0) {
    p = nullptr;
  }
  return p;
}
// Out of line, so that g++ does not pair an inlined free() with a new-expression and warn
// (-Wmismatched-new-delete) about what is, here, the matching deallocation.
[[gnu::noinline]] void counted_free(void* p) noexcept { std::free(p); }
}  // namespace

void* operator new(std::size_t size) {
  if (void* p = counted_alloc(size, 0)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  if (void* p = counted_alloc(size, 0)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  if (void* p = counted_alloc(size, static_cast<std::size_t>(alignment))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  if (void* p = counted_alloc(size, static_cast<std::size_t>(alignment))) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return counted_alloc(size, 0); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return counted_alloc(size, 0); }
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return counted_alloc(size, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return counted_alloc(size, static_cast<std::size_t>(alignment));
}
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { counted_free(p); }

namespace flurry::core {
namespace {

using proto::Opcode;
using proto::RequestError;
using proto::Status;

constexpr std::uint64_t t0 = 31'622'400'000ULL;  // 2025-01-01 in 1 ms units
constexpr std::uint32_t node_id = 77;
constexpr std::uint32_t core_index = 3;
constexpr std::uint32_t retry_hint_us = 777;

using flurry::testing::test_seed;

HandlerConfig test_config() {
  HandlerConfig config;
  config.layout.core_bits = 2;  // 4 workers: 1024 IDs per unit per core
  config.node_id = node_id;
  config.core = core_index;
  config.workers = 4;
  config.retry_hint_us = retry_hint_us;
  return config;
}

const Burst normal_burst{t0, t0 + 3000};

using Bytes = std::vector<std::uint8_t>;

Bytes request(Opcode opcode, std::uint32_t count, std::uint64_t request_id = 0x1234,
              std::size_t size = proto::request_header_size, std::uint16_t flags = 0) {
  proto::Request r;
  r.opcode = opcode;
  r.count = count;
  r.request_id = request_id;
  r.flags = flags;
  Bytes bytes(std::max(size, proto::request_header_size));
  EXPECT_EQ(proto::encode_request(r, bytes, size), bytes.size());
  return bytes;
}

// A datagram that decodes to `error`, with its request id at the usual place when there is one.
Bytes bad_datagram(RequestError error, std::uint64_t request_id = 0x1234) {
  Bytes bytes = request(Opcode::get_ids, 5, request_id);
  switch (error) {
    case RequestError::ok:
      break;
    case RequestError::too_short:
      bytes.resize(13);
      break;
    case RequestError::bad_magic:
      bytes[0] = 0x00;
      break;
    case RequestError::too_long:
      bytes.resize(proto::datagram_size_max + 1, 0);
      break;
    case RequestError::is_response:
      bytes[3] |= proto::opcode_response_bit;
      break;
    case RequestError::bad_version:
      bytes[2] = 9;
      break;
    case RequestError::bad_opcode:
      bytes[3] = 0x55;
      break;
    case RequestError::bad_flags:
      bytes[5] = 0x02;
      break;
    case RequestError::reserved_nonzero:
      bytes[7] = 0x01;
      break;
    case RequestError::count_zero:
      bytes = request(Opcode::get_ids, 0, request_id);
      break;
    case RequestError::count_too_large:
      bytes = request(Opcode::get_ids, proto::count_max + 1, request_id);
      break;
    case RequestError::trailing_bytes:
      bytes.push_back(0);
      bytes.push_back(0x40);
      break;
    case RequestError::count_unexpected:
      bytes = request(Opcode::info, 2, request_id);
      break;
    case RequestError::trailer_short:
      bytes[5] = 0x01;  // flag_auth on a bare header: no room for the trailer
      break;
    default:  // the other auth reasons come from the handler with keys (auth_test.cc)
      break;
    case RequestError::name_missing:
      bytes[3] = static_cast<std::uint8_t>(Opcode::get_seq);
      break;
    case RequestError::name_too_long:
      bytes[3] = static_cast<std::uint8_t>(Opcode::get_seq);
      bytes.push_back(proto::seq_name_size_max + 1);
      break;
    case RequestError::name_truncated:
      bytes[3] = static_cast<std::uint8_t>(Opcode::get_seq);
      bytes.push_back(3);
      bytes.push_back('a');
      break;
    case RequestError::name_bad:
      bytes[3] = static_cast<std::uint8_t>(Opcode::get_seq);
      bytes.push_back(1);
      bytes.push_back('/');
      break;
  }
  EXPECT_EQ(proto::decode_request(bytes).error, error) << proto::to_string(error);
  return bytes;
}

const RequestError every_error[] = {
    RequestError::too_short,       RequestError::bad_magic,        RequestError::too_long,
    RequestError::is_response,     RequestError::bad_version,      RequestError::bad_opcode,
    RequestError::bad_flags,       RequestError::reserved_nonzero, RequestError::count_zero,
    RequestError::count_too_large, RequestError::trailing_bytes,   RequestError::count_unexpected,
    RequestError::trailer_short,   RequestError::name_missing,     RequestError::name_too_long,
    RequestError::name_truncated,  RequestError::name_bad,
};

// Every datagram ends in exactly one of these.
constexpr Outcome terminal_outcomes[] = {
    Outcome::answered_ok,
    Outcome::answered_retry,
    Outcome::answered_fenced,
    Outcome::answered_bad_request,
    Outcome::answered_unauthorized,
    Outcome::dropped,
    Outcome::answered_unknown_sequence,
    Outcome::answered_not_owner,
};

struct Snapshot {
  std::array<std::uint64_t, outcome_count> outcomes{};
  std::array<std::uint64_t, proto::request_error_slots> errors{};
};

Snapshot snapshot(const WorkerStats& stats) {
  Snapshot s;
  for (std::size_t i = 0; i < outcome_count; ++i) s.outcomes[i] = stats.outcomes[i].get();
  for (std::size_t i = 0; i < proto::request_error_slots; ++i) s.errors[i] = stats.request_errors[i].get();
  return s;
}

// The one's-complement sum (RFC 1071) of `bytes` as big-endian 16-bit words (an odd last byte
// padded with zero), modulo 0xffff: written here, apart from proto's and frame.cc's sums.
std::uint64_t reference_ones_sum(const Bytes& bytes) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < bytes.size(); i += 2) {
    sum += std::uint64_t{bytes[i]} << 8 | (i + 1 < bytes.size() ? bytes[i + 1] : 0);
  }
  return sum % 0xffff;
}

// Every field decode_request fills (the name by its size: bytes past it are never read).
bool same_view(const proto::RequestView& a, const proto::RequestView& b) {
  return a.error == b.error && a.request.opcode == b.request.opcode && a.request.flags == b.request.flags &&
         a.request.count == b.request.count && a.request.request_id == b.request.request_id &&
         a.request.name.view() == b.request.name.view() && a.trailer.key_id == b.trailer.key_id &&
         a.trailer.timestamp_us == b.trailer.timestamp_us && a.trailer.mac == b.trailer.mac;
}

class HandlerTest : public ::testing::Test {
 protected:
  HandlerTest() : handler_(test_config(), stats_) { handler_.start_above(t0 - 1); }

  // Handles `in` into a separate, poisoned buffer; returns the answer.
  Bytes handle(const Bytes& in, const Burst& burst = normal_burst) {
    out_.fill(0xcd);
    const std::size_t size = handler_.handle(in, out_, burst);
    EXPECT_LE(size, proto::response_size_max(in.size()));
    return Bytes(out_.begin(), out_.begin() + static_cast<long>(size));
  }

  const proto::Layout layout_ = test_config().layout;
  WorkerStats stats_;
  Handler handler_;
  std::array<std::uint8_t, proto::datagram_size_max> out_{};
};

std::uint64_t ids_in(const proto::ResponseView& view) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < view.header.range_count; ++i) n += view.range(i).count;
  return n;
}

TEST_F(HandlerTest, GetIdsAnswersOkWithDecodableRanges) {
  const Bytes answer = handle(request(Opcode::get_ids, 2500, 0xabcdef));
  const proto::ResponseView view = proto::decode_response(answer);
  ASSERT_EQ(view.error, proto::ResponseError::ok);
  EXPECT_EQ(view.header.opcode, Opcode::get_ids);
  EXPECT_EQ(view.header.status, Status::ok);
  EXPECT_EQ(view.header.node, node_id);
  EXPECT_EQ(view.header.request_id, 0xabcdefu);
  EXPECT_EQ(view.header.detail, 0u);
  ASSERT_EQ(view.header.range_count, 3);  // 1024 + 1024 + 452
  EXPECT_EQ(ids_in(view), 2500u);
  std::uint64_t previous = 0;
  for (std::size_t i = 0; i < view.header.range_count; ++i) {
    const proto::Range range = view.range(i);
    for (std::uint32_t k = 0; k < range.count; ++k) {
      const proto::Decoded d = layout_.decode(range.first + k);
      ASSERT_EQ(d.node, node_id);
      ASSERT_EQ(d.core, core_index);
      ASSERT_GE(d.time, t0);
      ASSERT_LE(d.time, t0 + 3000);
      ASSERT_GT(range.first + k, previous);
      previous = range.first + k;
    }
  }
  EXPECT_EQ(layout_.decode(view.range(0).first).time, t0);
  EXPECT_EQ(layout_.decode(view.range(0).first).counter, 0u);
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 2500u);
  EXPECT_EQ(stats_.get(Outcome::answered_ok), 1u);
  EXPECT_EQ(stats_.get(Outcome::answered_partial), 0u);
  handler_.publish();
  EXPECT_EQ(stats_.last_t.load(), handler_.generator().last_t());
  EXPECT_EQ(stats_.last_t.load(), t0 + 2);
}

TEST_F(HandlerTest, ErrorsAreAnsweredOrDroppedAsDocumented) {
  for (RequestError error : every_error) {
    SCOPED_TRACE(proto::to_string(error));
    const Bytes answer = handle(bad_datagram(error, 0x5150));
    if (!proto::is_answered(error)) {
      EXPECT_TRUE(answer.empty());
      continue;
    }
    const proto::ResponseView view = proto::decode_response(answer);
    ASSERT_EQ(view.error, proto::ResponseError::ok);
    EXPECT_EQ(answer.size(), proto::response_header_size);
    EXPECT_EQ(view.header.request_id, 0x5150u);
    EXPECT_EQ(view.header.node, node_id);
    EXPECT_EQ(view.header.range_count, 0);
    EXPECT_EQ(view.header.detail, static_cast<std::uint32_t>(error));
    EXPECT_EQ(view.header.status, proto::is_auth_error(error) ? Status::unauthorized : Status::bad_request);
  }
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 0u);
}

// Each datagram moves rx by one, exactly one terminal outcome by one, and (for an error)
// exactly its own reason counter by one.
TEST_F(HandlerTest, EveryDatagramIsCountedExactlyOnce) {
  struct Case {
    const char* name;
    Bytes datagram;
    Burst burst;
    Outcome outcome;
    RequestError reason;
    bool partial;
  };
  std::vector<Case> cases = {
      {"get_ids", request(Opcode::get_ids, 10), normal_burst, Outcome::answered_ok, RequestError::ok, false},
      {"get_ids partial", request(Opcode::get_ids, 100000), normal_burst, Outcome::answered_ok,
       RequestError::ok, true},
      {"ping", request(Opcode::ping, 0), normal_burst, Outcome::answered_ok, RequestError::ok, false},
      {"info", request(Opcode::info, 0), normal_burst, Outcome::answered_ok, RequestError::ok, false},
      {"retry", request(Opcode::get_ids, 10), Burst{t0, 0}, Outcome::answered_retry, RequestError::ok, false},
      {"fenced", request(Opcode::get_ids, 10), Burst{t0, ceiling_fenced}, Outcome::answered_fenced,
       RequestError::ok, false},
      {"ping fenced", request(Opcode::ping, 0), Burst{t0, ceiling_fenced}, Outcome::answered_ok,
       RequestError::ok, false},
  };
  for (RequestError error : every_error) {
    Outcome outcome = Outcome::answered_bad_request;
    if (!proto::is_answered(error)) outcome = Outcome::dropped;
    if (proto::is_auth_error(error)) outcome = Outcome::answered_unauthorized;
    cases.push_back(
        {proto::to_string(error).data(), bad_datagram(error), normal_burst, outcome, error, false});
  }
  for (int repeat = 0; repeat < 3; ++repeat) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      const Snapshot before = snapshot(stats_);
      handle(c.datagram, c.burst);
      const Snapshot after = snapshot(stats_);
      EXPECT_EQ(after.outcomes[static_cast<std::size_t>(Outcome::rx_datagrams)],
                before.outcomes[static_cast<std::size_t>(Outcome::rx_datagrams)] + 1);
      for (Outcome o : terminal_outcomes) {
        const auto i = static_cast<std::size_t>(o);
        EXPECT_EQ(after.outcomes[i] - before.outcomes[i], o == c.outcome ? 1u : 0u) << to_string(o);
      }
      const auto partial = static_cast<std::size_t>(Outcome::answered_partial);
      EXPECT_EQ(after.outcomes[partial] - before.outcomes[partial], c.partial ? 1u : 0u);
      for (std::size_t r = 0; r < proto::request_error_slots; ++r) {
        const bool expected = c.reason != RequestError::ok && r == static_cast<std::size_t>(c.reason);
        EXPECT_EQ(after.errors[r] - before.errors[r], expected ? 1u : 0u) << "reason slot " << r;
      }
    }
  }
  // Per opcode: get_ids 4 cases (incl. retry, fenced) x 3, ping 2 x 3, info 1 x 3.
  EXPECT_EQ(stats_.get(Outcome::requests_get_ids), 12u);
  EXPECT_EQ(stats_.get(Outcome::requests_ping), 6u);
  EXPECT_EQ(stats_.get(Outcome::requests_info), 3u);
  std::uint64_t terminal = 0;
  for (Outcome o : terminal_outcomes) terminal += stats_.get(o);
  EXPECT_EQ(terminal, stats_.get(Outcome::rx_datagrams));
  EXPECT_EQ(stats_.get(Outcome::rx_datagrams), 3u * cases.size());
}

TEST_F(HandlerTest, RandomDatagramsAreCountedExactlyOnce) {
  const std::uint64_t seed = test_seed();
  std::cout << "seed " << seed << " (replay: FLURRY_TEST_SEED=" << seed << ")\n";
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uint64_t errors_total = 0;
  std::uint64_t sums_known = 0;
  proto::RequestView reused;
  for (int i = 0; i < 20000; ++i) {
    Bytes datagram = request(static_cast<Opcode>(1 + rng() % 3), static_cast<std::uint32_t>(rng() % 3000),
                             rng(), proto::request_header_size + rng() % 100);
    // Flip a few random bytes (or none).
    for (std::uint64_t flips = rng() % 3; flips > 0; --flips) {
      datagram[rng() % datagram.size()] = static_cast<std::uint8_t>(rng());
    }
    if (rng() % 8 == 0) datagram.resize(rng() % datagram.size());
    const Burst burst{t0 + i / 16, rng() % 16 == 0 ? 0 : t0 + 3000 + i / 16};
    const Snapshot before = snapshot(stats_);
    const Bytes answer = handle(datagram, burst);
    const Snapshot after = snapshot(stats_);
    std::uint64_t moved = 0;
    for (Outcome o : terminal_outcomes)
      moved += after.outcomes[static_cast<std::size_t>(o)] - before.outcomes[static_cast<std::size_t>(o)];
    ASSERT_EQ(moved, 1u) << "datagram " << i;
    std::uint64_t reasons = 0;
    for (std::size_t r = 0; r < proto::request_error_slots; ++r)
      reasons += after.errors[r] - before.errors[r];
    const proto::RequestView decoded = proto::decode_request(datagram);
    // This handler runs with --auth off: a well-formed signed request is auth_unsupported.
    const bool signed_ok =
        decoded.error == RequestError::ok && (decoded.request.flags & proto::flag_auth) != 0;
    const RequestError error = signed_ok ? RequestError::auth_unsupported : decoded.error;
    ASSERT_EQ(reasons, error == RequestError::ok ? 0u : 1u);
    ASSERT_EQ(after.errors[static_cast<std::size_t>(error)] - before.errors[static_cast<std::size_t>(error)],
              error == RequestError::ok ? 0u : 1u);
    errors_total += reasons;
    // A view decoded into again and again (the handler's own) holds what a fresh decode holds.
    proto::decode_request(datagram, reused);
    ASSERT_TRUE(same_view(reused, decoded)) << "datagram " << i;
    // Where the handler knows the answer's checksum sum, it is the sum of the answer's bytes.
    if (const std::optional<std::uint64_t> sum = handler_.answer_sum()) {
      ASSERT_FALSE(answer.empty());
      ASSERT_EQ(*sum % 0xffff, reference_ones_sum(answer)) << "datagram " << i;
      ++sums_known;
    }
    // Every answer is a well-formed response to this request.
    if (!answer.empty()) {
      const proto::ResponseView view = proto::decode_response(answer);
      ASSERT_EQ(view.error, proto::ResponseError::ok) << "datagram " << i;
      ASSERT_EQ(view.header.request_id, proto::decode_request(datagram).request.request_id);
    } else {
      ASSERT_FALSE(proto::is_answered(error));
      ASSERT_NE(error, RequestError::ok);
    }
  }
  std::uint64_t terminal = 0;
  for (Outcome o : terminal_outcomes) terminal += stats_.get(o);
  EXPECT_EQ(terminal, stats_.get(Outcome::rx_datagrams));
  EXPECT_GT(errors_total, 1000u) << "the mutations should produce errors";
  EXPECT_GT(stats_.get(Outcome::ids_issued), 1000u) << "and valid requests";
  EXPECT_GT(sums_known, 1000u) << "OK answers carry their checksum sum";
}

// The anti-amplification bound for every request size and a spread of counts. The ceiling is
// far, so an answer with fewer IDs than asked must have used every range it was allowed.
TEST_F(HandlerTest, AnswerNeverExceedsResponseSizeMax) {
  const Burst far{t0, t0 + 100'000'000};
  const std::uint32_t capacity = layout_.counter_capacity();
  const std::uint32_t counts[] = {
      1,      2,       capacity - 1,         capacity,        capacity + 1, 3 * capacity,
      10'000, 123'457, proto::count_max - 1, proto::count_max};
  std::uint64_t partial = 0;
  for (std::size_t size = proto::request_header_size; size <= proto::datagram_size_max; ++size) {
    for (std::uint32_t count : counts) {
      const Bytes in = request(Opcode::get_ids, count, size * 1000 + count, size);
      const Bytes answer = handle(in, far);
      ASSERT_LE(answer.size(), proto::response_size_max(size)) << "size " << size << " count " << count;
      ASSERT_LE(answer.size(), proto::amplification_max * size);
      const proto::ResponseView view = proto::decode_response(answer);
      ASSERT_EQ(view.error, proto::ResponseError::ok);
      ASSERT_EQ(view.header.status, Status::ok);
      ASSERT_LE(view.header.range_count, proto::ranges_max(size));
      const std::uint64_t ids = ids_in(view);
      ASSERT_LE(ids, count);
      ASSERT_GE(ids, 1u);
      if (ids < count) {
        ASSERT_EQ(view.header.range_count, proto::ranges_max(size)) << "size " << size << " count " << count;
        ++partial;
      }
    }
    // PING, INFO and every error answer are bounded too.
    for (Opcode opcode : {Opcode::ping, Opcode::info}) {
      ASSERT_LE(handle(request(opcode, 0, 1, size), far).size(), proto::response_size_max(size));
    }
    Bytes bad = request(Opcode::get_ids, 0, 1, size);
    ASSERT_LE(handle(bad, far).size(), proto::response_size_max(size));
  }
  EXPECT_GT(partial, 0u);
  EXPECT_EQ(stats_.get(Outcome::answered_partial), partial);
}

// In the DPDK backend the answer is written over the request; it must not matter.
TEST(HandlerInPlaceTest, SameBytesAsSeparateBuffers) {
  const std::uint64_t seed = test_seed();
  std::cout << "seed " << seed << " (replay: FLURRY_TEST_SEED=" << seed << ")\n";
  std::mt19937_64 rng(seed);
  WorkerStats stats_a;
  WorkerStats stats_b;
  Handler separate(test_config(), stats_a);
  Handler in_place(test_config(), stats_b);
  separate.start_above(t0 - 1);
  in_place.start_above(t0 - 1);

  std::vector<Bytes> datagrams;
  for (std::size_t size : {20u, 21u, 27u, 100u, 491u, 1472u}) {
    for (std::uint32_t count : {1u, 1000u, 5000u, 200000u}) {
      datagrams.push_back(request(Opcode::get_ids, count, rng(), size));
    }
    datagrams.push_back(request(Opcode::ping, 0, rng(), size));
    datagrams.push_back(request(Opcode::info, 0, rng(), size));
  }
  for (RequestError error : every_error) {
    if (error != RequestError::too_long) datagrams.push_back(bad_datagram(error, rng()));
  }
  for (int i = 0; i < 200; ++i) {
    Bytes d =
        request(Opcode::get_ids, 1 + static_cast<std::uint32_t>(rng() % 50000), rng(), 20 + rng() % 500);
    if (rng() % 2) d[rng() % 20] = static_cast<std::uint8_t>(rng());
    datagrams.push_back(d);
  }
  for (const Burst burst : {normal_burst, Burst{t0, 0}, Burst{t0, ceiling_fenced}, Burst{t0 + 7, t0 + 9}}) {
    for (const Bytes& d : datagrams) {
      std::array<std::uint8_t, proto::datagram_size_max> out{};
      out.fill(0xee);
      const std::size_t size_a = separate.handle(d, out, burst);
      std::array<std::uint8_t, proto::datagram_size_max> buffer{};
      buffer.fill(0xee);
      std::copy(d.begin(), d.end(), buffer.begin());
      const std::size_t size_b =
          in_place.handle(std::span<const std::uint8_t>(buffer.data(), d.size()), buffer, burst);
      ASSERT_EQ(size_a, size_b);
      ASSERT_TRUE(std::equal(out.begin(), out.begin() + static_cast<long>(size_a), buffer.begin()))
          << "in-place answer differs for a datagram of " << d.size() << " bytes";
    }
  }
  for (std::size_t i = 0; i < outcome_count; ++i) {
    EXPECT_EQ(stats_a.outcomes[i].get(), stats_b.outcomes[i].get()) << to_string(static_cast<Outcome>(i));
  }
}

TEST_F(HandlerTest, CeilingZeroAnswersRetryWithTheHint) {
  const Bytes answer = handle(request(Opcode::get_ids, 5, 99), Burst{t0, 0});
  const proto::ResponseView view = proto::decode_response(answer);
  ASSERT_EQ(view.error, proto::ResponseError::ok);
  EXPECT_EQ(view.header.status, Status::retry);
  EXPECT_EQ(view.header.detail, retry_hint_us);
  EXPECT_EQ(view.header.range_count, 0);
  EXPECT_EQ(view.header.request_id, 99u);
  EXPECT_EQ(answer.size(), proto::response_header_size);
  EXPECT_EQ(stats_.get(Outcome::answered_retry), 1u);
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 0u);
  // A clock ahead of the ceiling is the same: nothing issued, nothing consumed.
  EXPECT_EQ(proto::decode_response(handle(request(Opcode::get_ids, 5), Burst{t0 + 10, t0 + 5})).header.status,
            Status::retry);
  EXPECT_EQ(handler_.generator().last_t(), t0 - 1);
}

TEST_F(HandlerTest, FencedCeilingAnswersFenced) {
  const Bytes answer = handle(request(Opcode::get_ids, 5, 42), Burst{t0, ceiling_fenced});
  const proto::ResponseView view = proto::decode_response(answer);
  ASSERT_EQ(view.error, proto::ResponseError::ok);
  EXPECT_EQ(view.header.status, Status::fenced);
  EXPECT_EQ(view.header.detail, 0u);
  EXPECT_EQ(view.header.range_count, 0);
  EXPECT_EQ(view.header.request_id, 42u);
  EXPECT_EQ(stats_.get(Outcome::answered_fenced), 1u);
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 0u);
  EXPECT_EQ(handler_.generator().last_t(), t0 - 1);
}

TEST_F(HandlerTest, PingAndInfo) {
  Bytes answer = handle(request(Opcode::ping, 0, 7));
  proto::ResponseView view = proto::decode_response(answer);
  ASSERT_EQ(view.error, proto::ResponseError::ok);
  EXPECT_EQ(view.header.opcode, Opcode::ping);
  EXPECT_EQ(view.header.status, Status::ok);
  EXPECT_EQ(view.header.request_id, 7u);
  EXPECT_EQ(view.header.node, node_id);
  EXPECT_EQ(answer.size(), proto::response_header_size);

  answer = handle(request(Opcode::info, 0, 8));
  view = proto::decode_response(answer);
  ASSERT_EQ(view.error, proto::ResponseError::ok);
  EXPECT_EQ(view.header.opcode, Opcode::info);
  EXPECT_EQ(view.header.status, Status::ok);
  EXPECT_EQ(view.header.request_id, 8u);
  ASSERT_EQ(answer.size(), proto::response_header_size + proto::info_body_size);
  const proto::Info info = view.info();
  EXPECT_EQ(info.epoch_ms, 1'704'067'200'000ULL);
  EXPECT_EQ(info.time_unit_ms, 1);
  EXPECT_EQ(info.time_bits, 41);
  EXPECT_EQ(info.node_bits, 10);
  EXPECT_EQ(info.sequence_bits, 12);
  EXPECT_EQ(info.core_bits, 2);
  EXPECT_EQ(info.core_from, 0);
  EXPECT_EQ(info.workers, 4);
  EXPECT_EQ(stats_.get(Outcome::requests_ping), 1u);
  EXPECT_EQ(stats_.get(Outcome::requests_info), 1u);
  EXPECT_EQ(stats_.get(Outcome::ids_issued), 0u);
}

TEST(HandlerInfoTest, WorkersAreCappedAt255) {
  HandlerConfig config = test_config();
  config.layout.core_bits = 9;
  config.workers = 300;
  WorkerStats stats;
  Handler handler(config, stats);
  std::array<std::uint8_t, proto::datagram_size_max> out{};
  const Bytes in = request(Opcode::info, 0);
  ASSERT_EQ(handler.handle(in, out, normal_burst), proto::response_header_size + proto::info_body_size);
  const proto::ResponseView view = proto::decode_response(std::span<const std::uint8_t>(out.data(), 36));
  ASSERT_EQ(view.error, proto::ResponseError::ok);
  EXPECT_EQ(view.info().workers, 255);
  EXPECT_EQ(view.info().core_bits, 9);
}

// Many answers across moving clocks: never a duplicate, never above the ceiling of the burst.
TEST_F(HandlerTest, AnswersNeverRepeatAndNeverPassTheCeiling) {
  std::unordered_set<std::uint64_t> seen;
  std::uint64_t now = t0;
  for (int i = 0; i < 3000; ++i) {
    if (i % 7 == 0) now -= 3;  // the clock steps back now and then
    now += 1;
    const Burst burst{now, now + 20};
    const Bytes answer = handle(request(Opcode::get_ids, 900, static_cast<std::uint64_t>(i), 60), burst);
    const proto::ResponseView view = proto::decode_response(answer);
    ASSERT_EQ(view.error, proto::ResponseError::ok);
    if (view.header.status == Status::retry) continue;
    ASSERT_EQ(view.header.status, Status::ok);
    for (std::size_t r = 0; r < view.header.range_count; ++r) {
      const proto::Range range = view.range(r);
      ASSERT_LE(layout_.decode(range.first).time, burst.ceiling_t);
      for (std::uint32_t k = 0; k < range.count; ++k) ASSERT_TRUE(seen.insert(range.first + k).second);
    }
  }
  EXPECT_EQ(seen.size(), stats_.get(Outcome::ids_issued));
  EXPECT_GT(stats_.get(Outcome::answered_retry), 0u) << "the schedule should hit the ceiling";
}

TEST_F(HandlerTest, HandleNeverAllocates) {
  std::vector<Bytes> datagrams;
  for (std::size_t size : {20u, 64u, 491u, 1472u}) {
    datagrams.push_back(request(Opcode::get_ids, 100000, 1, size));
    datagrams.push_back(request(Opcode::get_ids, 3, 2, size));
    datagrams.push_back(request(Opcode::ping, 0, 3, size));
    datagrams.push_back(request(Opcode::info, 0, 4, size));
  }
  for (RequestError error : every_error) datagrams.push_back(bad_datagram(error));
  const Burst bursts[] = {normal_burst, Burst{t0, 0}, Burst{t0, ceiling_fenced}};
  // Sanity: the counter does see allocations.
  const std::uint64_t probe = allocations.load();
  allocation_sink = ::operator new(16);
  EXPECT_GT(allocations.load(), probe) << "operator new is not replaced; the test would be vacuous";
  ::operator delete(allocation_sink);

  const std::uint64_t before = allocations.load();
  std::size_t answered = 0;
  for (int round = 0; round < 200; ++round) {
    for (const Burst& burst : bursts) {
      for (const Bytes& d : datagrams) {
        answered += handler_.handle(d, out_,
                                    Burst{burst.now_t + static_cast<std::uint64_t>(round),
                                          burst.ceiling_t == 0 || burst.ceiling_t == ceiling_fenced
                                              ? burst.ceiling_t
                                              : burst.ceiling_t + 1000 * static_cast<std::uint64_t>(round)})
                        ? 1
                        : 0;
      }
    }
    handler_.publish();
  }
  const std::uint64_t after = allocations.load();
  EXPECT_EQ(after - before, 0u) << "handle() allocated";
  EXPECT_GT(answered, 1000u);
}

// One view decoded into again and again holds what a fresh decode holds, across the fields
// only some requests set: a long GET_SEQ name, then a shorter one, a signed request's trailer,
// then requests without either, and failures in between.
TEST(DecodeIntoTest, AReusedViewEqualsAFreshDecode) {
  ASSERT_GE(sodium_init(), 0);
  const auto seq = [](std::string_view name, std::uint64_t id) {
    proto::Request r;
    r.opcode = Opcode::get_seq;
    r.count = 5;
    r.request_id = id;
    std::copy(name.begin(), name.end(), r.name.bytes.begin());
    r.name.size = static_cast<std::uint8_t>(name.size());
    Bytes bytes(proto::request_header_size + proto::request_body_size(r));
    EXPECT_EQ(proto::encode_request(r, bytes, bytes.size()), bytes.size());
    return bytes;
  };
  proto::Request get;
  get.opcode = Opcode::get_ids;
  get.count = 3;
  get.request_id = 77;
  Bytes signed_get(64);
  proto::MacKey secret{};
  secret.fill(0x5a);
  proto::encode_signed_request(get, signed_get, signed_get.size(), 9, node_id, 1'735'689'600'000'000, secret,
                               crypto_shorthash);
  Bytes bad_name = seq("abc", 3);
  bad_name[proto::request_header_size + 1] = '/';  // not a name byte
  const std::vector<Bytes> sequence = {
      seq(std::string(proto::seq_name_size_max, 'x'), 1),
      seq("ab", 2),
      signed_get,
      request(Opcode::get_ids, 1, 4),
      bad_name,
      seq("orders", 5),
      request(Opcode::ping, 0, 6),
      Bytes{0x46, 0x4c},
      signed_get,
      seq("z", 7),
  };
  proto::RequestView reused;
  for (std::size_t i = 0; i < sequence.size(); ++i) {
    proto::decode_request(sequence[i], reused);
    ASSERT_TRUE(same_view(reused, proto::decode_request(sequence[i]))) << "datagram " << i;
  }
  EXPECT_EQ(proto::decode_request(signed_get).error, RequestError::ok);
  EXPECT_EQ(proto::decode_request(bad_name).error, RequestError::name_bad);
  EXPECT_EQ(reused.request.name.view(), "z");
}

// A handler under `mode` with one key (id 7, GET_IDS only, `rate_per_s` 0: unlimited), its
// replay filter and stats, started at t0.
constexpr std::uint64_t keyed_now_ms = 1'735'689'600'000;
struct KeyedHandler {
  explicit KeyedHandler(AuthMode mode, std::uint32_t rate_per_s = 0)
      : key(make_key(rate_per_s)), keys({key}), handler(config(mode), stats) {
    handler.start_above(t0 - 1);
  }
  static Key make_key(std::uint32_t rate_per_s) {
    Key k;
    k.id = 7;
    k.opcodes = 1U << 1;
    k.rate_per_s = rate_per_s;
    return k;
  }
  HandlerConfig config(AuthMode mode) {
    HandlerConfig c = test_config();
    c.auth = AuthConfig{mode, 5000, crypto_shorthash, &replay};
    return c;
  }
  ReplayFilter replay{1 << 16};
  Key key;
  KeyTable keys;
  WorkerStats stats;
  Handler handler;
};

// The checksum sum is offered only where it covers the whole answer: unsigned OK answers with
// ranges; a signed answer ends with a MAC the sum does not cover, and the rest are summed from
// their bytes by the sender.
TEST(HandlerAuthTest, AnswerSumOnlyForUnsignedRanges) {
  ASSERT_GE(sodium_init(), 0);
  KeyedHandler keyed(AuthMode::optional);
  Handler& handler = keyed.handler;
  const Key& key = keyed.key;
  const Burst burst{t0, t0 + 3000, keyed_now_ms, &keyed.keys};
  std::array<std::uint8_t, proto::datagram_size_max> out{};
  const auto answer = [&](const Bytes& in) {
    const std::size_t size = handler.handle(in, out, burst);
    return Bytes(out.begin(), out.begin() + static_cast<long>(size));
  };

  const Bytes unsigned_ok = answer(request(Opcode::get_ids, 3, 1));
  ASSERT_EQ(proto::decode_response(unsigned_ok).header.status, Status::ok);
  ASSERT_TRUE(handler.answer_sum().has_value());
  EXPECT_EQ(*handler.answer_sum() % 0xffff, reference_ones_sum(unsigned_ok));

  proto::Request r;
  r.opcode = Opcode::get_ids;
  r.count = 3;
  r.request_id = 2;
  Bytes signed_request(44);
  proto::encode_signed_request(r, signed_request, signed_request.size(), key.id, node_id, keyed_now_ms * 1000,
                               key.secret, crypto_shorthash);
  const Bytes signed_ok = answer(signed_request);
  ASSERT_EQ(proto::decode_response(signed_ok).header.status, Status::ok);
  const std::size_t ranges = signed_ok[5];  // the header's range count
  ASSERT_EQ(signed_ok.size(),
            proto::response_header_size + ranges * proto::range_size + proto::answer_mac_size);
  EXPECT_FALSE(handler.answer_sum().has_value()) << "a signed answer's MAC is not in the sum";

  EXPECT_FALSE(answer(request(Opcode::ping, 0, 3)).empty());
  EXPECT_FALSE(handler.answer_sum().has_value()) << "PING";
  EXPECT_FALSE(answer(request(Opcode::info, 0, 4)).empty());
  EXPECT_FALSE(handler.answer_sum().has_value()) << "INFO";
  EXPECT_FALSE(answer(request(Opcode::get_ids, 0, 5)).empty());  // count_zero: BAD_REQUEST
  EXPECT_FALSE(handler.answer_sum().has_value()) << "BAD_REQUEST";
  EXPECT_FALSE(answer(request(Opcode::get_ids, 1, 6)).empty());
  EXPECT_TRUE(handler.answer_sum().has_value()) << "known again for the next unsigned OK";
}

// The signed path too (--auth required): key lookup, MAC, window, server, replay table,
// permission, token bucket, answer MAC — served, replayed, stale, bad MAC, unknown key, another
// server, not permitted.
TEST(HandlerAuthTest, SignedHandleNeverAllocates) {
  ASSERT_GE(sodium_init(), 0);
  KeyedHandler keyed(AuthMode::required, 1000);
  Handler& handler = keyed.handler;
  const Key& key = keyed.key;
  const KeyTable& keys = keyed.keys;
  const WorkerStats& stats = keyed.stats;
  constexpr std::uint64_t now_ms = keyed_now_ms;
  std::vector<Bytes> datagrams;
  for (std::uint64_t i = 0; i < 400; ++i) {
    proto::Request r;
    r.opcode = i % 5 == 0 ? Opcode::info : Opcode::get_ids;  // INFO: not permitted
    r.count = r.opcode == Opcode::info ? 0 : 3;
    r.request_id = i;
    Bytes bytes(44 + i % 3 * 100);
    const std::uint64_t stamp_ms = i % 7 == 0 ? now_ms - 60'000 : now_ms;  // some stale
    const std::uint32_t server = i % 17 == 0 ? node_id + 1 : node_id;      // some for another node
    proto::encode_signed_request(r, bytes, bytes.size(), i % 11 == 0 ? 9 : 7, server, stamp_ms * 1000,
                                 key.secret, crypto_shorthash);
    if (i % 13 == 0) bytes[12] ^= 1;  // bad MAC (the request id changed after signing)
    datagrams.push_back(bytes);
  }
  datagrams.push_back(datagrams[1]);  // a replay
  std::array<std::uint8_t, proto::datagram_size_max> out{};
  const std::uint64_t before = allocations.load();
  std::size_t answered = 0;
  for (const Bytes& d : datagrams)
    answered += handler.handle(d, out, Burst{t0, t0 + 3000, now_ms, &keys}) ? 1 : 0;
  EXPECT_EQ(allocations.load() - before, 0u) << "the signed path allocated";
  EXPECT_GT(stats.get(Outcome::ids_issued), 100u);
  for (RequestError error : {RequestError::stale_timestamp, RequestError::bad_mac, RequestError::unknown_key,
                             RequestError::wrong_server, RequestError::not_permitted, RequestError::replay}) {
    EXPECT_GT(stats.request_errors[static_cast<std::size_t>(error)].get(), 0u) << proto::to_string(error);
  }
  EXPECT_GT(answered, 200u);
}

}  // namespace
}  // namespace flurry::core
