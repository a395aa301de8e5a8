// tests/client/uuid_test.cc — the uuid form (client/forms.h): an RFC 9562 version-7 UUID that
// carries the whole ID. Round trips over random IDs of every valid layout of forms_test's grid,
// the version and variant bits where RFC 9562 puts them, time order and numeric order kept,
// and every kind of wrong text refused saying why. Seeded.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

#include "client/forms.h"

namespace flurry::client::forms {
namespace {

constexpr std::uint64_t seed = 20261128;
constexpr std::uint64_t now_unix_ms = 1'764'000'000'000ULL;  // 2025-11-24

std::vector<proto::Layout> layouts() {
  std::vector<proto::Layout> out;
  for (unsigned time_bits : {30U, 35U, 37U, 41U, 45U, 50U}) {
    for (unsigned node_bits : {0U, 5U, 10U, 16U}) {
      for (unsigned sequence_bits : {1U, 11U, 12U, 20U}) {
        for (std::uint32_t unit : {1U, 10U, 1000U}) {
          for (std::uint64_t epoch :
               {std::uint64_t{proto::default_epoch_ms}, std::uint64_t{631'152'000'000}}) {
            proto::Layout layout{time_bits, node_bits, sequence_bits, 0, proto::CoreBitsFrom::sequence,
                                 epoch,     unit};
            // Layouts whose last instant a UUID's 48 bits of ms still hold (see PastTheYear10889).
            const std::uint64_t last_ms = layout.decode(layout.compose(layout.time_max(), 0, 0, 0)).unix_ms;
            if (proto::validate(layout, 0, now_unix_ms).ok() && last_ms >> 48 == 0) out.push_back(layout);
          }
        }
      }
    }
  }
  return out;
}

std::string uuid_of(const proto::Layout& layout, std::uint64_t id) {
  std::array<char, text_size_max> buffer{};
  const Result<std::size_t> n = format_uuid(layout, id, buffer);
  EXPECT_TRUE(n.ok()) << (n.ok() ? "" : n.message());
  return n.ok() ? std::string(buffer.data(), *n) : std::string();
}

unsigned hex_at(const std::string& text, std::size_t i) {
  const char c = text[i];
  return c <= '9' ? static_cast<unsigned>(c - '0') : static_cast<unsigned>(c - 'a' + 10);
}

TEST(Uuid, RoundTripsOverEveryLayoutWithVersionSevenAndTheRfcVariant) {
  std::mt19937_64 rng(seed);
  const auto all = layouts();
  ASSERT_GT(all.size(), 50U);
  for (const proto::Layout& layout : all) {
    const unsigned bits = layout.time_bits + layout.node_bits + layout.sequence_bits;
    const std::uint64_t top = bits == 63 ? id_max : (std::uint64_t{1} << bits) - 1;
    for (std::uint64_t id : {std::uint64_t{0}, std::uint64_t{1}, top}) {
      const std::string text = uuid_of(layout, id);
      ASSERT_EQ(text.size(), uuid_size);
      const Result<std::uint64_t> back = parse_uuid(layout, text);
      ASSERT_TRUE(back.ok()) << proto::describe(layout) << " " << id << ": " << back.message();
      ASSERT_EQ(*back, id) << text;
    }
    for (int i = 0; i < 200; ++i) {
      const std::uint64_t id = rng() >> (64 - bits);
      const std::string text = uuid_of(layout, id);
      ASSERT_EQ(text[8], '-');
      ASSERT_EQ(text[13], '-');
      ASSERT_EQ(text[18], '-');
      ASSERT_EQ(text[23], '-');
      ASSERT_EQ(text[14], '7') << "version 7 in the 13th hex digit: " << text;
      ASSERT_EQ(hex_at(text, 19) >> 2, 0b10U) << "variant 10 in the top bits of the 17th: " << text;
      // unix_ts_ms, the first 48 bits, is the ID's instant.
      std::uint64_t unix_ms = 0;
      for (std::size_t k : {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12}) unix_ms = unix_ms << 4 | hex_at(text, k);
      ASSERT_EQ(unix_ms, layout.decode(id).unix_ms) << text;
      const Result<std::uint64_t> back = parse_uuid(layout, text);
      ASSERT_TRUE(back.ok()) << back.message();
      ASSERT_EQ(*back, id);
      std::string upper = text;
      std::transform(upper.begin(), upper.end(), upper.begin(), [](char c) { return std::toupper(c); });
      ASSERT_EQ(*parse_uuid(layout, upper), id) << "upper case reads too";
    }
  }
}

// A UUID's text order (and byte order) is the IDs' numeric order, for IDs of one layout.
TEST(Uuid, TextOrderIsIdOrder) {
  std::mt19937_64 rng(seed + 1);
  for (const proto::Layout& layout : layouts()) {
    const unsigned bits = layout.time_bits + layout.node_bits + layout.sequence_bits;
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < 64; ++i) ids.push_back(rng() >> (64 - bits));
    // Neighbours in one time unit and across one.
    const std::uint64_t base = ids[0];
    ids.push_back(base + 1);
    ids.push_back(base | ((std::uint64_t{1} << (layout.node_bits + layout.sequence_bits)) - 1));
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&](std::uint64_t id) { return !check_fits(layout, id).ok(); }),
              ids.end());
    for (std::size_t i = 1; i < ids.size(); ++i) {
      ASSERT_LT(uuid_of(layout, ids[i - 1]), uuid_of(layout, ids[i]))
          << proto::describe(layout) << ": " << ids[i - 1] << " < " << ids[i];
    }
  }
}

