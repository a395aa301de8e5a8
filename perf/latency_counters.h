// perf/latency_counters.h — what the Google Benchmark latency benchmarks (persist_bench,
// seq_refill_bench) report besides the mean: p50 / p99 / max of every operation's own wall
// time, as counters in µs.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace flurry::perf {

// At most this many samples are kept per benchmark run (the rest only count in the mean).
inline constexpr std::size_t latency_samples_max = std::size_t{1} << 20;

// Sets p50_us, p99_us and max_us from `samples_ns` (sorted here); nothing when empty.
inline void set_latency_counters(benchmark::State& state, std::vector<std::uint64_t> samples_ns) {
  if (samples_ns.empty()) return;
  std::sort(samples_ns.begin(), samples_ns.end());
  const auto at = [&](double q) {
    const auto index = static_cast<std::size_t>(q * static_cast<double>(samples_ns.size() - 1));
    return static_cast<double>(samples_ns[index]) / 1000.0;
  };
  state.counters["p50_us"] = at(0.50);
  state.counters["p99_us"] = at(0.99);
  state.counters["max_us"] = at(1.0);
}

}  // namespace flurry::perf
