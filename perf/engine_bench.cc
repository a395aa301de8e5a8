// perf/engine_bench.cc — the ID engine and the request handler, without I/O.
//
//   Generator/single      ns per ID when IDs are asked one at a time
//   Generator/batch/N     ns per ID for batches of N (items_per_second counts IDs)
//   Handler/get_ids/N     ns per GET_IDS datagram through decode + issue + encode
//   Handler/ping          ns per PING datagram (the handler's fixed cost)
//   Handler/get_ids_signed/N  ns per signed GET_IDS (40 bytes, --auth required): the same
//                         work plus key lookup, window, one SipHash-2-4 of the request, the
//                         replay table, and one SipHash of the answer. Requests are signed in
//                         untimed batches of 4096 (fresh timestamps: a replay would be dropped).
//   Burst/check/before, Burst/check/slice   ns per burst for the ceiling and assignment check
//                         alone (load_burst_ceiling): as the workers wrote it before core::Slice
//                         (a local generation, an optional Handler, a rebuild lambda), and
//                         Slice::load_ceiling; Burst/get_ids/before and /slice add one GET_IDS
//                         datagram and publish(): a one-packet burst, the smallest
//   Burst/get_ids/source/N  Burst/get_ids/slice with the sender's address and the per-source
//                         bound (--source-share) off (0) or on, requests from N addresses in turn
//   FrontEnd/datagram/N   ns per front-end call of N IDs as the front ends issued before
//                         core::Slice: a padded GET_IDS encoded, handled, the answer decoded and
//                         its IDs copied one by one into a vector
//   FrontEnd/slice/N      the same N IDs through Slice::issue (ranges, nothing encoded)
// Time advances 1 unit every 4096 calls so the counter never runs dry and nothing hits the
// ceiling: this measures the fast path.
#include <benchmark/benchmark.h>

#include <sodium.h>

#include <array>
#include <optional>
#include <vector>

#include "core/assignment.h"
#include "core/generator.h"
#include "core/handler.h"
#include "core/keys.h"
#include "core/shared.h"
#include "core/slice.h"
#include "proto/auth.h"
#include "proto/wire.h"