TEST(Uuid, KnownText) {
  const proto::Layout layout;  // snowflake, epoch 2024-01-01T00:00:00Z
  // ID 4194324487 (0xfa005007): time field 1000, 1 s after the epoch; the ID in the low bits.
  EXPECT_EQ(uuid_of(layout, 4194324487ULL), "018cc251-f7e8-7000-8000-0000fa005007");
  EXPECT_EQ(uuid_of(layout, 0), "018cc251-f400-7000-8000-000000000000");
  EXPECT_EQ(uuid_of(layout, id_max), "038cc251-f3ff-7001-bfff-ffffffffffff");
}

// 41 time bits of seconds run to the year 71708; a UUID holds instants to 10889. Those IDs are
// refused, saying why; the layout's earlier ones are not.
TEST(Uuid, AnInstantPastTheYear10889HasNoUuid) {
  proto::Layout seconds{41, 10, 12, 0, proto::CoreBitsFrom::sequence, proto::default_epoch_ms, 1000};
  ASSERT_TRUE(proto::validate(seconds, 0, now_unix_ms).ok());
  std::array<char, text_size_max> buffer{};
  const Result<std::size_t> late = format_uuid(seconds, seconds.compose(seconds.time_max(), 0, 0, 0), buffer);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.message().find("the year 10889"), std::string::npos) << late.message();
  EXPECT_TRUE(format_uuid(seconds, seconds.compose(1'000'000'000, 0, 0, 0), buffer).ok());  // 2055
}

TEST(Uuid, WrongTextIsRefusedSayingWhy) {
  const proto::Layout layout;
  const std::string good = uuid_of(layout, 4194324487ULL);
  const auto refused = [&](const std::string& text, const std::string& why) {
    const Result<std::uint64_t> parsed = parse_uuid(layout, text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.message().find(why), std::string::npos) << text << ": " << parsed.message();
  };
  refused(good.substr(0, 35), "has 35 chars, a UUID has 36");
  refused(good + "0", "has 37 chars");
  refused("018cc251f7e8-7000-8000-0000fa0050077", "position 9 must be '-'");
  refused("018cc251-f7e8-7000-8000-0000fa00500g", "'g' at position 36 is not a hex digit");
  refused("018cc251-f7e8-4000-8000-0000fa005007", "its version is 4");
  refused("018cc251-f7e8-7000-c000-0000fa005007", "variant");
  refused("018cc251-f7e8-7000-0000-0000fa005007", "variant");
  refused("018cc251-f7e8-7002-8000-0000fa005007", "the 11 bits above the ID are not 0");
  // Another instant than the ID inside it: another epoch, or not one of flurry's.
  refused("018cc251-f7e9-7000-8000-0000fa005007", "its time is");
  // An ID with bits above a narrower layout's.
  const proto::Layout js_safe = *proto::parse_layout("js-safe");
  const Result<std::uint64_t> other = parse_uuid(js_safe, uuid_of(layout, id_max));
  EXPECT_FALSE(other.ok());
  // Too small a buffer.
  std::array<char, 35> small{};
  EXPECT_FALSE(format_uuid(layout, 1, small).ok());
}

}  // namespace
}  // namespace flurry::client::forms
