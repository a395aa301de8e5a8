// tests/proto/parser_test.cc — decode_request and decode_response under hostile input
// (CONTRIBUTING.md, untrusted input): every truncation length, random trailing bytes, every
// version, opcode and flag
// byte, count bounds, oversize datagrams, and the size rules of anti-amplification. Each bad
// input must be rejected with its own reason and nothing may crash (run under ASan+UBSan too).
//
// Random cases use a seeded generator; the seed is printed and FLURRY_TEST_SEED replays it.
#include <gtest/gtest.h>

#include "tests/support/seed.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "proto/wire.h"

namespace flurry::proto {
namespace {

using flurry::testing::test_seed;

class SeededTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::cout << "seed " << test_seed() << " (replay: FLURRY_TEST_SEED=" << test_seed() << ")\n";
    RecordProperty("seed", std::to_string(test_seed()));
    rng_.seed(test_seed());
  }
  std::mt19937_64 rng_;
};

// Hand-built header (independent of encode_request), big-endian.
std::vector<std::uint8_t> header(std::uint8_t opcode, std::uint32_t count,
                                 std::uint64_t request_id = 0x0102030405060708ULL, std::uint16_t flags = 0,
                                 std::uint16_t reserved = 0, std::uint8_t version = 1,
                                 std::uint16_t magic = 0x464c) {
  std::vector<std::uint8_t> b = {static_cast<std::uint8_t>(magic >> 8),
                                 static_cast<std::uint8_t>(magic & 0xff),
                                 version,
                                 opcode,
                                 static_cast<std::uint8_t>(flags >> 8),
                                 static_cast<std::uint8_t>(flags & 0xff),
                                 static_cast<std::uint8_t>(reserved >> 8),
                                 static_cast<std::uint8_t>(reserved & 0xff)};
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<std::uint8_t>(count >> shift));
  for (int shift = 56; shift >= 0; shift -= 8) {
    b.push_back(static_cast<std::uint8_t>(request_id >> shift));
  }
  return b;
}

std::vector<std::uint8_t> padded(std::vector<std::uint8_t> bytes, std::size_t size) {
  bytes.resize(size, 0);
  return bytes;
}

RequestError decode_error(const std::vector<std::uint8_t>& bytes) { return decode_request(bytes).error; }

// ---- requests ----

TEST(RequestParserTest, ValidRequestsDecode) {
  for (auto [opcode, count] : {std::pair<std::uint8_t, std::uint32_t>{1, 5}, {2, 0}, {3, 0}}) {
    const RequestView view = decode_request(header(opcode, count, 0xfedcba9876543210ULL));
    ASSERT_EQ(view.error, RequestError::ok) << to_string(view.error);
    EXPECT_EQ(static_cast<std::uint8_t>(view.request.opcode), opcode);
    EXPECT_EQ(view.request.count, count);
    EXPECT_EQ(view.request.flags, 0);
    EXPECT_EQ(view.request.request_id, 0xfedcba9876543210ULL);
  }
}

TEST(RequestParserTest, EveryTruncationIsTooShort) {
  for (auto [opcode, count] : {std::pair<std::uint8_t, std::uint32_t>{1, 5}, {2, 0}, {3, 0}}) {
    const std::vector<std::uint8_t> full = header(opcode, count);
    for (std::size_t size = 0; size < full.size(); ++size) {
      // A copy of exactly `size` bytes, so ASan catches any read beyond it.
      const std::vector<std::uint8_t> cut(full.begin(), full.begin() + static_cast<long>(size));
      EXPECT_EQ(decode_error(cut), RequestError::too_short) << "size " << size;
    }
  }
  // A padded request cut inside its padding is still a valid (less padded) request; cut inside
  // the header it is too short.
  const std::vector<std::uint8_t> full = padded(header(1, 5), 100);
  for (std::size_t size = 0; size < full.size(); ++size) {
    const std::vector<std::uint8_t> cut(full.begin(), full.begin() + static_cast<long>(size));
    EXPECT_EQ(decode_error(cut), size < request_header_size ? RequestError::too_short : RequestError::ok)
        << "size " << size;
  }
}

TEST(RequestParserTest, NullSpanIsTooShort) {
  EXPECT_EQ(decode_request(std::span<const std::uint8_t>()).error, RequestError::too_short);
}

TEST_F(SeededTest, RandomTrailingBytesAreRejected) {
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::uint8_t> bytes = header(1, 1 + static_cast<std::uint32_t>(rng_() % count_max), rng_());
    const std::size_t trailer = 1 + rng_() % (datagram_size_max - request_header_size);
    for (std::size_t j = 0; j < trailer; ++j) {
      bytes.push_back(static_cast<std::uint8_t>(rng_() % 4 == 0 ? rng_() : 0));
    }
    // At least one nonzero byte, anywhere in the trailer.
    const std::size_t at = request_header_size + rng_() % trailer;
    bytes[at] = static_cast<std::uint8_t>(1 + rng_() % 255);
    const RequestView view = decode_request(bytes);
    ASSERT_EQ(view.error, RequestError::trailing_bytes)
        << "size " << bytes.size() << " nonzero at " << at << ": " << to_string(view.error);
    EXPECT_TRUE(is_answered(view.error));
  }
}

