// perf/seq_refill_bench.cc — how long a named sequence's block reservation takes (issue 9:
// "block refill latency against etcd"), next to the local store's, in one run:
//   * etcd: cluster::SeqBlocks::reserve(), what the sequence thread calls per block in cluster
//     mode: one read of /flurry/<cluster>/seq/<name> and ONE compare-and-put transaction on its
//     mod_revision, over the v3 JSON gateway (libcurl keep-alive), against a real etcd started
//     here on loopback with a temporary data directory (the cluster tests' harness:
//     tests/cluster/cluster_harness.h; $ETCD or /usr/bin/etcd). etcd fsyncs its WAL on every
//     put, so this is a disk sync plus two HTTP round trips.
//   * local: persist::SequenceStore::write(), what a reservation is in local mode: one 128-byte
//     record made durable (io_uring write linked to fdatasync; and pwrite + fdatasync).
// Every run checks the blocks it got: each new block starts at the bound the last one ended at
// (one client), so no number could be handed out twice. p50 / p99 / max come from every
// reservation's own wall time. Both write under /tmp (tests/support/temp_dir.h): the figures
// describe that disk, not the one that will hold etcd's data and --state-dir.
//   flock /tmp/flurry-bench.lock meson test -C build --benchmark seq_refill_bench -v
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "control/cluster/etcd_client.h"
#include "control/cluster/seq_blocks.h"
#include "perf/latency_counters.h"
#include "persist/sequence_store.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/support/temp_dir.h"

namespace {

constexpr std::uint64_t step = 10'000;  // SequenceOptions::step_initial

// p50 / p99 / max of the samples, the rate and the label.
void report(benchmark::State& state, std::vector<std::uint64_t> samples_ns, const std::string& label) {
  state.SetLabel(label);
  state.counters["reservations_per_s"] =
      benchmark::Counter(static_cast<double>(samples_ns.size()), benchmark::Counter::kIsRate);
  flurry::perf::set_latency_counters(state, std::move(samples_ns));
}

std::uint64_t elapsed_ns(std::chrono::steady_clock::time_point since) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count());
}

// One etcd for every benchmark of the run, stopped (by PID) at exit.
struct EtcdOnce {
  flurry::testing::TempDir dir{"flurry-seq-bench-etcd."};
  flurry::test::Etcd etcd{dir.path()};
  std::string error;
  bool up = false;
  EtcdOnce() { up = etcd.start(&error); }
};

EtcdOnce& etcd_once() {
  static EtcdOnce once;
  return once;
}

void etcd_reserve(benchmark::State& state) {
  EtcdOnce& once = etcd_once();
  if (!once.up) {
    state.SkipWithError(("etcd did not start: " + once.error).c_str());
    return;
  }
  flurry::control::cluster::EtcdConfig config;
  config.endpoints = {once.etcd.url()};
  auto client = flurry::control::cluster::EtcdClient::create(config);
  if (!client.ok()) {
    state.SkipWithError(client.message().c_str());
    return;
  }
  flurry::control::cluster::SeqBlocks blocks(**client, "bench", "bench-instance");
  static int runs = 0;  // Google Benchmark calls this more than once: a fresh sequence each time
  const std::string name = "refill" + std::to_string(++runs);
  if (flurry::Status created = blocks.create(name, 0, flurry::core::SeqMode::segment); !created.ok()) {
    state.SkipWithError(created.message().c_str());
    return;
  }
  std::vector<std::uint64_t> samples_ns;
  samples_ns.reserve(flurry::perf::latency_samples_max);
  std::uint64_t bound = 0;  // where the next block must start
  for (auto _ : state) {
    const auto began = std::chrono::steady_clock::now();
    auto block = blocks.reserve(name, 0, step);
    const std::uint64_t took = elapsed_ns(began);
    if (!block.ok()) {
      state.SkipWithError(block.message().c_str());
      break;
    }
    if (block->first != bound || block->end != bound + step) {
      state.SkipWithError("a block that does not follow the last one: numbers could repeat");
      break;
    }
    bound = block->end;
    if (samples_ns.size() < flurry::perf::latency_samples_max) samples_ns.push_back(took);
  }
  report(state, std::move(samples_ns), "etcd read + compare-and-put txn");
}

void local_reserve(benchmark::State& state, bool use_io_uring) {
  flurry::testing::TempDir dir("flurry-seq-bench-local.");
  auto store = flurry::persist::SequenceStore::open(dir.path(), use_io_uring);
  if (!store.ok()) {
    state.SkipWithError(store.message().c_str());
    return;
  }
  if (use_io_uring && (*store)->method() != "io_uring") {
    state.SkipWithError("io_uring unavailable on this machine");
    return;
  }
  std::vector<std::uint64_t> samples_ns;
  samples_ns.reserve(flurry::perf::latency_samples_max);
  flurry::persist::SequenceRecord record{true, 0, "refill", 0, step};
  for (auto _ : state) {
    record.upper += step;
    const auto began = std::chrono::steady_clock::now();
    const flurry::Status written = (*store)->write(0, record);
    const std::uint64_t took = elapsed_ns(began);
    if (!written.ok()) {
      state.SkipWithError(written.message().c_str());
      break;
    }
    if (samples_ns.size() < flurry::perf::latency_samples_max) samples_ns.push_back(took);
  }
  if (!(*store)->record(0) || (*store)->record(0)->upper != record.upper) {
    state.SkipWithError("the store does not hold the last bound written");
  }
  report(state, std::move(samples_ns), std::string((*store)->method()) + " record write");
}

BENCHMARK(etcd_reserve)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(local_reserve, io_uring, true)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(local_reserve, pwrite_fdatasync, false)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