namespace {

using flurry::proto::Layout;

void generator_single(benchmark::State& state) {
  Layout layout;
  flurry::core::Generator generator(layout, 1, 0);
  std::array<flurry::proto::Range, 1> ranges;
  std::uint64_t now_t = 1000;
  std::uint64_t calls = 0;
  for (auto _ : state) {
    if ((++calls & 4095) == 0) ++now_t;
    auto issued = generator.issue(now_t, ~std::uint64_t{0} >> 1, 1, ranges);
    benchmark::DoNotOptimize(issued);
    benchmark::DoNotOptimize(ranges[0].first);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(calls));
}
BENCHMARK(generator_single)->Name("Generator/single");

void generator_batch(benchmark::State& state) {
  Layout layout;
  flurry::core::Generator generator(layout, 1, 0);
  std::array<flurry::proto::Range, 121> ranges;
  const auto batch = static_cast<std::uint32_t>(state.range(0));
  std::uint64_t now_t = 1000;
  std::uint64_t ids = 0;
  for (auto _ : state) {
    ++now_t;  // a fresh unit every batch: batches up to 4096 fit in one range
    auto issued = generator.issue(now_t, ~std::uint64_t{0} >> 1, batch, ranges);
    ids += issued.ids;
    benchmark::DoNotOptimize(ranges[0].first);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(ids));
}
BENCHMARK(generator_batch)->Name("Generator/batch")->Arg(16)->Arg(256)->Arg(4096);

void handler_get_ids(benchmark::State& state) {
  flurry::core::HandlerConfig config;
  flurry::core::WorkerStats stats;
  flurry::core::Handler handler(config, stats);
  handler.start_above(0);
  std::array<std::uint8_t, flurry::proto::datagram_size_max> request{};
  std::array<std::uint8_t, flurry::proto::datagram_size_max> answer{};
  flurry::proto::Request get;
  get.opcode = flurry::proto::Opcode::get_ids;
  get.count = static_cast<std::uint32_t>(state.range(0));
  const std::size_t size = flurry::proto::encode_request(get, request);
  flurry::core::Burst burst{1000, ~std::uint64_t{0} >> 1};
  std::uint64_t calls = 0;
  for (auto _ : state) {
    if ((++calls & 255) == 0) ++burst.now_t;
    const std::size_t written =
        handler.handle(std::span<const std::uint8_t>(request.data(), size), answer, burst);
    benchmark::DoNotOptimize(written);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(calls));
  state.counters["ids_per_request"] =
      static_cast<double>(stats.get(flurry::core::Outcome::ids_issued)) / static_cast<double>(calls);
}
BENCHMARK(handler_get_ids)->Name("Handler/get_ids")->Arg(1)->Arg(16);

void handler_ping(benchmark::State& state) {
  flurry::core::HandlerConfig config;
  flurry::core::WorkerStats stats;
  flurry::core::Handler handler(config, stats);
  std::array<std::uint8_t, flurry::proto::datagram_size_max> request{};
  std::array<std::uint8_t, flurry::proto::datagram_size_max> answer{};
  flurry::proto::Request ping;
  const std::size_t size = flurry::proto::encode_request(ping, request);
  const flurry::core::Burst burst{1000, 2000};
  for (auto _ : state) {
    const std::size_t written =
        handler.handle(std::span<const std::uint8_t>(request.data(), size), answer, burst);
    benchmark::DoNotOptimize(written);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(handler_ping)->Name("Handler/ping");

void handler_get_ids_signed(benchmark::State& state) {
  if (sodium_init() < 0) state.SkipWithError("sodium_init failed");
  flurry::core::ReplayFilter replay(std::size_t{1} << 20);
  flurry::core::Key key;
  key.id = 7;
  key.opcodes = 1U << 1;
  for (std::size_t i = 0; i < key.secret.size(); ++i) key.secret[i] = static_cast<std::uint8_t>(i);
  const flurry::core::KeyTable keys({key});
  flurry::core::HandlerConfig config;
  // A 100 ms window: with the clock moving 1 ms per batch, replay entries expire after 100
  // batches and the table stays under half full.
  config.auth = flurry::core::AuthConfig{flurry::core::AuthMode::required, 100, crypto_shorthash, &replay};
  flurry::core::WorkerStats stats;
  flurry::core::Handler handler(config, stats);
  handler.start_above(0);
  constexpr std::size_t batch = 4096;
  constexpr std::size_t size = flurry::proto::signed_request_size_min;
  std::vector<std::array<std::uint8_t, size>> requests(batch);
  std::array<std::uint8_t, flurry::proto::datagram_size_max> answer{};
  flurry::proto::Request get;
  get.opcode = flurry::proto::Opcode::get_ids;
  get.count = static_cast<std::uint32_t>(state.range(0));
  flurry::core::Burst burst{1000, ~std::uint64_t{0} >> 1, 1'735'689'600'000ULL, &keys};
  std::uint64_t calls = 0;
  while (state.KeepRunningBatch(batch)) {
    state.PauseTiming();
    ++burst.now_unix_ms;
    ++burst.now_t;
    for (std::size_t i = 0; i < batch; ++i) {
      get.request_id = calls + i;
      flurry::proto::encode_signed_request(get, requests[i], size, key.id, config.node_id,
                                           burst.now_unix_ms * 1000 + i % 1000, key.secret, crypto_shorthash);
    }
    state.ResumeTiming();
    for (const auto& request : requests) {
      const std::size_t written =
          handler.handle(std::span<const std::uint8_t>(request.data(), size), answer, burst);
      benchmark::DoNotOptimize(written);
    }
    calls += batch;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(calls));
  state.counters["ids_per_request"] =
      static_cast<double>(stats.get(flurry::core::Outcome::ids_issued)) / static_cast<double>(calls);
  state.counters["refused"] = static_cast<double>(stats.get(flurry::core::Outcome::dropped) +
                                                  stats.get(flurry::core::Outcome::answered_unauthorized));
  for (auto error : {flurry::proto::RequestError::replay, flurry::proto::RequestError::replay_full,
                     flurry::proto::RequestError::stale_timestamp}) {
    const auto count = stats.request_errors[static_cast<std::size_t>(error)].get();
    if (count != 0) state.counters[std::string(flurry::proto::to_string(error))] = static_cast<double>(count);
  }
}
BENCHMARK(handler_get_ids_signed)->Name("Handler/get_ids_signed")->Arg(1)->Arg(16);

// One node's shared state for the slice benchmarks: assigned, a ceiling far ahead.
struct Node {
  flurry::core::Shared shared{1};
  Node() {
    shared.assignment.publish(1, 0, 0);
    shared.ceiling.publish(~std::uint64_t{0} >> 2);
  }
};

// The per-burst check as the socket worker wrote it before core::Slice: Shared through the
// backend's reference member, the generation and the handler local to the worker.
struct BeforeSlice {
  flurry::core::Shared& shared;
  flurry::core::HandlerConfig config;
  std::uint64_t generation = 0;
  std::optional<flurry::core::Handler> handler;
  explicit BeforeSlice(flurry::core::Shared& s) : shared(s) { rebuild(); }
  void rebuild() {
    generation = shared.assignment.current_generation();
    config.node_id = shared.assignment.node_id.load(std::memory_order_acquire);
    config.node_since_unix_ms = shared.assignment.since_unix_ms.load(std::memory_order_acquire);
    handler.emplace(config, shared.stats[0]);
    handler->start_above(shared.assignment.floor_t.load(std::memory_order_acquire));
  }
};

void burst_check_before(benchmark::State& state) {
  Node node;
  BeforeSlice before(node.shared);
  auto rebuild = [&] { before.rebuild(); };
  for (auto _ : state) {
    const std::uint64_t ceiling_t = flurry::core::load_burst_ceiling(
        before.shared.ceiling, before.shared.assignment, before.generation, rebuild);
    benchmark::DoNotOptimize(ceiling_t);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(burst_check_before)->Name("Burst/check/before");

void burst_check_slice(benchmark::State& state) {
  Node node;
  flurry::core::Slice slice(flurry::core::SliceConfig{}, node.shared);
  for (auto _ : state) {
    const std::uint64_t ceiling_t = slice.load_ceiling();
    benchmark::DoNotOptimize(ceiling_t);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(burst_check_slice)->Name("Burst/check/slice");

std::size_t get_ids_request(std::array<std::uint8_t, flurry::proto::datagram_size_max>& request) {
  flurry::proto::Request get;
  get.opcode = flurry::proto::Opcode::get_ids;
  get.count = 1;
  return flurry::proto::encode_request(get, request);
}

void burst_get_ids_before(benchmark::State& state) {
  Node node;
  BeforeSlice before(node.shared);
  auto rebuild = [&] { before.rebuild(); };
  std::array<std::uint8_t, flurry::proto::datagram_size_max> request{};
  std::array<std::uint8_t, flurry::proto::datagram_size_max> answer{};
  const std::size_t size = get_ids_request(request);
  flurry::core::Burst burst{1000, 0};
  std::uint64_t calls = 0;
  for (auto _ : state) {
    if ((++calls & 4095) == 0) ++burst.now_t;
    burst.ceiling_t = flurry::core::load_burst_ceiling(before.shared.ceiling, before.shared.assignment,
                                                       before.generation, rebuild);
    const std::size_t written =
        before.handler->handle(std::span<const std::uint8_t>(request.data(), size), answer, burst);
    before.handler->publish();
    benchmark::DoNotOptimize(written);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(calls));
}
BENCHMARK(burst_get_ids_before)->Name("Burst/get_ids/before");

void burst_get_ids_slice(benchmark::State& state) {
  Node node;
  flurry::core::Slice slice(flurry::core::SliceConfig{}, node.shared);
  std::array<std::uint8_t, flurry::proto::datagram_size_max> request{};
  std::array<std::uint8_t, flurry::proto::datagram_size_max> answer{};
  const std::size_t size = get_ids_request(request);
  flurry::core::Burst burst{1000, 0};
  std::uint64_t calls = 0;
  for (auto _ : state) {
    if ((++calls & 4095) == 0) ++burst.now_t;
    burst.ceiling_t = slice.load_ceiling();
    const std::size_t written =
        slice.handle(std::span<const std::uint8_t>(request.data(), size), answer, burst);
    slice.publish();
    benchmark::DoNotOptimize(written);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(calls));
}
BENCHMARK(burst_get_ids_slice)->Name("Burst/get_ids/slice");

// Burst/get_ids/slice with the sender's address passed, and the per-source bound
// (core/source_limit.h) off (Arg 0) or on, the requests coming from N addresses in turn
// (1: one bucket, always in cache; 4096: half the default table; 65536: eight times the
// table, so most requests evict). The buckets never run dry: this is the bound's cost on a
// request it admits, the hot path's, in the same run as the row without it.
void burst_get_ids_source(benchmark::State& state) {
  Node node;
  const auto sources = static_cast<std::uint32_t>(state.range(0));
  if (sources != 0) {
    node.shared.source_limit.ids_per_s = std::uint64_t{1} << 40;
    node.shared.source_limit.burst_ids = std::uint64_t{1} << 40;
    node.shared.source_limit.entries = 8192;  // --source-table's default
    for (std::size_t i = 0; i < node.shared.source_limit.seed.size(); ++i) {
      node.shared.source_limit.seed[i] = 0x9e37'79b9'7f4a'7c15ULL * (i + 1);
    }
  }
  flurry::core::Slice slice(flurry::core::SliceConfig{}, node.shared);
  std::array<std::uint8_t, flurry::proto::datagram_size_max> request{};
  std::array<std::uint8_t, flurry::proto::datagram_size_max> answer{};
  const std::size_t size = get_ids_request(request);
  const Layout layout;
  flurry::core::Burst burst{1000, 0};
  burst.now_unix_ms = layout.epoch_ms + 1000;
  std::uint64_t calls = 0;
  std::uint32_t next = 0;
  for (auto _ : state) {
    if ((++calls & 4095) == 0) {
      ++burst.now_t;
      ++burst.now_unix_ms;
    }
    burst.ceiling_t = slice.load_ceiling();
    const auto source = flurry::core::Source::ipv4(0x0a00'0000U + next);
    if (++next == sources) next = 0;
    const std::size_t written =
        slice.handle(std::span<const std::uint8_t>(request.data(), size), answer, burst, source);
    slice.publish();
    benchmark::DoNotOptimize(written);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(calls));
  const flurry::core::WorkerStats& stats = node.shared.stats[0];
  state.counters["limited"] = static_cast<double>(stats.sources.limited.get());
  state.counters["evicted_per_request"] =
      static_cast<double>(stats.sources.evicted.get()) / static_cast<double>(calls);
}
BENCHMARK(burst_get_ids_source)->Name("Burst/get_ids/source")->Arg(0)->Arg(1)->Arg(4096)->Arg(65536);

// The front ends' path before core::Slice (dataplane/slice_issuer.cc as it was), for N IDs.
void front_end_datagram(benchmark::State& state) {
  Node node;
  BeforeSlice before(node.shared);
  auto rebuild = [&] { before.rebuild(); };
  const Layout layout;
  const auto n = static_cast<std::uint32_t>(state.range(0));
  std::array<std::uint8_t, flurry::proto::datagram_size_max> request{};
  std::array<std::uint8_t, flurry::proto::datagram_size_max> answer{};
  std::vector<std::uint64_t> ids;
  std::uint64_t now_ms = layout.epoch_ms + 1000;
  std::uint64_t calls = 0;
  std::uint64_t request_id = 0;
  for (auto _ : state) {
    if ((++calls & 255) == 0) ++now_ms;
    ids.clear();
    std::uint32_t remaining = n;
    while (remaining > 0) {
      flurry::proto::Request get;
      get.opcode = flurry::proto::Opcode::get_ids;
      get.count = remaining;
      get.request_id = ++request_id;
      const std::size_t padded =
          std::min<std::size_t>(flurry::proto::datagram_size_max,
                                flurry::proto::request_size_for_ids(get.count, layout.counter_capacity()));
      flurry::core::Burst burst;
      burst.now_unix_ms = now_ms;
      burst.now_t = layout.time_from_unix_ms(now_ms);
      burst.ceiling_t = flurry::core::load_burst_ceiling(before.shared.ceiling, before.shared.assignment,
                                                         before.generation, rebuild);
      const std::size_t size = flurry::proto::encode_request(get, request, padded);
      const std::size_t written = before.handler->handle(std::span(request.data(), size), answer, burst);
      before.handler->publish();
      const flurry::proto::ResponseView view =
          flurry::proto::decode_response(std::span(answer.data(), written));
      if (view.error != flurry::proto::ResponseError::ok || view.header.status != flurry::proto::Status::ok)
        break;
      for (std::size_t i = 0; i < view.header.range_count; ++i) {
        const flurry::proto::Range range = view.range(i);
        for (std::uint64_t k = 0; k < range.count; ++k) ids.push_back(range.first + k);
        remaining -= static_cast<std::uint32_t>(range.count);
      }
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(calls));
}
BENCHMARK(front_end_datagram)->Name("FrontEnd/datagram")->Arg(1)->Arg(16)->Arg(1000);

void front_end_slice(benchmark::State& state) {
  Node node;
  flurry::core::Slice slice(flurry::core::SliceConfig{}, node.shared);
  const Layout layout;
  const auto n = static_cast<std::uint32_t>(state.range(0));
  std::vector<flurry::proto::Range> ranges(slice.ranges_for(n));
  std::uint64_t now_ms = layout.epoch_ms + 1000;
  std::uint64_t calls = 0;
  for (auto _ : state) {
    if ((++calls & 255) == 0) ++now_ms;
    const flurry::core::Issued issued = slice.issue(n, ranges, now_ms, flurry::core::Source::none());
    benchmark::DoNotOptimize(issued);
    benchmark::DoNotOptimize(ranges.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(calls));
}
BENCHMARK(front_end_slice)->Name("FrontEnd/slice")->Arg(1)->Arg(16)->Arg(1000);

}  // namespace

BENCHMARK_MAIN();