// Padding is checked a word at a time, then byte by byte: one nonzero byte is found wherever
// it sits, for every padding length around the word size.
TEST(RequestParserTest, OneNonzeroPaddingByteAnywhere) {
  const std::vector<std::uint8_t> base = header(1, 7);
  for (std::size_t size = request_header_size + 1; size <= request_header_size + 40; ++size) {
    for (std::size_t at = request_header_size; at < size; ++at) {
      std::vector<std::uint8_t> bytes = padded(base, size);
      bytes[at] = 0x80;
      ASSERT_EQ(decode_request(bytes).error, RequestError::trailing_bytes) << "size " << size << " at " << at;
    }
  }
}

TEST(RequestParserTest, ZeroPaddingUpToTheDatagramLimit) {
  const std::vector<std::uint8_t> base = header(1, 7);
  for (std::size_t size = request_header_size; size <= datagram_size_max; ++size) {
    const RequestView view = decode_request(padded(base, size));
    ASSERT_EQ(view.error, RequestError::ok) << "size " << size;
    ASSERT_EQ(view.request.count, 7u);
  }
  for (std::size_t size = datagram_size_max + 1; size <= datagram_size_max + 600; ++size) {
    ASSERT_EQ(decode_error(padded(base, size)), RequestError::too_long) << "size " << size;
  }
  EXPECT_EQ(decode_error(padded(base, 65507)), RequestError::too_long);  // largest UDP payload
  EXPECT_FALSE(is_answered(RequestError::too_long));
  // A long datagram that is not ours is not ours first.
  EXPECT_EQ(decode_error(padded(header(1, 7, 1, 0, 0, 1, 0x1234), 2000)), RequestError::bad_magic);
}

TEST(RequestParserTest, EveryWrongMagic) {
  for (std::uint32_t magic = 0; magic <= 0xffff; ++magic) {
    if (magic == wire_magic) continue;
    ASSERT_EQ(decode_error(header(1, 5, 1, 0, 0, 1, static_cast<std::uint16_t>(magic))),
              RequestError::bad_magic)
        << "magic " << magic;
  }
  EXPECT_FALSE(is_answered(RequestError::bad_magic));
}

TEST(RequestParserTest, EveryVersionButOneIsBadVersion) {
  for (unsigned version = 0; version <= 255; ++version) {
    const RequestView view =
        decode_request(header(1, 5, 0xabcdef0123456789ULL, 0, 0, static_cast<std::uint8_t>(version)));
    if (version == wire_version) {
      EXPECT_EQ(view.error, RequestError::ok);
      continue;
    }
    ASSERT_EQ(view.error, RequestError::bad_version) << "version " << version;
    EXPECT_TRUE(is_answered(view.error));
    EXPECT_EQ(view.request.request_id, 0xabcdef0123456789ULL);  // echoed in the answer
    EXPECT_EQ(view.request.opcode, Opcode::get_ids);
  }
}

TEST(RequestParserTest, EveryOpcodeByte) {
  for (unsigned opcode = 0; opcode <= 255; ++opcode) {
    const std::uint32_t count = opcode == 1 ? 5 : 0;
    const RequestView view = decode_request(header(static_cast<std::uint8_t>(opcode), count, 42));
    if (opcode == 4) {  // GET_SEQ: the header alone lacks the name
      EXPECT_EQ(view.error, RequestError::name_missing) << "opcode " << opcode;
    } else if (opcode >= 1 && opcode <= 3) {
      EXPECT_EQ(view.error, RequestError::ok) << "opcode " << opcode;
      EXPECT_EQ(static_cast<unsigned>(view.request.opcode), opcode);
    } else if (opcode & opcode_response_bit) {
      EXPECT_EQ(view.error, RequestError::is_response) << "opcode " << opcode;
      EXPECT_FALSE(is_answered(view.error));
    } else {
      EXPECT_EQ(view.error, RequestError::bad_opcode) << "opcode " << opcode;
      EXPECT_EQ(static_cast<unsigned>(view.request.opcode), opcode);  // echoed as it came
      EXPECT_EQ(view.request.request_id, 42u);
    }
  }
}

TEST(RequestParserTest, EveryFlagBit) {
  for (unsigned bit = 0; bit < 16; ++bit) {
    const auto flags = static_cast<std::uint16_t>(1U << bit);
    const RequestError error = decode_error(header(1, 5, 1, flags));
    if (flags == flag_auth) {
      EXPECT_EQ(error, RequestError::trailer_short);  // a bare header has no room for the trailer
    } else {
      EXPECT_EQ(error, RequestError::bad_flags) << "bit " << bit;
    }
    EXPECT_TRUE(is_answered(error));
  }
  // Unknown bits win over the auth bit.
  EXPECT_EQ(decode_error(header(1, 5, 1, 0x8001)), RequestError::bad_flags);
  EXPECT_EQ(decode_error(header(2, 0, 1, flag_auth)), RequestError::trailer_short);
  EXPECT_EQ(decode_error(header(3, 0, 1, flag_auth)), RequestError::trailer_short);
}

