// perf/histogram.h — a latency histogram on HdrHistogram's model, for flurry-bench.
//
// Debian packages no C or C++ HdrHistogram (only Java and Go ones), so this is the small part
// of it flurry-bench needs, with tests (perf/histogram_test.cc):
//   * Log-linear buckets with 3 significant decimal digits: 2048 sub-buckets per power of two,
//     so every recorded value is kept within 1/1024 (< 0.1 %) of itself. Values from 0 to
//     max_value (2^36 ns, 68 s); a larger value is counted at max_value and in saturated().
//   * Fixed memory (28,672 counters, 224 KiB), allocated once; record() never allocates.
//   * value_at_percentile(p) returns the highest value equivalent to the one at or above which
//     p % of the recorded values lie (HdrHistogram's getValueAtPercentile).
//   * write_percentile_distribution() writes HdrHistogram's percentile-distribution text
//     (".hgrm", as HdrHistogram's outputPercentileDistribution: 5 ticks per half distance),
//     so HdrHistogram's plotFiles.html and hdr-plot read it as they read any .hgrm.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

namespace flurry::perf {

class Histogram {
 public:
  static constexpr unsigned sub_bucket_half_magnitude = 10;  // 3 significant digits
  static constexpr std::uint64_t sub_bucket_half = std::uint64_t{1} << sub_bucket_half_magnitude;
  static constexpr std::uint64_t sub_bucket_count = 2 * sub_bucket_half;
  static constexpr std::uint64_t max_value = std::uint64_t{1} << 36;
  // Buckets 0..26: bucket b holds values of 2^(b+10) .. 2^(b+11) - 1 in steps of 2^b.
  static constexpr unsigned bucket_count = 27;
  static constexpr std::size_t counts_size = (bucket_count + 1) * sub_bucket_half;
  static_assert(((sub_bucket_count - 1) << (bucket_count - 1)) >= max_value);

  Histogram() : counts_(new std::uint64_t[counts_size]()) {}
  Histogram(Histogram&&) noexcept = default;
  Histogram& operator=(Histogram&&) noexcept = default;

  void record(std::uint64_t value) {
    if (value > max_value) {
      value = max_value;
      ++saturated_;
    }
    ++counts_[index_of(value)];
    ++total_;
    max_ = std::max(max_, value);
    min_ = std::min(min_, value);
  }

  void add(const Histogram& other) {
    for (std::size_t i = 0; i < counts_size; ++i) counts_[i] += other.counts_[i];
    total_ += other.total_;
    saturated_ += other.saturated_;
    max_ = std::max(max_, other.max_);
    min_ = std::min(min_, other.min_);
  }

  std::uint64_t total() const { return total_; }
  std::uint64_t saturated() const { return saturated_; }
  std::uint64_t max() const { return total_ == 0 ? 0 : max_; }
  std::uint64_t min() const { return total_ == 0 ? 0 : min_; }

