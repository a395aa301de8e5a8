// perf/client_bench.cc — the C++ client as an application sees it, against an in-process
// server that runs the real request handler on 127.0.0.1 (tests/client/test_server.h).
//
//   Client/next_prefetched/P   ns per next() with a prefetch buffer of P IDs: the common case
//                              is a pop from the local buffer (a background thread refills it)
//   Client/next_round_trip     ns per next() without prefetch: one request and answer each
//   Client/next_round_trip_polled  the same with Options::poll 200 µs: the client looks for
//                              the answer without sleeping (no wakeup on its side)
//   Client/get/N               ns per get(N) (one exchange for N IDs; items = IDs)
// Every ID a run received is checked for duplicates; a duplicate fails the run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "client/client.h"
#include "tests/client/test_server.h"

namespace {

using flurry::client::Client;
using flurry::client::Error;
using flurry::client::Options;
using flurry::client::testing::TestServer;

std::unique_ptr<Client> connect(const TestServer& server, std::size_t prefetch,
                                std::chrono::microseconds poll = std::chrono::microseconds{0}) {
  Options options;
  options.servers = {server.address()};
  options.prefetch = prefetch;
  options.poll = poll;
  Error error;
  auto client = Client::create(options, &error);
  if (!client) std::fprintf(stderr, "client_bench: %s\n", error.message.c_str());
  return client;
}

// Fails the run if `ids` holds an ID twice.
void check_unique(benchmark::State& state, std::vector<std::uint64_t>& ids) {
  std::sort(ids.begin(), ids.end());
  const auto duplicates = static_cast<double>(ids.end() - std::unique(ids.begin(), ids.end()));
  state.counters["ids_checked"] = static_cast<double>(ids.size());
  state.counters["duplicates"] = duplicates;
  if (duplicates > 0) state.SkipWithError("duplicate IDs");
}

void next_ids(benchmark::State& state, std::size_t prefetch,
              std::chrono::microseconds poll = std::chrono::microseconds{0}) {
  TestServer server;
  server.raise_ceiling();
  auto client = connect(server, prefetch, poll);
  if (!client) {
    state.SkipWithError("cannot create the client");
    return;
  }
  std::vector<std::uint64_t> ids;
  ids.reserve(1 << 24);
  Error error;
  for (auto _ : state) {
    const auto id = client->next(&error);
    if (!id) {
      state.SkipWithError(error.message.c_str());
      break;
    }
    if (ids.size() < ids.capacity()) ids.push_back(*id);  // the check covers the first 16M
  }
  state.SetItemsProcessed(state.iterations());
  check_unique(state, ids);
}

void next_prefetched(benchmark::State& state) { next_ids(state, static_cast<std::size_t>(state.range(0))); }
BENCHMARK(next_prefetched)->Name("Client/next_prefetched")->Arg(4096)->Arg(65536)->UseRealTime();

void next_round_trip(benchmark::State& state) { next_ids(state, 0); }
BENCHMARK(next_round_trip)->Name("Client/next_round_trip")->UseRealTime();

void next_round_trip_polled(benchmark::State& state) { next_ids(state, 0, std::chrono::microseconds{200}); }
BENCHMARK(next_round_trip_polled)->Name("Client/next_round_trip_polled")->UseRealTime();

void get_many(benchmark::State& state) {
  TestServer server;
  server.raise_ceiling();
  auto client = connect(server, 0);
  if (!client) {
    state.SkipWithError("cannot create the client");
    return;
  }
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<std::uint64_t> ids;
  ids.reserve(1 << 24);
  Error error;
  for (auto _ : state) {
    if (ids.size() + n > ids.capacity()) ids.clear();  // bounded; checked per 16M
    if (!client->get(n, ids, &error)) {
      state.SkipWithError(error.message.c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
  check_unique(state, ids);
}
BENCHMARK(get_many)->Name("Client/get")->Arg(1)->Arg(100)->Arg(4096)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