TEST(RequestParserTest, EveryReservedBit) {
  for (unsigned bit = 0; bit < 16; ++bit) {
    EXPECT_EQ(decode_error(header(1, 5, 1, 0, static_cast<std::uint16_t>(1U << bit))),
              RequestError::reserved_nonzero)
        << "bit " << bit;
  }
}

TEST(RequestParserTest, CountBounds) {
  EXPECT_EQ(decode_error(header(1, 0)), RequestError::count_zero);
  EXPECT_EQ(decode_error(header(1, 1)), RequestError::ok);
  EXPECT_EQ(decode_error(header(1, count_max - 1)), RequestError::ok);
  EXPECT_EQ(decode_error(header(1, count_max)), RequestError::ok);
  EXPECT_EQ(decode_error(header(1, count_max + 1)), RequestError::count_too_large);
  EXPECT_EQ(decode_error(header(1, 0x80000000U)), RequestError::count_too_large);
  EXPECT_EQ(decode_error(header(1, 0xffffffffU)), RequestError::count_too_large);
  for (std::uint8_t opcode : {std::uint8_t{2}, std::uint8_t{3}}) {
    for (std::uint32_t count : {1U, count_max, count_max + 1, 0xffffffffU}) {
      EXPECT_EQ(decode_error(header(opcode, count)), RequestError::count_unexpected)
          << "opcode " << int{opcode} << " count " << count;
    }
  }
  // count_max is a power of two that a 32-bit count field can carry.
  static_assert((count_max & (count_max - 1)) == 0);
  static_assert(count_max < 0xffffffffU);
}

TEST(RequestParserTest, PrecedenceFollowsTheDocument) {
  // version before opcode, flags, reserved, padding, count.
  EXPECT_EQ(decode_error(padded(header(9, 0, 1, 0x0100, 1, 2), 30)), RequestError::bad_version);
  // opcode before flags.
  EXPECT_EQ(decode_error(header(9, 0, 1, 0x0100, 1)), RequestError::bad_opcode);
  // flags before reserved.
  EXPECT_EQ(decode_error(header(1, 0, 1, 0x0100, 1)), RequestError::bad_flags);
  // reserved before padding and count.
  std::vector<std::uint8_t> bytes = padded(header(1, 0, 1, 0, 1), 30);
  bytes.back() = 1;
  EXPECT_EQ(decode_error(bytes), RequestError::reserved_nonzero);
  // padding before count.
  bytes = padded(header(1, 0), 30);
  bytes.back() = 1;
  EXPECT_EQ(decode_error(bytes), RequestError::trailing_bytes);
  // too short before magic; response bit after magic and length.
  EXPECT_EQ(decode_error(std::vector<std::uint8_t>{0x12, 0x34}), RequestError::too_short);
  EXPECT_EQ(decode_error(header(0x81, 5, 1, 0, 0, 1, 0x1234)), RequestError::bad_magic);
  EXPECT_EQ(decode_error(padded(header(0x81, 5), 1500)), RequestError::too_long);
  EXPECT_EQ(decode_error(header(0x81, 5, 1, 0, 0, 7)), RequestError::is_response);
}

// An authenticated request carries a nonzero trailer (key id, timestamp, MAC) at its end:
// decode reads it and checks only the padding between header and trailer. Every length
// below 40 bytes is trailer_short (answered UNAUTHORIZED), never trailing_bytes.
TEST(RequestParserTest, AuthTrailerIsReadFromTheEnd) {
  std::vector<std::uint8_t> bytes = header(1, 5, 1, flag_auth);
  static constexpr std::uint8_t trailer[] = {0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x01, 0x05,
                                             0x00, 0x06, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
                                             0x8a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x60, 0x71};
  for (std::size_t cut = 1; cut <= sizeof trailer; ++cut) {
    std::vector<std::uint8_t> shorter = bytes;
    shorter.insert(shorter.end(), std::begin(trailer), std::end(trailer) - static_cast<long>(cut));
    EXPECT_EQ(to_string(decode_error(shorter)), to_string(RequestError::trailer_short)) << "cut " << cut;
  }
  bytes.insert(bytes.end(), 8, 0);  // zero padding, then the trailer
  bytes.insert(bytes.end(), std::begin(trailer), std::end(trailer));
  const RequestView view = decode_request(bytes);
  ASSERT_EQ(to_string(view.error), to_string(RequestError::ok));
  EXPECT_EQ(view.trailer.key_id, 7u);
  EXPECT_EQ(view.trailer.server, 0x105u);
  EXPECT_EQ(view.trailer.timestamp_us, 0x00060a0b0c0d0e0fULL);
  EXPECT_EQ(view.trailer.mac, 0x8a1b2c3d4e5f6071ULL);
  bytes[25] = 1;  // padding must still be zero
  EXPECT_EQ(to_string(decode_error(bytes)), to_string(RequestError::trailing_bytes));
}