  // p in [0, 100].
  std::uint64_t value_at_percentile(double p) const {
    if (total_ == 0) return 0;
    p = std::clamp(p, 0.0, 100.0);
    const auto wanted = std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(total_))));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_size; ++i) {
      seen += counts_[i];
      if (seen >= wanted) return std::min(highest_equivalent(value_of(i)), max_);
    }
    return max_;
  }

  double mean() const {
    if (total_ == 0) return 0;
    double sum = 0;
    for (std::size_t i = 0; i < counts_size; ++i) {
      if (counts_[i] != 0) sum += static_cast<double>(counts_[i]) * median_equivalent(value_of(i));
    }
    return sum / static_cast<double>(total_);
  }

  double stddev() const {
    if (total_ == 0) return 0;
    const double m = mean();
    double sum = 0;
    for (std::size_t i = 0; i < counts_size; ++i) {
      if (counts_[i] == 0) continue;
      const double d = median_equivalent(value_of(i)) - m;
      sum += static_cast<double>(counts_[i]) * d * d;
    }
    return std::sqrt(sum / static_cast<double>(total_));
  }

  // HdrHistogram's percentile distribution, values divided by `scale` (1000: ns -> us).
  void write_percentile_distribution(std::FILE* out, double scale, unsigned ticks_per_half = 5) const {
    std::fprintf(out, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
    if (total_ != 0) write_rows(out, scale, ticks_per_half);
    std::fprintf(out, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", mean() / scale, stddev() / scale);
    std::fprintf(out, "#[Max     = %12.3f, Total count    = %12llu]\n", static_cast<double>(max()) / scale,
                 static_cast<unsigned long long>(total_));
    std::fprintf(out, "#[Buckets = %12u, SubBuckets     = %12llu]\n", bucket_count,
                 static_cast<unsigned long long>(sub_bucket_count));
  }

  // Index arithmetic, public for the tests.
  static constexpr std::size_t index_of(std::uint64_t value) {
    const unsigned top = 63 - static_cast<unsigned>(std::countl_zero(value | (sub_bucket_count - 1)));
    const unsigned bucket = top - sub_bucket_half_magnitude;  // 0 for values below 2048
    const std::uint64_t sub = value >> bucket;
    return (std::size_t{bucket} << sub_bucket_half_magnitude) + static_cast<std::size_t>(sub);
  }
  static constexpr std::uint64_t value_of(std::size_t index) {
    std::size_t bucket = index >> sub_bucket_half_magnitude;
    std::uint64_t sub = (index & (sub_bucket_half - 1)) + sub_bucket_half;
    if (bucket == 0) {
      sub -= sub_bucket_half;
    } else {
      bucket -= 1;
    }
    return sub << bucket;
  }
  // The width of the bucket slot `value` falls in: every value in it is recorded alike.
  static std::uint64_t equivalent_range(std::uint64_t value) {
    const std::size_t index = index_of(value);
    const std::size_t bucket = index < sub_bucket_count ? 0 : (index >> sub_bucket_half_magnitude) - 1;
    return std::uint64_t{1} << bucket;
  }
  static std::uint64_t highest_equivalent(std::uint64_t value) {
    return value_of(index_of(value)) + equivalent_range(value) - 1;
  }

 private:
  static double median_equivalent(std::uint64_t value) {
    return static_cast<double>(value_of(index_of(value))) + static_cast<double>(equivalent_range(value)) / 2;
  }

  // HdrHistogram's percentile iterator: report at 0 %, then at levels that close in on
  // 100 % by halving the remaining distance every ticks_per_half steps, then at 100 %.
  void write_rows(std::FILE* out, double scale, unsigned ticks_per_half) const {
    double level = 0;
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_size; ++i) {
      if (counts_[i] == 0) continue;
      seen += counts_[i];
      const double value = static_cast<double>(std::min(highest_equivalent(value_of(i)), max_)) / scale;
      const bool last = seen == total_;
      // At the last value one row at the current level, then the 100 % row (as HdrHistogram).
      while (100.0 * static_cast<double>(seen) / static_cast<double>(total_) >= level) {
        std::fprintf(out, "%12.3f %2.12f %10llu %14.2f\n", value, level / 100.0,
                     static_cast<unsigned long long>(seen), 1.0 / (1.0 - level / 100.0));
        const double halvings = std::floor(std::log2(100.0 / (100.0 - level))) + 1;
        level += 100.0 / (ticks_per_half * std::pow(2.0, halvings));
        if (last) break;
      }
      if (last) {
        std::fprintf(out, "%12.3f %2.12f %10llu\n", value, 1.0, static_cast<unsigned long long>(seen));
        return;
      }
    }
  }

  std::unique_ptr<std::uint64_t[]> counts_;
  std::uint64_t total_ = 0;
  std::uint64_t saturated_ = 0;
  std::uint64_t max_ = 0;
  std::uint64_t min_ = UINT64_MAX;
};

static_assert(Histogram::index_of(Histogram::max_value) < Histogram::counts_size);

// Writes `latency` (nanoseconds) to `path` in HdrHistogram's percentile format, in
// microseconds; an empty path writes nothing. On failure says why on stderr as `program`.
inline bool write_hgrm(const std::string& path, const Histogram& latency, const char* program) {
  if (path.empty()) return true;
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (out == nullptr) {
    std::fprintf(stderr, "%s: --hgrm %s: %s\n", program, path.c_str(), std::strerror(errno));
    return false;
  }
  latency.write_percentile_distribution(out, 1000.0);
  return std::fclose(out) == 0;
}

}  // namespace flurry::perf
