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
// Time advances 1 unit every 4096 calls so the counter never runs dry and nothing hits the
// ceiling: this measures the fast path.
#include <benchmark/benchmark.h>

#include <sodium.h>

#include <array>
#include <vector>

#include "core/generator.h"
#include "core/handler.h"
#include "core/keys.h"
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

}  // namespace

BENCHMARK_MAIN();
