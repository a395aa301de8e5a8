// tests/proto/layout_test.cc — proto/layout.{h,cc}: validation (one clear sentence per
// mistake), presets, parse_layout, parse_epoch, compose/decode round trips under several
// layouts (seeded; FLURRY_TEST_SEED replays), and the fingerprint that guards a state
// directory against a layout change. Expected values are computed by hand or with Python from
// docs/architecture.md and proto/PROTOCOL.md, never by the code under test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/seed.h"

#include <array>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "proto/layout.h"

namespace flurry::proto {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t jan_2025_ms = 1'735'689'600'000ULL;  // 2025-01-01T00:00:00Z

using flurry::testing::test_seed;

Layout widths(unsigned time_bits, unsigned node_bits, unsigned sequence_bits,
              std::uint32_t time_unit_ms = 1) {
  Layout layout;
  layout.time_bits = time_bits;
  layout.node_bits = node_bits;
  layout.sequence_bits = sequence_bits;
  layout.time_unit_ms = time_unit_ms;
  return layout;
}

// ---- validate ----

TEST(LayoutValidateTest, DefaultsAndPresetsAreValid) {
  EXPECT_EQ(validate(Layout{}, 0, jan_2025_ms).message(), "");
  EXPECT_EQ(validate(Layout{}, 1023, jan_2025_ms).message(), "");
  EXPECT_EQ(validate(*layout_preset("js-safe"), 31, jan_2025_ms).message(), "");
}

TEST(LayoutValidateTest, WidthsOutOfRange) {
  for (const Layout& layout : {widths(0, 10, 12), widths(51, 2, 10), widths(41, 17, 5), widths(41, 10, 0),
                               widths(30, 0, 32, 1000)}) {
    EXPECT_THAT(validate(layout, 0, jan_2025_ms).message(),
                HasSubstr("time 1..50, node 0..16, sequence 1..31"))
        << describe(layout);
  }
  EXPECT_EQ(validate(widths(50, 0, 13), 0, jan_2025_ms).message(), "");
  EXPECT_EQ(validate(widths(32, 0, 31, 1000), 0, jan_2025_ms).message(), "");
  EXPECT_EQ(validate(widths(41, 16, 6), 0, jan_2025_ms).message(), "");
}

TEST(LayoutValidateTest, SumAbove63) {
  EXPECT_THAT(validate(widths(41, 16, 12), 0, jan_2025_ms).message(), HasSubstr("sum to 69 bits"));
  EXPECT_THAT(validate(widths(41, 10, 13), 0, jan_2025_ms).message(), HasSubstr("at most 63"));
  EXPECT_THAT(validate(widths(50, 16, 31), 0, jan_2025_ms).message(), HasSubstr("sum to 97 bits"));
  EXPECT_EQ(validate(widths(41, 10, 12), 0, jan_2025_ms).message(), "");  // exactly 63
  EXPECT_EQ(validate(widths(41, 10, 11), 0, jan_2025_ms).message(), "");  // fewer is fine
}

TEST(LayoutValidateTest, TimeUnit) {
  for (std::uint32_t unit : {0U, 2U, 5U, 100U, 999U, 1001U, 60000U}) {
    EXPECT_THAT(validate(widths(41, 10, 12, unit), 0, jan_2025_ms).message(),
                HasSubstr("time unit " + std::to_string(unit) + " ms is not allowed; use 1, 10 or 1000"));
  }
  EXPECT_EQ(validate(widths(41, 10, 12, 1), 0, jan_2025_ms).message(), "");
  EXPECT_EQ(validate(widths(41, 10, 12, 10), 0, jan_2025_ms).message(), "");
  EXPECT_EQ(validate(widths(41, 10, 12, 1000), 0, jan_2025_ms).message(), "");
}

TEST(LayoutValidateTest, TimeRangeAtLeast30Years) {
  // 30 years of 365.25 days = 946,728,000,000 ms. 2^40 ms = 34.8 years, 2^39 ms = 17.4;
  // 2^37 x 10 ms = 43.6 years, 2^36 x 10 ms = 21.8; 2^30 s = 34 years, 2^29 s = 17.
  EXPECT_EQ(time_range_min_ms, 946'728'000'000ULL);
  EXPECT_EQ(validate(widths(40, 10, 12, 1), 0, jan_2025_ms).message(), "");
  EXPECT_THAT(validate(widths(39, 10, 12, 1), 0, jan_2025_ms).message(),
              HasSubstr("covers 17 years; at least 30"));
  EXPECT_EQ(validate(widths(37, 10, 12, 10), 0, jan_2025_ms).message(), "");
  EXPECT_THAT(validate(widths(36, 10, 12, 10), 0, jan_2025_ms).message(),
              HasSubstr("at least 30 are required"));
  EXPECT_EQ(validate(widths(30, 10, 12, 1000), 0, jan_2025_ms).message(), "");
  EXPECT_THAT(validate(widths(29, 10, 12, 1000), 0, jan_2025_ms).message(),
              HasSubstr("29-bit time field of 1000 ms"));
}

TEST(LayoutValidateTest, CoreBitsMustFitTheirField) {
  Layout layout;  // core bits from the 12-bit sequence: at least one counter bit stays
  layout.core_bits = 11;
  EXPECT_EQ(validate(layout, 0, jan_2025_ms).message(), "");
  layout.core_bits = 12;
  EXPECT_THAT(validate(layout, 0, jan_2025_ms).message(),
              HasSubstr("4096 workers need 12 core bits but the sequence field has 12"));
  layout.core_bits = 31;
  EXPECT_THAT(validate(layout, 0, jan_2025_ms).message(), HasSubstr("31 core bits"));

  layout.core_from = CoreBitsFrom::node;  // from the 10-bit node field: may take all of it
  layout.core_bits = 10;
  EXPECT_EQ(validate(layout, 0, jan_2025_ms).message(), "");
  EXPECT_THAT(validate(layout, 1, jan_2025_ms).message(),
              HasSubstr("node id 1 does not fit the layout's 0 node bits"));
  layout.core_bits = 11;
  EXPECT_THAT(validate(layout, 0, jan_2025_ms).message(),
              HasSubstr("2048 workers need 11 core bits but the node field has 10"));
}

// Regression: validate() once shifted `1U << core_bits` in its message, undefined for
// core_bits >= 32; core_bits can come off the network (`flurry decode --server` validates the
// layout of an INFO answer). The sanitizer build (UBSAN halt_on_error) caught it.
TEST(LayoutValidateTest, HostileCoreBitsAreRejectedWithoutUndefinedBehaviour) {
  for (unsigned core_bits = 32; core_bits <= 255; ++core_bits) {
    for (CoreBitsFrom from : {CoreBitsFrom::sequence, CoreBitsFrom::node}) {
      Layout layout;
      layout.core_bits = core_bits;
      layout.core_from = from;
      EXPECT_THAT(validate(layout, 0, jan_2025_ms).message(),
                  HasSubstr(std::to_string(core_bits) + " core bits"));
    }
  }
}

TEST(LayoutValidateTest, NodeIdTooLarge) {
  EXPECT_EQ(validate(Layout{}, 1023, jan_2025_ms).message(), "");
  EXPECT_EQ(validate(Layout{}, 1024, jan_2025_ms).message(),
            "node id 1024 does not fit the layout's 10 node bits (largest is 1023)");
  Layout layout;
  layout.core_from = CoreBitsFrom::node;
  layout.core_bits = 3;
  EXPECT_EQ(validate(layout, 127, jan_2025_ms).message(), "");
  EXPECT_THAT(validate(layout, 128, jan_2025_ms).message(), HasSubstr("7 node bits (largest is 127)"));
  // Core bits from the sequence leave the node id its whole field.
  layout.core_from = CoreBitsFrom::sequence;
  EXPECT_EQ(validate(layout, 1023, jan_2025_ms).message(), "");
  EXPECT_EQ(validate(*layout_preset("js-safe"), 32, jan_2025_ms).message(),
            "node id 32 does not fit the layout's 5 node bits (largest is 31)");
}

TEST(LayoutValidateTest, EpochInTheFuture) {
  Layout layout;
  layout.epoch_ms = jan_2025_ms + 1;
  EXPECT_EQ(validate(layout, 0, jan_2025_ms).message(),
            "epoch 2025-01-01T00:00:00.001Z is in the future; pick an epoch in the past");
  layout.epoch_ms = jan_2025_ms;
  EXPECT_EQ(validate(layout, 0, jan_2025_ms).message(), "");
}

TEST(LayoutValidateTest, LayoutRanOut) {
  Layout layout;  // snowflake from 2024 runs out 2^41 ms later: 2093-09-06T15:47:35.551Z
  const std::uint64_t end = 1'704'067'200'000ULL + (std::uint64_t{1} << 41) - 1;
  EXPECT_EQ(layout_end_unix_ms(layout), end);
  EXPECT_EQ(validate(layout, 0, end - 1).message(), "");
  EXPECT_EQ(validate(layout, 0, end).message(),
            "layout ran out at 2093-09-06T15:47:35.551Z; pick a later epoch or a wider time field");
  // Twitter's epoch (2010-11-04T01:42:54.657Z) with 40 bits ran out in 2045: still fine in 2025.
  layout = widths(40, 10, 12);
  layout.epoch_ms = 1'288'834'974'657ULL;
  EXPECT_EQ(validate(layout, 0, jan_2025_ms).message(), "");
  EXPECT_THAT(validate(layout, 0, 1'288'834'974'657ULL + (std::uint64_t{1} << 40)).message(),
              HasSubstr("ran out"));
}

// ---- presets ----

TEST(LayoutPresetTest, Snowflake) {
  const auto layout = layout_preset("snowflake");
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(*layout, Layout{});
  EXPECT_EQ(layout->time_bits, 41u);
  EXPECT_EQ(layout->node_bits, 10u);
  EXPECT_EQ(layout->sequence_bits, 12u);
  EXPECT_EQ(layout->core_bits, 0u);
  EXPECT_EQ(layout->core_from, CoreBitsFrom::sequence);
  EXPECT_EQ(layout->epoch_ms, 1'704'067'200'000ULL);  // 2024-01-01T00:00:00Z
  EXPECT_EQ(layout->time_unit_ms, 1u);
  EXPECT_EQ(layout->counter_capacity(), 4096u);
  EXPECT_EQ(layout->node_id_max(), 1023u);
  // Twitter decoders: time = id >> 22, node = (id >> 12) & 0x3ff, sequence = id & 0xfff.
  const std::uint64_t id = layout->compose(123456789, 777, 0, 3210);
  EXPECT_EQ(id >> 22, 123456789u);
  EXPECT_EQ((id >> 12) & 0x3ff, 777u);
  EXPECT_EQ(id & 0xfff, 3210u);
}

TEST(LayoutPresetTest, JsSafeIdsStayBelow2To53) {
  const auto layout = layout_preset("js-safe");
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(layout->time_bits + layout->node_bits + layout->sequence_bits, 53u);
  EXPECT_EQ(layout->time_unit_ms, 10u);
  EXPECT_EQ(layout->time_bits, 37u);
  EXPECT_EQ(layout->node_bits, 5u);
  EXPECT_EQ(layout->sequence_bits, 11u);
  constexpr std::uint64_t js_max = (std::uint64_t{1} << 53) - 1;  // Number.MAX_SAFE_INTEGER
  // Every field at its maximum, for every legal core-bit split.
  for (CoreBitsFrom from : {CoreBitsFrom::sequence, CoreBitsFrom::node}) {
    const unsigned core_bits_max = from == CoreBitsFrom::sequence ? 10 : 5;
    for (unsigned core_bits = 0; core_bits <= core_bits_max; ++core_bits) {
      Layout split = *layout;
      split.core_from = from;
      split.core_bits = core_bits;
      ASSERT_EQ(validate(split, split.node_id_max(), jan_2025_ms).message(), "") << core_bits;
      const std::uint64_t id = split.compose(split.time_max(), split.node_id_max(),
                                             split.core_count_max() - 1, split.counter_capacity() - 1);
      EXPECT_EQ(id, js_max) << "core bits " << core_bits;
      EXPECT_LE(id, js_max);
    }
  }
  // 43 years of range.
  EXPECT_EQ(layout_end_unix_ms(*layout), 3'078'456'734'719ULL);  // 2067-07-21T06:52:14.719Z
  EXPECT_EQ(layout->counter_capacity() * (1000 / layout->time_unit_ms), 204'800u);
}

TEST(LayoutPresetTest, UnknownNames) {
  for (const char* name : {"", "Snowflake", "js_safe", "twitter", "snowflake "}) {
    EXPECT_FALSE(layout_preset(name).has_value()) << name;
  }
}

// ---- parse_layout ----

TEST(ParseLayoutTest, PresetsAndWidths) {
  EXPECT_EQ(*parse_layout("snowflake"), Layout{});
  EXPECT_EQ(*parse_layout("js-safe"), layout_preset("js-safe"));
  auto layout = parse_layout("41/10/12");
  ASSERT_TRUE(layout.ok()) << layout.message();
  EXPECT_EQ(*layout, Layout{});
  layout = parse_layout("40/12/11");
  ASSERT_TRUE(layout.ok()) << layout.message();
  EXPECT_EQ(layout->time_bits, 40u);
  EXPECT_EQ(layout->node_bits, 12u);
  EXPECT_EQ(layout->sequence_bits, 11u);
  EXPECT_EQ(layout->epoch_ms, default_epoch_ms);
  EXPECT_EQ(layout->time_unit_ms, 1u);
  layout = parse_layout("42/0/21");
  ASSERT_TRUE(layout.ok()) << layout.message();
  EXPECT_EQ(layout->node_bits, 0u);
}

TEST(ParseLayoutTest, BadText) {
  for (const char* text : {"", "41", "41/10", "snowflakes", "js", "41-10-12"}) {
    const auto parsed = parse_layout(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(parsed.message(), HasSubstr("is not one of snowflake, js-safe or TIME/NODE/SEQUENCE"))
        << text;
    EXPECT_THAT(parsed.message(), HasSubstr(std::string("'") + text + "'"));
  }
  for (const char* text : {"41/10/12/1", "a/b/c", "41//12", "/10/12", "41/10/", "-1/10/12", "+41/10/12",
                           " 41/10/12", "41/10/12 ", "41/1O/12", "0x29/10/12", "99999999999/10/12"}) {
    const auto parsed = parse_layout(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(parsed.message(), HasSubstr("each width must be a whole number")) << text;
  }
  // Parsing does not validate: widths that parse may still be refused by validate().
  auto layout = parse_layout("50/16/31");
  ASSERT_TRUE(layout.ok());
  EXPECT_THAT(validate(*layout, 0, jan_2025_ms).message(), HasSubstr("sum to 97"));
}

// ---- parse_epoch, format_unix_ms ----

TEST(ParseEpochTest, MillisecondsAndDates) {
  EXPECT_EQ(parse_epoch("1704067200000"), 1'704'067'200'000ULL);
  EXPECT_EQ(parse_epoch("0"), 0u);
  EXPECT_EQ(parse_epoch("2024-01-01"), 1'704'067'200'000ULL);
  EXPECT_EQ(parse_epoch("2024-01-01T00:00:00Z"), 1'704'067'200'000ULL);
  EXPECT_EQ(parse_epoch("2010-11-04T01:42:54Z"), 1'288'834'974'000ULL);
  EXPECT_EQ(parse_epoch("1970-01-01"), 0u);
  EXPECT_EQ(parse_epoch("2025-01-01T00:02:03Z"), 1'735'689'723'000ULL);
  EXPECT_EQ(parse_epoch("2000-02-29"), 951'782'400'000ULL);  // leap day
}

TEST(ParseEpochTest, BadText) {
  for (const char* text :
       {"", "abc", "1.5", "1e3", "-5", "12x", "2024-13-01", "2024-01-32", "2024-01-01T25:00:00Z",
        "2024-01-01X", "2024-01-01T00:00:00Zjunk", "1969-12-31", "99999999999999999999999"}) {
    EXPECT_FALSE(parse_epoch(text).has_value()) << text;
  }
}

TEST(FormatUnixMsTest, Iso8601) {
  EXPECT_EQ(format_unix_ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_unix_ms(1'704'067'200'000ULL), "2024-01-01T00:00:00.000Z");
  EXPECT_EQ(format_unix_ms(1'735'689'723'456ULL), "2025-01-01T00:02:03.456Z");
  EXPECT_EQ(format_unix_ms(951'868'799'999ULL), "2000-02-29T23:59:59.999Z");
  // parse_epoch reads what format_unix_ms writes, to the second.
  EXPECT_EQ(parse_epoch("2000-02-29T23:59:59Z"), 951'868'799'000ULL);
}

TEST(LayoutTest, DescribeNamesEverything) {
  Layout layout;
  layout.core_bits = 1;
  const std::string text = describe(layout);
  EXPECT_THAT(text, HasSubstr("41/10/12"));
  EXPECT_THAT(text, HasSubstr("core bits 1 from sequence"));
  EXPECT_THAT(text, HasSubstr("unit 1 ms"));
  EXPECT_THAT(text, HasSubstr("epoch 2024-01-01T00:00:00.000Z"));
  EXPECT_THAT(text, HasSubstr("runs out 2093-09-06T15:47:35.551Z"));
  layout.core_from = CoreBitsFrom::node;
  EXPECT_THAT(describe(layout), HasSubstr("from node"));
}

TEST(LayoutTest, CoreBitsFor) {
  const std::pair<unsigned, unsigned> cases[] = {{1, 0}, {2, 1}, {3, 2},  {4, 2},  {5, 3},
                                                 {8, 3}, {9, 4}, {64, 6}, {65, 7}, {1024, 10}};
  for (auto [workers, bits] : cases) EXPECT_EQ(core_bits_for(workers), bits) << workers;
}

TEST(LayoutTest, TimeFromUnixMs) {
  Layout layout = widths(37, 5, 11, 10);
  EXPECT_EQ(layout.time_from_unix_ms(0), 0u);  // before the epoch
  EXPECT_EQ(layout.time_from_unix_ms(default_epoch_ms), 0u);
  EXPECT_EQ(layout.time_from_unix_ms(default_epoch_ms + 9), 0u);
  EXPECT_EQ(layout.time_from_unix_ms(default_epoch_ms + 10), 1u);
  EXPECT_EQ(layout.time_from_unix_ms(jan_2025_ms), 3'162'240'000u);
  EXPECT_EQ(Layout{}.time_from_unix_ms(jan_2025_ms), 31'622'400'000u);
}

// ---- compose / decode ----

struct NamedLayout {
  const char* name;
  Layout layout;
};

std::vector<NamedLayout> round_trip_layouts() {
  std::vector<NamedLayout> layouts;
  layouts.push_back({"snowflake", Layout{}});
  Layout layout;
  layout.core_bits = 2;
  layouts.push_back({"snowflake core 2 from sequence", layout});
  layout.core_bits = 11;
  layouts.push_back({"snowflake core 11 from sequence", layout});
  layout.core_bits = 3;
  layout.core_from = CoreBitsFrom::node;
  layouts.push_back({"snowflake core 3 from node", layout});
  layout.core_bits = 10;
  layouts.push_back({"snowflake core 10 from node", layout});
  layout = *layout_preset("js-safe");
  layout.core_bits = 1;
  layouts.push_back({"js-safe core 1", layout});
  layout = widths(40, 12, 11);
  layout.core_bits = 4;
  layouts.push_back({"40/12/11 core 4", layout});
  layout = widths(42, 0, 21);
  layout.core_bits = 5;
  layouts.push_back({"42/0/21 core 5", layout});
  layout = widths(32, 16, 15, 1000);
  layout.core_bits = 2;
  layout.core_from = CoreBitsFrom::node;
  layouts.push_back({"32/16/15 (1 s) core 2 from node", layout});
  layout = widths(50, 0, 1);
  layouts.push_back({"50/0/1", layout});
  return layouts;
}

TEST(LayoutRoundTripTest, RandomFieldsSurviveComposeAndDecode) {
  const std::uint64_t seed = test_seed();
  std::cout << "seed " << seed << " (replay: FLURRY_TEST_SEED=" << seed << ")\n";
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const NamedLayout& named : round_trip_layouts()) {
    const Layout& layout = named.layout;
    SCOPED_TRACE(named.name);
    ASSERT_EQ(validate(layout, 0, jan_2025_ms).message(), "");
    const unsigned total = layout.time_bits + layout.node_bits + layout.sequence_bits;
    for (int i = 0; i < 20000; ++i) {
      // Half the cases at the edges (0 or max), half uniform.
      auto pick = [&rng](std::uint64_t max) -> std::uint64_t {
        switch (rng() % 4) {
          case 0:
            return 0;
          case 1:
            return max;
          default:
            return max == ~std::uint64_t{0} ? rng() : rng() % (max + 1);
        }
      };
      const std::uint64_t time = pick(layout.time_max());
      const auto node = static_cast<std::uint32_t>(pick(layout.node_id_max()));
      const auto core = static_cast<std::uint32_t>(pick(layout.core_count_max() - 1));
      const auto counter = static_cast<std::uint32_t>(pick(layout.counter_capacity() - 1));
      const std::uint64_t id = layout.compose(time, node, core, counter);
      ASSERT_LT(id, std::uint64_t{1} << total);
      const Decoded d = layout.decode(id);
      ASSERT_EQ(d.time, time);
      ASSERT_EQ(d.node, node);
      ASSERT_EQ(d.core, core);
      ASSERT_EQ(d.counter, counter);
      ASSERT_EQ(d.unix_ms, layout.epoch_ms + time * layout.time_unit_ms);
      // IDs sort by time first: anything at time + 1 is larger.
      if (time < layout.time_max()) {
        ASSERT_GT(layout.compose(time + 1, 0, 0, 0), id);
      }
    }
  }
}

TEST(LayoutRoundTripTest, DistinctFieldsGiveDistinctIds) {
  Layout layout;
  layout.core_bits = 2;
  std::set<std::uint64_t> ids;
  for (std::uint64_t time = 1000; time < 1004; ++time) {
    for (std::uint32_t node = 0; node < 8; ++node) {
      for (std::uint32_t core = 0; core < 4; ++core) {
        for (std::uint32_t counter : {0U, 1U, 512U, 1023U}) {
          EXPECT_TRUE(ids.insert(layout.compose(time, node, core, counter)).second);
        }
      }
    }
  }
  EXPECT_EQ(ids.size(), 4u * 8 * 4 * 4);
}

// ---- fingerprint ----

TEST(LayoutFingerprintTest, StableValues) {
  // FNV-1a 64 over (time_bits, node_bits, sequence_bits, core_bits, core_from, epoch_ms,
  // time_unit_ms), each as 8 little-endian bytes; computed with Python. These values are
  // stored beside the watermark, so they must not change between builds.
  EXPECT_EQ(Layout{}.fingerprint(), 0x2498a2e0e8ca8167ULL);
  EXPECT_EQ(layout_preset("js-safe")->fingerprint(), 0x5d864fc152945f20ULL);
}

TEST(LayoutFingerprintTest, DiffersWhenAnyFieldDiffers) {
  const Layout base;
  std::vector<Layout> variants;
  auto add = [&variants, &base](auto change) {
    Layout layout = base;
    change(layout);
    variants.push_back(layout);
  };
  add([](Layout& l) { l.time_bits = 40; });
  add([](Layout& l) { l.node_bits = 11; });
  add([](Layout& l) { l.sequence_bits = 11; });
  add([](Layout& l) { l.core_bits = 1; });
  add([](Layout& l) { l.core_from = CoreBitsFrom::node; });
  add([](Layout& l) { l.epoch_ms += 1; });
  add([](Layout& l) { l.time_unit_ms = 10; });
  // Same widths, moved between fields.
  add([](Layout& l) {
    l.node_bits = 12;
    l.sequence_bits = 10;
  });
  add([](Layout& l) {
    l.time_bits = 42;
    l.node_bits = 9;
  });
  std::set<std::uint64_t> seen = {base.fingerprint()};
  for (const Layout& layout : variants) {
    EXPECT_NE(layout, base);
    EXPECT_TRUE(seen.insert(layout.fingerprint()).second) << describe(layout);
  }
  Layout copy = base;
  EXPECT_EQ(copy.fingerprint(), base.fingerprint());
}

// A layout change carried by carry_watermark: over many random layout pairs and watermarks,
// the smallest ID the new layout can issue above the carried floor (time W+1, node 0, core 0,
// counter 0) is above the largest ID the old one could have issued at or below its watermark
// (time W_old, every node, core and counter bit set); and the floor is the smallest such W.
TEST(LayoutCarryTest, EveryNewIdIsAboveEveryOldIdOverRandomLayoutPairs) {
  const std::uint64_t seed = test_seed();
  std::cout << "seed " << seed << " (replay: " << flurry::testing::replay_hint(seed) << ")\n";
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  auto random_layout = [&] {
    Layout layout;
    layout.time_bits = static_cast<unsigned>(uniform(30, 45));
    layout.node_bits = static_cast<unsigned>(uniform(1, 12));
    layout.sequence_bits = static_cast<unsigned>(uniform(1, 63 - layout.time_bits - layout.node_bits));
    layout.time_unit_ms = std::array<std::uint32_t, 3>{1, 10, 1000}[uniform(0, 2)];
    layout.epoch_ms = default_epoch_ms + uniform(0, 1) * uniform(0, 86'400'000ULL * 3650);
    return layout;
  };
  int carried = 0;
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    const Layout from = random_layout();
    const Layout to = random_layout();
    const std::uint64_t from_t = uniform(0, from.time_max() - 1);
    const auto floor_t = carry_watermark(from, from_t, to);
    const unsigned from_shift = from.node_bits + from.sequence_bits;
    const unsigned to_shift = to.node_bits + to.sequence_bits;
    const std::uint64_t max_old = ((from_t + 1) << from_shift) - 1;  // every old ID <= this
    if (!floor_t) {
      // Refused only when no time of `to` clears the old IDs.
      EXPECT_LE(to.time_max() << to_shift, max_old) << "seed " << seed << " pair " << i;
      ++refused;
      continue;
    }
    ++carried;
    ASSERT_LT(*floor_t, to.time_max()) << "seed " << seed << " pair " << i;
    const std::uint64_t min_new = (*floor_t + 1) << to_shift;
    ASSERT_GT(min_new, max_old) << "seed " << seed << " pair " << i << ": W_old " << from_t << " floor "
                                << *floor_t;
    if (*floor_t > 0) {
      // One unit lower would not be enough: the floor is the smallest that works.
      ASSERT_LE(*floor_t << to_shift, max_old) << "seed " << seed << " pair " << i;
    }
  }
  EXPECT_GT(carried, 1000);
  EXPECT_GT(refused, 100);
  // The cases the issue names: 41/10/12 -> 42/10/11 doubles the time field (the old time k
  // read as 2k); the same widths carry the watermark unchanged.
  const Layout snowflake = *layout_preset("snowflake");
  Layout wider_time = snowflake;
  wider_time.time_bits = 42;
  wider_time.sequence_bits = 11;
  EXPECT_EQ(carry_watermark(snowflake, 1000, wider_time), 2001U);
  EXPECT_EQ(carry_watermark(snowflake, 1000, snowflake), 1000U);
  EXPECT_FALSE(carry_watermark(snowflake, snowflake.time_max() - 1, *layout_preset("js-safe")).has_value());
}

}  // namespace
}  // namespace flurry::proto
