// perf/histogram_test.cc — perf/histogram.h against exact percentiles of sorted samples.
#include "perf/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace flurry::perf {
namespace {

TEST(Histogram, IndexAndValueAreInverseAtSlotStarts) {
  for (std::size_t index = 0; index < Histogram::counts_size; ++index) {
    const std::uint64_t value = Histogram::value_of(index);
    ASSERT_EQ(Histogram::index_of(value), index) << value;
  }
}

TEST(Histogram, EveryValueKeepsThreeSignificantDigits) {
  std::mt19937_64 random(7);
  for (int i = 0; i < 200'000; ++i) {
    const std::uint64_t value = random() >> (28 + random() % 36);
    if (value > Histogram::max_value) continue;
    const std::uint64_t low = Histogram::value_of(Histogram::index_of(value));
    const std::uint64_t high = Histogram::highest_equivalent(value);
    ASSERT_LE(low, value);
    ASSERT_GE(high, value);
    ASSERT_LE(static_cast<double>(high - low), static_cast<double>(value) / 1000.0 + 1.0) << value;
  }
  EXPECT_EQ(Histogram::highest_equivalent(2047), 2047U);  // exact below 2048
  EXPECT_EQ(Histogram::highest_equivalent(2048), 2049U);
}

TEST(Histogram, PercentilesMatchSortedSamplesWithinAThousandth) {
  std::mt19937_64 random(11);
  std::lognormal_distribution<double> latency(std::log(20'000.0), 1.0);  // ~20 us, long tail
  Histogram histogram;
  std::vector<std::uint64_t> samples;
  for (int i = 0; i < 100'000; ++i) {
    const auto value = static_cast<std::uint64_t>(latency(random));
    samples.push_back(value);
    histogram.record(value);
  }
  std::sort(samples.begin(), samples.end());
  EXPECT_EQ(histogram.total(), samples.size());
  EXPECT_EQ(histogram.max(), samples.back());
  EXPECT_EQ(histogram.min(), samples.front());
  for (const double p : {0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    const auto rank =
        std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(p / 100.0 * samples.size())));
    const std::uint64_t exact = samples[rank - 1];
    const std::uint64_t got = histogram.value_at_percentile(p);
    EXPECT_GE(got, exact) << p;
    EXPECT_LE(static_cast<double>(got), static_cast<double>(exact) * 1.001 + 1) << p;
  }
}

TEST(Histogram, AddMergesAndSaturatesAboveMax) {
  Histogram a, b;
  a.record(100);
  b.record(Histogram::max_value * 4);
  a.add(b);
  EXPECT_EQ(a.total(), 2U);
  EXPECT_EQ(a.saturated(), 1U);
  EXPECT_EQ(a.max(), Histogram::max_value);
  EXPECT_EQ(a.value_at_percentile(50), 100U);
}

TEST(Histogram, WritesHdrHistogramPercentileDistribution) {
  Histogram histogram;
  for (std::uint64_t v = 1; v <= 1000; ++v) histogram.record(v * 1000);  // 1..1000 us in ns
  char* text = nullptr;
  std::size_t size = 0;
  std::FILE* out = open_memstream(&text, &size);
  histogram.write_percentile_distribution(out, 1000.0);
  std::fclose(out);
  const std::string hgrm(text, size);
  std::free(text);
  EXPECT_EQ(hgrm.rfind("       Value     Percentile TotalCount 1/(1-Percentile)\n\n", 0), 0U) << hgrm;
  // 500 us = 500,000 ns lies in a slot 256 ns wide, reported at its top (HdrHistogram).
  EXPECT_NE(hgrm.find("     500.223 0.500000000000        500           2.00\n"), std::string::npos) << hgrm;
  EXPECT_NE(hgrm.find("    1000.000 1.000000000000       1000\n"), std::string::npos) << hgrm;
  EXPECT_NE(hgrm.find("#[Max     =     1000.000, Total count    =         1000]"), std::string::npos) << hgrm;
  // Percentile column rises strictly; total count never falls.
  double last_percentile = -1;
  unsigned long long last_count = 0;
  unsigned rows = 0;
  std::size_t at = hgrm.find("\n\n") + 2;
  while (at < hgrm.size() && hgrm[at] != '#') {
    const std::size_t end = hgrm.find('\n', at);
    double value = 0, percentile = 0;
    unsigned long long count = 0;
    ASSERT_GE(std::sscanf(hgrm.c_str() + at, "%lf %lf %llu", &value, &percentile, &count), 3);
    EXPECT_GT(percentile, last_percentile);
    EXPECT_GE(count, last_count);
    last_percentile = percentile;
    last_count = count;
    ++rows;
    at = end + 1;
  }
  EXPECT_GT(rows, 20U);
}

}  // namespace
}  // namespace flurry::perf