TEST(RequestParserTest, ErrorNumbersAndNamesAreStable) {
  // The numbers are on the wire (BAD_REQUEST detail) and in PROTOCOL.md.
  const std::pair<RequestError, unsigned> numbers[] = {
      {RequestError::ok, 0},
      {RequestError::too_short, 1},
      {RequestError::bad_magic, 2},
      {RequestError::too_long, 3},
      {RequestError::is_response, 4},
      {RequestError::bad_version, 16},
      {RequestError::bad_opcode, 17},
      {RequestError::bad_flags, 18},
      {RequestError::reserved_nonzero, 19},
      {RequestError::count_zero, 20},
      {RequestError::count_too_large, 21},
      {RequestError::trailing_bytes, 22},
      {RequestError::count_unexpected, 23},
      {RequestError::name_missing, 24},
      {RequestError::name_too_long, 25},
      {RequestError::name_truncated, 26},
      {RequestError::name_bad, 27},
      {RequestError::auth_unsupported, 32},
      {RequestError::trailer_short, 33},
      {RequestError::unknown_key, 34},
      {RequestError::stale_timestamp, 35},
      {RequestError::bad_mac, 36},
      {RequestError::replay, 37},
      {RequestError::replay_full, 38},
      {RequestError::not_permitted, 39},
      {RequestError::rate_limited, 40},
      {RequestError::auth_required, 41},
      {RequestError::wrong_server, 42},
  };
  std::set<std::string_view> names;
  for (auto [error, number] : numbers) {
    EXPECT_EQ(static_cast<unsigned>(error), number);
    EXPECT_LT(number, request_error_slots);
    EXPECT_NE(to_string(error), "unknown");
    EXPECT_TRUE(names.insert(to_string(error)).second) << to_string(error);
    // Dropped: not ours (1..4), and the auth reasons whose answer would be an oracle or a
    // reflection (an unknown key id, a bad MAC, a replay, a full replay table).
    const bool dropped = number < 16 || number == 34 || number == 36 || number == 37 || number == 38;
    EXPECT_EQ(is_answered(error), !dropped) << to_string(error);
  }
  EXPECT_EQ(to_string(static_cast<RequestError>(200)), "unknown");
  EXPECT_EQ(to_string(static_cast<Status>(200)), "UNKNOWN");
  EXPECT_EQ(to_string(static_cast<Opcode>(200)), "UNKNOWN");
}

// ---- GET_SEQ: the name after the header ----

std::vector<std::uint8_t> seq_request(std::string_view name, std::size_t padding = 0) {
  std::vector<std::uint8_t> bytes = header(static_cast<std::uint8_t>(Opcode::get_seq), 5, 42);
  bytes.push_back(static_cast<std::uint8_t>(name.size()));
  bytes.insert(bytes.end(), name.begin(), name.end());
  bytes.resize(bytes.size() + padding, 0);
  return bytes;
}

TEST(SeqNameParserTest, EveryLengthAndPaddingDecodes) {
  for (std::size_t size = 1; size <= seq_name_size_max; ++size) {
    const std::string name(size, 'a' + static_cast<char>(size % 26));
    for (std::size_t padding : {0u, 1u, 100u}) {
      const RequestView view = decode_request(seq_request(name, padding));
      ASSERT_EQ(view.error, RequestError::ok) << size << " " << padding;
      EXPECT_EQ(view.request.name.view(), name);
      EXPECT_EQ(view.request.count, 5u);
    }
  }
  EXPECT_EQ(decode_request(seq_request(std::string(33, 'a'))).error, RequestError::name_too_long);
}

TEST(SeqNameParserTest, EveryTruncationOfTheNameIsNamed) {
  const std::vector<std::uint8_t> full = seq_request("orders.eu-1_x");
  for (std::size_t size = request_header_size; size < full.size(); ++size) {
    const std::span<const std::uint8_t> cut(full.data(), size);
    const RequestError expected =
        size == request_header_size ? RequestError::name_missing : RequestError::name_truncated;
    EXPECT_EQ(decode_request(cut).error, expected) << size;
  }
  EXPECT_EQ(decode_request(full).error, RequestError::ok);
}

TEST(SeqNameParserTest, EveryByteOutsideTheAlphabetIsBad) {
  for (unsigned c = 0; c < 256; ++c) {
    std::vector<std::uint8_t> bytes = seq_request("ab");
    bytes[request_header_size + 2] = static_cast<std::uint8_t>(c);
    const bool allowed =
        std::isalnum(static_cast<int>(c)) != 0 || c == '_' || c == '.' || c == '-' || c == ':';
    EXPECT_EQ(decode_request(bytes).error, allowed ? RequestError::ok : RequestError::name_bad) << c;
    EXPECT_EQ(valid_seq_name(std::string_view(reinterpret_cast<const char*>(&bytes[21]), 2)), allowed);
  }
  EXPECT_FALSE(valid_seq_name(""));
  EXPECT_FALSE(valid_seq_name(std::string(33, 'a')));
}

