// perf/persist_bench.cc — latency of WatermarkStore::store() (one 128-byte slot write made
// durable) on a real file in a private /tmp directory, for both methods: io_uring (write SQE
// linked to an IORING_FSYNC_DATASYNC fsync SQE) and pwrite + fdatasync.
//
// Wall-clock time is what matters (the caller blocks on the device), so every benchmark uses
// real time. Besides the mean, p50 / p99 / max of the store's own latency counter are
// reported. The numbers describe the file system and device under /tmp, not flurry alone:
// run it on the disk that will hold --state-dir. Set FLURRY_BENCH_DIR to use another parent
// directory.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "perf/latency_counters.h"
#include "persist/watermark_store.h"

namespace {

void store_latency(benchmark::State& state, bool use_io_uring) {
  const char* parent = std::getenv("FLURRY_BENCH_DIR");
  std::string dir_template =
      std::string(parent != nullptr ? parent : "/tmp") + "/flurry-persist-bench-XXXXXX";
  if (::mkdtemp(dir_template.data()) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  const std::string dir = dir_template;
  {
    flurry::persist::OpenOptions options;
    options.use_io_uring = use_io_uring;
    auto opened = flurry::persist::WatermarkStore::open(
        dir, {1, 0x1234, {1'288'834'974'657ull, 1, 41, 10, 12, 0, 0}}, options);
    auto* store = opened.ok() ? opened->get() : nullptr;
    if (store == nullptr) {
      state.SkipWithError(opened.message().c_str());
    } else if (use_io_uring && store->method() != "io_uring") {
      state.SkipWithError("io_uring unavailable on this machine");
    } else {
      std::vector<std::uint64_t> samples_ns;
      samples_ns.reserve(flurry::perf::latency_samples_max);
      std::uint64_t watermark_t = 1;
      for (auto _ : state) {
        if (const flurry::Status stored = store->store(watermark_t++); !stored.ok()) {
          state.SkipWithError(stored.message().c_str());
          break;
        }
        if (samples_ns.size() < flurry::perf::latency_samples_max) {
          samples_ns.push_back(store->last_store_latency_ns());
        }
      }
      state.SetLabel(std::string(store->method()));
      flurry::perf::set_latency_counters(state, std::move(samples_ns));
      state.counters["stores_per_s"] =
          benchmark::Counter(static_cast<double>(store->stores()), benchmark::Counter::kIsRate);
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

BENCHMARK_CAPTURE(store_latency, io_uring, true)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(store_latency, pwrite_fdatasync, false)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
