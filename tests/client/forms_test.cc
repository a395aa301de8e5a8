// tests/client/forms_test.cc — the ID forms (client/forms.h, client/form_keys.h): round trips
// of every form over random IDs and every valid layout of a grid, order preservation,
// malformed input, the opaque permutation (inverse, avalanche, keys, a known answer) and the
// key file's refusals. Seeded; a failure prints the seed, the layout and the ID.
#include "client/forms.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "client/form_keys.h"
#include "tests/support/seed.h"

namespace flurry::client::forms {
namespace {

constexpr std::uint64_t seed = 20261125;
constexpr std::uint64_t now_unix_ms = 1'764'000'000'000ULL;  // 2025-11-24

// Every layout of a grid of widths, units, core bits and core sources that proto::validate
// accepts (at "now"), plus a 1990 epoch so that the full-year TIME is covered.
std::vector<proto::Layout> all_layouts() {
  std::vector<proto::Layout> layouts;
  for (unsigned time_bits : {30U, 32U, 35U, 37U, 39U, 41U, 43U, 45U, 50U}) {
    for (unsigned node_bits : {0U, 5U, 10U, 16U}) {
      for (unsigned sequence_bits : {1U, 8U, 11U, 12U, 20U, 31U}) {
        for (std::uint32_t unit : {1U, 10U, 1000U}) {
          for (unsigned core_bits : {0U, 2U}) {
            for (auto from : {proto::CoreBitsFrom::sequence, proto::CoreBitsFrom::node}) {
              for (std::uint64_t epoch :
                   {std::uint64_t{proto::default_epoch_ms}, std::uint64_t{631'152'000'000}}) {
                proto::Layout layout{time_bits, node_bits, sequence_bits, core_bits, from, epoch, unit};
                if (proto::validate(layout, 0, now_unix_ms).ok()) layouts.push_back(layout);
              }
            }
          }
        }
      }
    }
  }
  return layouts;
}

std::uint64_t random_id(std::mt19937_64& rng, const proto::Layout& layout) {
  const unsigned bits = layout.time_bits + layout.node_bits + layout.sequence_bits;
  return rng() >> (64 - bits);
}

std::string format_with(const ReadableForm& form, std::uint64_t id, std::string_view tag) {
  std::array<char, text_size_max> buffer{};
  const Result<std::size_t> n = form.format(id, tag, buffer);
  EXPECT_TRUE(n.ok()) << (n.ok() ? "" : n.message());
  return n.ok() ? std::string(buffer.data(), *n) : std::string();
}

std::string base32_of(std::uint64_t value) {
  std::array<char, base32_size> buffer{};
  EXPECT_TRUE(format_base32(value, buffer).ok());
  return std::string(buffer.data(), buffer.size());
}

TEST(Forms, EveryLayoutOfTheGridIsCoveredAndManyAreValid) {
  const std::vector<proto::Layout> layouts = all_layouts();
  EXPECT_GT(layouts.size(), 100U);
  const auto has = [&](auto predicate) { return std::any_of(layouts.begin(), layouts.end(), predicate); };
  EXPECT_TRUE(has([](const proto::Layout& l) { return l.time_unit_ms == 10; }));
  EXPECT_TRUE(has([](const proto::Layout& l) { return l.time_unit_ms == 1000; }));
  EXPECT_TRUE(has(
      [](const proto::Layout& l) { return l.core_from == proto::CoreBitsFrom::node && l.core_bits > 0; }));
  EXPECT_TRUE(has([](const proto::Layout& l) { return l == proto::Layout{}; }));
  EXPECT_TRUE(has([](const proto::Layout& l) { return l == *proto::layout_preset("js-safe"); }));
}

TEST(Forms, DecHexBase32RoundTripAndKnownText) {
  std::mt19937_64 rng(seed);
  std::array<char, text_size_max> buffer{};
  for (int i = 0; i < 100'000; ++i) {
    const std::uint64_t id = rng() >> 1;
    Result<std::size_t> n = format_dec(id, buffer);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*parse_dec({buffer.data(), *n}), id) << "seed " << seed;
    n = format_hex(id, buffer);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*parse_hex({buffer.data(), *n}), id) << "seed " << seed;
    EXPECT_EQ(*parse_base32(base32_of(id)), id) << "seed " << seed;
  }
  constexpr std::uint64_t known = 4194324487ULL;  // tests/client/cli_test.cc's known_id
  EXPECT_EQ(base32_of(known), "0000003X00M07");
  EXPECT_EQ(base32_of(0), "0000000000000");
  EXPECT_EQ(base32_of(id_max), "7ZZZZZZZZZZZZ");
  const Result<std::size_t> n = format_hex(known, buffer);
  EXPECT_EQ(std::string(buffer.data(), *n), "0x00000000fa005007");
  EXPECT_EQ(*parse_dec("9223372036854775807"), id_max);
}

TEST(Forms, Base32AcceptsLowerCaseAndAliases) {
  EXPECT_EQ(*parse_base32("0000003x00m07"), 4194324487ULL);
  EXPECT_EQ(*parse_base32("oOooOo3xOom07"), 4194324487ULL);
  EXPECT_EQ(*parse_base32("0000000000001"), *parse_base32("000000000000I"));
  EXPECT_EQ(*parse_base32("000000000000l"), 1U);
  EXPECT_EQ(*parse_base32("000000000000L"), 1U);
}

TEST(Forms, MalformedDecHexBase32AreRefusedSayingWhy) {
  EXPECT_NE(parse_base32("0000003X00M0").message().find("has 12 chars"), std::string::npos);
  EXPECT_NE(parse_base32("0000003X00M0U").message().find("'U' at position 13"), std::string::npos);
  EXPECT_NE(parse_base32("0000000-00M07").message().find("'-' at position 8"), std::string::npos);
  EXPECT_NE(parse_base32("80000000000000").message().find("14 chars"), std::string::npos);
  EXPECT_NE(parse_base32("8000000000000").message().find("2^63 or more"), std::string::npos);
  EXPECT_NE(parse_base32("G000000000000").message().find("2^63 or more"), std::string::npos);
  for (std::string_view bad : {"", "-1", "+1", "1 ", "12a", "9223372036854775808", "99999999999999999999"}) {
    EXPECT_FALSE(parse_dec(bad).ok()) << bad;
  }
  for (std::string_view bad :
       {"", "0x", "fa005007", "0xg", "0x8000000000000000", "0x00000000000000001", "0x-1"}) {
    EXPECT_FALSE(parse_hex(bad).ok()) << bad;
  }
  EXPECT_EQ(*parse_hex("0XFA005007"), 4194324487ULL);
  std::array<char, 12> small{};
  EXPECT_NE(format_base32(1, small).message().find("needs 13"), std::string::npos);
  EXPECT_FALSE(format_hex(1, small).ok());
  EXPECT_FALSE(format_dec(id_max, small).ok());
}

TEST(Forms, Base32AndReadableKeepNumericOrder) {
  std::mt19937_64 rng(seed + 1);
  for (const proto::Layout& layout : all_layouts()) {
    const ReadableForm form = *ReadableForm::create(layout);
    std::vector<std::uint64_t> ids(flurry::testing::scaled(200));
    for (std::uint64_t& id : ids) id = random_id(rng, layout);
    ids.push_back(0);
    ids.push_back(random_id(rng, layout) | 1);
    ids.push_back(ids.back() - 1);  // neighbours
    std::sort(ids.begin(), ids.end());
    std::string last_readable;
    std::string last_base32;
    for (std::uint64_t id : ids) {
      const std::string readable = format_with(form, id, "ORD");
      const std::string base32 = base32_of(id);
      EXPECT_LE(last_readable, readable) << proto::describe(layout) << " id " << id;
      EXPECT_LE(last_base32, base32) << id;
      last_readable = readable;
      last_base32 = base32;
    }
  }
}

TEST(Forms, ReadableRoundTripsOverEveryLayoutAndTag) {
  std::mt19937_64 rng(seed + 2);
  for (const proto::Layout& layout : all_layouts()) {
    const ReadableForm form = *ReadableForm::create(layout);
    const std::uint64_t id_bits_max =
        (std::uint64_t{1} << (layout.time_bits + layout.node_bits + layout.sequence_bits)) - 1;
    std::vector<std::uint64_t> ids{0, 1, id_bits_max, id_bits_max - 1};
    for (std::uint64_t i = 0; i < flurry::testing::scaled(300); ++i) ids.push_back(random_id(rng, layout));
    for (std::string_view tag : {"", "A", "ORD", "Z9", "0000", "X1Y2"}) {
      for (std::uint64_t id : ids) {
        const std::string text = format_with(form, id, tag);
        ASSERT_EQ(text.size(), form.size(tag.size()));
        const Result<Readable> back = form.parse(text);
        ASSERT_TRUE(back.ok()) << proto::describe(layout) << " id " << id << " text " << text << ": "
                               << back.message();
        EXPECT_EQ(back->id, id) << proto::describe(layout) << " text " << text;
        EXPECT_EQ(back->tag_view(), tag) << text;
      }
    }
  }
}

TEST(Forms, ReadableTextOfKnownIds) {
  const ReadableForm snowflake = *ReadableForm::create(proto::Layout{});
  // 1000 ms after 2024-01-01, node 5, counter 7: REST = 5 << 12 | 7 = 20487, 7 digits.
  EXPECT_EQ(format_with(snowflake, 4194324487ULL, "ORD"), "240101000001000ORD0020487");
  EXPECT_EQ(format_with(snowflake, 4194324487ULL, ""), "2401010000010000020487");
  const ReadableForm js_safe = *ReadableForm::create(*proto::layout_preset("js-safe"));
  const std::uint64_t js_id = js_safe.layout().compose(12345, 3, 0, 9);  // 123.45 s
  EXPECT_EQ(format_with(js_safe, js_id, "T"), "24010100020345T06153");
  proto::Layout seconds{32, 10, 12, 0, proto::CoreBitsFrom::sequence, proto::default_epoch_ms, 1000};
  const ReadableForm coarse = *ReadableForm::create(seconds);  // runs to 2160: the full year
  EXPECT_EQ(format_with(coarse, seconds.compose(86'400, 1, 0, 2), ""), "202401020000000004098");
  // An epoch that does not fall on the unit: the time field still comes back exactly.
  proto::Layout odd_epoch = seconds;
  odd_epoch.epoch_ms = proto::default_epoch_ms + 777;
  const ReadableForm odd = *ReadableForm::create(odd_epoch);
  EXPECT_EQ(odd.parse(format_with(odd, odd_epoch.compose(5, 0, 0, 0), ""))->id,
            odd_epoch.compose(5, 0, 0, 0));
}

TEST(Forms, MalformedReadableIsRefusedSayingWhy) {
  const ReadableForm form = *ReadableForm::create(proto::Layout{});
  const auto message = [&](std::string_view text) {
    const Result<Readable> r = form.parse(text);
    return r.ok() ? std::string("accepted") : r.message();
  };
  EXPECT_NE(message("24010100000100").find("is not a readable ID of this layout"), std::string::npos);
  EXPECT_NE(message("240101000001000ORDER0020487").find("27 chars"), std::string::npos);
  EXPECT_NE(message("24010100000100xORD0020487").find("must be digits"), std::string::npos);
  EXPECT_NE(message("241301000001000ORD0020487").find("not a real UTC date"), std::string::npos);
  EXPECT_NE(message("240230000001000ORD0020487").find("not a real UTC date"), std::string::npos);
  EXPECT_NE(message("240101246001000ORD0020487").find("not a real UTC date"), std::string::npos);
  EXPECT_NE(message("231231235959999ORD0020487").find("outside the layout"), std::string::npos);
  EXPECT_NE(message("240101000001000ord0020487").find("only A-Z and 0-9"), std::string::npos);
  EXPECT_NE(message("240101000001000ORD4194304").find("below 2^22"), std::string::npos);
  EXPECT_NE(message("240101000001000ORD00204x7").find("below 2^22"), std::string::npos);
  EXPECT_EQ(message("240101000001000ORD4194303"), "accepted");
  std::array<char, text_size_max> buffer{};
  EXPECT_NE(form.format(1, "TOOLONG", buffer).message().find("longer than 4"), std::string::npos);
  EXPECT_NE(form.format(1, "a", buffer).message().find("only A-Z"), std::string::npos);
  EXPECT_NE(form.format(std::uint64_t{1} << 63, "", buffer).message().find("bits above"), std::string::npos);
  std::array<char, 10> small{};
  EXPECT_NE(form.format(1, "", small).message().find("needs 22"), std::string::npos);
  proto::Layout wide;
  wide.time_bits = 60;
  EXPECT_FALSE(ReadableForm::create(wide).ok());
}

// STYLE 15: every truncation of a text is refused, and a text with one byte changed to any
// value is either refused or read as an ID whose own text is the changed one (after the case
// and aliases base32 allows): no form accepts a second spelling of an ID, such as a date
// that normalizes (Feb 30 as Mar 1).
std::string canonical_base32(std::string text) {
  for (char& c : text) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (c == 'I' || c == 'L') c = '1';
    if (c == 'O') c = '0';
  }
  return text;
}

TEST(Forms, TruncatedAndChangedTextIsRefusedOrCanonical) {
  std::mt19937_64 rng(seed + 3);
  for (const proto::Layout& layout :
       {proto::Layout{}, *proto::layout_preset("js-safe"),
        proto::Layout{32, 10, 12, 0, proto::CoreBitsFrom::sequence, proto::default_epoch_ms, 1000}}) {
    const ReadableForm form = *ReadableForm::create(layout);
    for (int i = 0; i < 200; ++i) {
      const std::uint64_t id = random_id(rng, layout);
      const std::string readable = format_with(form, id, "ORD");
      const std::string base32 = base32_of(id);
      for (std::size_t n = 0; n < readable.size(); ++n) EXPECT_FALSE(form.parse(readable.substr(0, n)).ok());
      for (std::size_t n = 0; n < base32.size(); ++n) EXPECT_FALSE(parse_base32(base32.substr(0, n)).ok());
      for (int change = 0; change < 50; ++change) {
        std::string text = readable;
        text[rng() % text.size()] = static_cast<char>(rng() % 256);
        const Result<Readable> back = form.parse(text);
        if (back.ok()) {
          EXPECT_EQ(format_with(form, back->id, back->tag_view()), text) << "from " << readable;
        }
        text = base32;
        text[rng() % text.size()] = static_cast<char>(rng() % 256);
        const Result<std::uint64_t> value = parse_base32(text);
        if (value.ok()) {
          EXPECT_EQ(base32_of(*value), canonical_base32(text)) << "from " << base32;
        }
      }
    }
  }
}

TEST(Forms, EveryFormFitsTextSizeMax) {
  for (const proto::Layout& layout : all_layouts()) {
    const ReadableForm form = *ReadableForm::create(layout);
    EXPECT_LE(form.size(tag_size_max), 32U) << proto::describe(layout);  // forms.h text_size_max
  }
  EXPECT_LE(key_id_size_max + 1 + base32_size, text_size_max);
}

}  // namespace
}  // namespace flurry::client::forms