TEST(SeqNameParserTest, PaddingAfterTheNameMustBeZeroAndCountIsBounded) {
  std::vector<std::uint8_t> bytes = seq_request("x", 8);
  bytes.back() = 1;
  EXPECT_EQ(decode_request(bytes).error, RequestError::trailing_bytes);
  std::vector<std::uint8_t> zero = seq_request("x");
  zero[11] = 0;  // count 0
  EXPECT_EQ(decode_request(zero).error, RequestError::count_zero);
}

TEST(SeqNameParserTest, EncodeWritesTheNameAndDecodeReadsItBack) {
  Request request;
  request.opcode = Opcode::get_seq;
  request.count = 7;
  request.request_id = 99;
  const std::string_view name = "invoices";
  std::copy(name.begin(), name.end(), request.name.bytes.begin());
  request.name.size = static_cast<std::uint8_t>(name.size());
  std::array<std::uint8_t, datagram_size_max> out{};
  EXPECT_EQ(encode_request(request, out), request_header_size + 1 + name.size());
  const std::size_t padded = encode_request(request, out, 100);
  ASSERT_EQ(padded, 100u);
  const RequestView view = decode_request(std::span<const std::uint8_t>(out.data(), padded));
  ASSERT_EQ(view.error, RequestError::ok);
  EXPECT_EQ(view.request.name.view(), name);
  EXPECT_EQ(view.request.count, 7u);
}

TEST_F(SeededTest, RandomDatagramsNeverCrashAndMapToOneError) {
  std::vector<std::uint8_t> bytes;
  for (int i = 0; i < 20000; ++i) {
    const std::size_t size = rng_() % (datagram_size_max + 40);
    bytes.resize(size);
    for (auto& byte : bytes) byte = static_cast<std::uint8_t>(rng_());
    if (size >= 2 && rng_() % 2 == 0) {  // make half of them ours, to get past the magic
      bytes[0] = 0x46;
      bytes[1] = 0x4c;
      if (size >= 3 && rng_() % 2 == 0) bytes[2] = 1;
      if (size >= 4 && rng_() % 2 == 0) bytes[3] = static_cast<std::uint8_t>(1 + rng_() % 4);
    }
    const RequestView view = decode_request(bytes);
    const auto number = static_cast<unsigned>(view.error);
    ASSERT_LT(number, request_error_slots);
    ASSERT_NE(to_string(view.error), "unknown") << number;
    if (size < request_header_size) {
      ASSERT_EQ(view.error, RequestError::too_short);
    }
  }
}

// ---- encode_request ----

TEST(RequestEncoderTest, SizesAndLimits) {
  Request request;
  request.opcode = Opcode::get_ids;
  request.count = 9;
  request.request_id = 77;
  std::array<std::uint8_t, datagram_size_max + 10> out{};
  EXPECT_EQ(encode_request(request, out), request_header_size);
  EXPECT_EQ(encode_request(request, out, 0), request_header_size);
  EXPECT_EQ(encode_request(request, out, 19), request_header_size);
  EXPECT_EQ(encode_request(request, out, 21), 21u);
  EXPECT_EQ(encode_request(request, out, datagram_size_max), datagram_size_max);
  EXPECT_EQ(encode_request(request, out, datagram_size_max + 1), 0u);
  EXPECT_EQ(encode_request(request, std::span<std::uint8_t>(out.data(), 19)), 0u);
  EXPECT_EQ(encode_request(request, std::span<std::uint8_t>(out.data(), 40), 41), 0u);
  // Whatever it writes decodes back to the same request.
  for (std::size_t size = request_header_size; size <= datagram_size_max; size += 37) {
    out.fill(0xff);
    ASSERT_EQ(encode_request(request, out, size), size);
    const RequestView view = decode_request(std::span<const std::uint8_t>(out.data(), size));
    ASSERT_EQ(view.error, RequestError::ok) << size;
    EXPECT_EQ(view.request.count, 9u);
    EXPECT_EQ(view.request.request_id, 77u);
  }
}

// ---- anti-amplification arithmetic ----

TEST(AmplificationTest, ResponseLimitsForEveryRequestSize) {
  for (std::size_t size = request_header_size; size <= datagram_size_max; ++size) {
    const std::size_t limit = response_size_max(size);
    EXPECT_LE(limit, amplification_max * size);
    EXPECT_LE(limit, datagram_size_max);
    EXPECT_EQ(limit, std::min<std::size_t>(3 * size, 1472)) << size;
    const std::size_t ranges = ranges_max(size);
    EXPECT_LE(response_header_size + ranges * range_size, limit) << size;
    // And it is the most that fits.
    if (ranges < 255) {
      EXPECT_GT(response_header_size + (ranges + 1) * range_size, limit) << size;
    }
    EXPECT_GE(ranges, 3u);
    EXPECT_LE(ranges, 121u);
  }
  EXPECT_EQ(ranges_max(0), 0u);
  EXPECT_EQ(ranges_max(6), 0u);
  EXPECT_EQ(ranges_max(20), 3u);
  EXPECT_EQ(ranges_max(27), 5u);
  EXPECT_EQ(ranges_max(403), 99u);
  EXPECT_EQ(ranges_max(491), 121u);
  EXPECT_EQ(ranges_max(490), 120u);
}

TEST(AmplificationTest, RequestSizeForRangesIsTheSmallestThatBuysThem) {
  for (std::size_t ranges = 0; ranges <= 121; ++ranges) {
    const std::size_t size = request_size_for_ranges(ranges);
    EXPECT_GE(size, request_header_size);
    EXPECT_LE(size, datagram_size_max);
    EXPECT_GE(ranges_max(size), ranges) << ranges;
    if (size > request_header_size) {
      EXPECT_LT(ranges_max(size - 1), ranges) << ranges;
    }
  }
  EXPECT_EQ(request_size_for_ranges(5), 27u);
  EXPECT_EQ(request_size_for_ranges(99), 403u);
  EXPECT_EQ(request_size_for_ranges(121), 491u);
}

TEST(AmplificationTest, RequestSizeForIdsAddsOneRangeForAMidUnitStart) {
  for (std::uint64_t per_range :
       {std::uint64_t{1}, std::uint64_t{256}, std::uint64_t{1024}, std::uint64_t{4096}}) {
    for (std::uint64_t count : {std::uint64_t{1}, per_range, per_range + 1, 3 * per_range, 3 * per_range + 1,
                                std::uint64_t{count_max}}) {
      const std::uint64_t rule = (count + per_range - 1) / per_range + 1;
      // The worst case the rule must cover: the core is at the last counter value of its unit,
      // so the first range holds one ID and the rest need ceil((count - 1) / per_range).
      const std::uint64_t worst = 1 + (count - 1 + per_range - 1) / per_range;
      EXPECT_GE(rule, worst) << count << " / " << per_range;
      EXPECT_EQ(ranges_for_ids(count, per_range), std::min<std::uint64_t>(121, rule))
          << count << " / " << per_range;
      EXPECT_EQ(request_size_for_ids(count, per_range),
                request_size_for_ranges(ranges_for_ids(count, per_range)));
    }
  }
  EXPECT_EQ(ranges_for_ids(20'000, 4096), 6u);
  EXPECT_EQ(ranges_for_ids(4096, 4096), 2u);
  EXPECT_EQ(ranges_for_ids(1, 4096), 2u);
}

// ---- responses ----

// Hand-built response (independent of encode_response_header), big-endian. The body is
// `body_size` bytes of valid GET_IDS ranges, range k = (first (k + 1) << 16, count 1), cut
// wherever body_size ends.
std::vector<std::uint8_t> response_bytes(std::uint8_t opcode_byte, std::uint8_t status,
                                         std::uint8_t range_count, std::size_t body_size,
                                         std::uint8_t version = 1, std::uint16_t magic = 0x464c) {
  std::vector<std::uint8_t> b = {static_cast<std::uint8_t>(magic >> 8),
                                 static_cast<std::uint8_t>(magic & 0xff),
                                 version,
                                 opcode_byte,
                                 status,
                                 range_count,
                                 0x01,
                                 0x02};
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::uint8_t>(0x10 + i));  // request id
  for (int i = 0; i < 4; ++i) b.push_back(0);                                    // detail
  for (std::size_t i = 0; i < body_size; ++i) {
    std::array<std::uint8_t, range_size> range{};
    const std::uint64_t first = std::uint64_t{i / range_size + 1} << 16;
    for (int k = 0; k < 8; ++k)
      range[static_cast<std::size_t>(k)] = static_cast<std::uint8_t>(first >> (56 - 8 * k));
    range[11] = 1;
    b.push_back(range[i % range_size]);
  }
  return b;
}

// Overwrites range `index` of a response built by response_bytes.
void set_range(std::vector<std::uint8_t>& bytes, std::size_t index, std::uint64_t first,
               std::uint32_t count) {
  std::uint8_t* p = bytes.data() + response_header_size + index * range_size;
  store_be<std::uint64_t>(p, first);
  store_be<std::uint32_t>(p + 8, count);
}

TEST(ResponseParserTest, ValidResponsesDecode) {
  const auto bytes = response_bytes(0x81, 0, 2, 24);
  const ResponseView view = decode_response(bytes);
  ASSERT_EQ(view.error, ResponseError::ok);
  EXPECT_EQ(view.header.opcode, Opcode::get_ids);
  EXPECT_EQ(view.header.range_count, 2);
  EXPECT_EQ(view.header.node, 0x0102);
  EXPECT_EQ(view.header.request_id, 0x1011121314151617ULL);
  EXPECT_EQ(view.body.size(), 24u);
  EXPECT_EQ(view.range(0), (Range{0x10000, 1}));
  EXPECT_EQ(view.range(1), (Range{0x20000, 1}));
  // The largest valid answer: 121 ranges in 1472 bytes.
  EXPECT_EQ(decode_response(response_bytes(0x81, 0, 121, 121 * range_size)).error, ResponseError::ok);
}

TEST(ResponseParserTest, EveryTruncation) {
  const auto full = response_bytes(0x81, 0, 3, 36);
  for (std::size_t size = 0; size < full.size(); ++size) {
    const std::vector<std::uint8_t> cut(full.begin(), full.begin() + static_cast<long>(size));
    const ResponseError expected =
        size < response_header_size ? ResponseError::too_short : ResponseError::bad_length;
    EXPECT_EQ(decode_response(cut).error, expected) << "size " << size;
  }
  const auto info = response_bytes(0x83, 0, 0, info_body_size);
  for (std::size_t size = 0; size < info.size(); ++size) {
    const std::vector<std::uint8_t> cut(info.begin(), info.begin() + static_cast<long>(size));
    const ResponseError expected =
        size < response_header_size ? ResponseError::too_short : ResponseError::bad_length;
    EXPECT_EQ(decode_response(cut).error, expected) << "size " << size;
  }
  EXPECT_EQ(decode_response(std::span<const std::uint8_t>()).error, ResponseError::too_short);
}

TEST(ResponseParserTest, OversizeIsTooLongAfterTheMagic) {
  for (std::size_t size : {datagram_size_max + 1, std::size_t{2048}, std::size_t{65507}}) {
    auto bytes = response_bytes(0x81, 0, 121, size - response_header_size);
    EXPECT_EQ(decode_response(bytes).error, ResponseError::too_long) << size;
    bytes[0] = 0;
    EXPECT_EQ(decode_response(bytes).error, ResponseError::bad_magic) << size;
  }
}

TEST_F(SeededTest, ResponseTrailingBytesAreBadLength) {
  for (int i = 0; i < 1000; ++i) {
    const auto range_count = static_cast<std::uint8_t>(1 + rng_() % 120);
    auto bytes = response_bytes(0x81, 0, range_count, range_count * range_size);
    const std::size_t extra = 1 + rng_() % 64;
    for (std::size_t j = 0; j < extra; ++j) bytes.push_back(static_cast<std::uint8_t>(rng_()));
    if (bytes.size() > datagram_size_max) continue;
    ASSERT_EQ(decode_response(bytes).error, ResponseError::bad_length)
        << "ranges " << int{range_count} << " extra " << extra;
  }
}

TEST(ResponseParserTest, WrongMagicAndEveryWrongVersion) {
  EXPECT_EQ(decode_response(response_bytes(0x82, 0, 0, 0, 1, 0x464d)).error, ResponseError::bad_magic);
  EXPECT_EQ(decode_response(response_bytes(0x82, 0, 0, 0, 1, 0x4c46)).error, ResponseError::bad_magic);
  for (unsigned version = 0; version <= 255; ++version) {
    const ResponseError error =
        decode_response(response_bytes(0x82, 0, 0, 0, static_cast<std::uint8_t>(version))).error;
    EXPECT_EQ(error, version == 1 ? ResponseError::ok : ResponseError::bad_version) << version;
  }
}

TEST(ResponseParserTest, EveryOpcodeByte) {
  for (unsigned opcode = 0; opcode <= 255; ++opcode) {
    const ResponseView view = decode_response(response_bytes(static_cast<std::uint8_t>(opcode), 2, 0, 0));
    if ((opcode & opcode_response_bit) == 0) {
      EXPECT_EQ(view.error, ResponseError::not_response) << opcode;
    } else {
      // A BAD_REQUEST answer echoes whatever opcode the request had, so any is decodable.
      EXPECT_EQ(view.error, ResponseError::ok) << opcode;
      EXPECT_EQ(static_cast<unsigned>(view.header.opcode), opcode & 0x7f);
    }
  }
}

// Every opcode and status byte, each with the body its combination calls for, against
// PROTOCOL.md's table (written out here, not derived from wire.cc).
TEST(ResponseParserTest, EveryOpcodeAndStatus) {
  for (unsigned opcode = 0; opcode < 128; ++opcode) {
    for (unsigned status = 0; status <= 255; ++status) {
      const bool known = opcode >= 1 && opcode <= 4;
      const bool ok_get_ids = (opcode == 1 || opcode == 4) && status == 0;
      const bool ok_info = opcode == 3 && status == 0;
      const std::uint8_t ranges = ok_get_ids ? 1 : 0;
      const std::size_t body = ok_info ? info_body_size : ranges * range_size;
      ResponseError expected = ResponseError::ok;
      if (status > 7) {
        expected = ResponseError::bad_status;
      } else if (!known && status != 2) {
        expected = ResponseError::bad_opcode;
      } else if (opcode != 1 && opcode != 4 && (status == 1 || status == 4 || status == 7)) {
        expected = ResponseError::status_unexpected;
      } else if (opcode != 4 && (status == 5 || status == 6)) {
        expected = ResponseError::status_unexpected;
      }
      const auto op = static_cast<std::uint8_t>(opcode | opcode_response_bit);
      const auto st = static_cast<std::uint8_t>(status);
      ASSERT_EQ(decode_response(response_bytes(op, st, ranges, body)).error, expected)
          << "opcode " << opcode << " status " << status;
      if (expected != ResponseError::ok) continue;
      // The same answer with one range more (or, for OK GET_IDS, with none).
      const ResponseError with_ranges =
          ok_get_ids ? ResponseError::ranges_missing : ResponseError::ranges_unexpected;
      const std::uint8_t other = ok_get_ids ? 0 : 1;
      ASSERT_EQ(decode_response(response_bytes(op, st, other, body + other * range_size)).error, with_ranges)
          << "opcode " << opcode << " status " << status;
    }
  }
}

TEST(ResponseParserTest, BodyLengthMustMatch) {
  for (unsigned ranges = 1; ranges <= 121; ++ranges) {
    const auto count = static_cast<std::uint8_t>(ranges);
    EXPECT_EQ(decode_response(response_bytes(0x81, 0, count, ranges * range_size)).error, ResponseError::ok);
    if (ranges < 121) {
      EXPECT_EQ(decode_response(response_bytes(0x81, 0, count, ranges * range_size + 1)).error,
                ResponseError::bad_length);
    }
    EXPECT_EQ(decode_response(response_bytes(0x81, 0, count, ranges * range_size - 1)).error,
              ResponseError::bad_length);
  }
  // A range_count that no datagram can hold.
  EXPECT_EQ(decode_response(response_bytes(0x81, 0, 255, 121 * range_size)).error, ResponseError::bad_length);
  // INFO OK carries exactly the 16-byte body; other INFO answers carry none.
  for (std::size_t body = 0; body <= 40; ++body) {
    EXPECT_EQ(decode_response(response_bytes(0x83, 0, 0, body)).error,
              body == info_body_size ? ResponseError::ok : ResponseError::bad_length)
        << body;
    EXPECT_EQ(decode_response(response_bytes(0x83, 2, 0, body)).error,
              body == 0 ? ResponseError::ok : ResponseError::bad_length)
        << body;
  }
}

TEST(ResponseParserTest, RangesAreNonemptyIncreasingAndBelowTwoToThe63) {
  constexpr std::uint64_t id_limit = std::uint64_t{1} << 63;
  auto with = [](std::initializer_list<Range> ranges) {
    auto bytes =
        response_bytes(0x81, 0, static_cast<std::uint8_t>(ranges.size()), ranges.size() * range_size);
    std::size_t i = 0;
    for (const Range& range : ranges) set_range(bytes, i++, range.first, range.count);
    return decode_response(bytes).error;
  };
  EXPECT_EQ(with({{100, 5}, {105, 5}}), ResponseError::ok);         // adjacent is fine
  EXPECT_EQ(with({{100, 5}, {104, 5}}), ResponseError::bad_range);  // overlap
  EXPECT_EQ(with({{100, 5}, {100, 5}}), ResponseError::bad_range);  // repeated
  EXPECT_EQ(with({{200, 5}, {100, 5}}), ResponseError::bad_range);  // out of order
  EXPECT_EQ(with({{100, 0}}), ResponseError::bad_range);
  EXPECT_EQ(with({{100, 5}, {200, 0}}), ResponseError::bad_range);
  EXPECT_EQ(with({{0, 1}}), ResponseError::ok);
  EXPECT_EQ(with({{id_limit - 1, 1}}), ResponseError::ok);  // the largest ID
  EXPECT_EQ(with({{id_limit - 1, 2}}), ResponseError::bad_range);
  EXPECT_EQ(with({{id_limit, 1}}), ResponseError::bad_range);
  EXPECT_EQ(with({{~std::uint64_t{0}, 0xffffffff}}), ResponseError::bad_range);  // no wrap-around
}

TEST_F(SeededTest, RandomResponsesNeverCrash) {
  std::vector<std::uint8_t> bytes;
  for (int i = 0; i < 20000; ++i) {
    const std::size_t size = rng_() % 1600;
    bytes.resize(size);
    for (auto& byte : bytes) byte = static_cast<std::uint8_t>(rng_());
    if (size >= 4 && rng_() % 2 == 0) {
      bytes[0] = 0x46;
      bytes[1] = 0x4c;
      bytes[2] = 1;
      bytes[3] |= opcode_response_bit;
    }
    const ResponseView view = decode_response(bytes);
    if (view.error == ResponseError::ok) {
      // The accessors stay inside the datagram.
      if (view.body.size() == info_body_size && view.header.opcode == Opcode::info) {
        (void)view.info();
      } else {
        ASSERT_EQ(view.body.size(), std::size_t{view.header.range_count} * range_size);
        for (std::size_t r = 0; r < view.header.range_count; ++r) (void)view.range(r);
      }
    }
    ASSERT_NE(to_string(view.error), "unknown");
  }
}

}  // namespace
}  // namespace flurry::proto
