// perf/forms_bench.cc — the ID forms of client/forms.h, per ID, no I/O.
//
//   Forms/base32          format one ID as 13 Crockford chars
//   Forms/readable        format one ID as TIME TAG REST (gmtime_r per ID)
//   Forms/opaque_encrypt  the keyed permutation alone (10 SipHash-2-4 rounds)
//   Forms/opaque_format   key id + base32 of the permuted ID
//   Forms/opaque_parse    an opaque string back to the ID
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <span>

#include "client/forms.h"

namespace {

namespace forms = flurry::client::forms;

constexpr std::uint64_t first_id = 4194324487ULL;

forms::OpaqueKey bench_key() {
  std::array<std::uint8_t, forms::opaque_secret_size> secret{};
  for (std::size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<std::uint8_t>(i);
  return *forms::OpaqueKey::create("k1", secret);
}

// Formats consecutive IDs with `format(id, text)` (returns a Result<std::size_t>).
template <typename Format>
void format_loop(benchmark::State& state, Format&& format) {
  std::array<char, forms::text_size_max> text{};
  std::uint64_t id = first_id;
  for (auto _ : state) {
    auto n = format(id++, text);
    benchmark::DoNotOptimize(n);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void base32(benchmark::State& state) {
  format_loop(state, [](std::uint64_t id, std::span<char> text) { return forms::format_base32(id, text); });
}
BENCHMARK(base32)->Name("Forms/base32");

void readable(benchmark::State& state) {
  const forms::ReadableForm form = *forms::ReadableForm::create(flurry::proto::Layout{});
  format_loop(state,
              [&form](std::uint64_t id, std::span<char> text) { return form.format(id, "ORD", text); });
}
BENCHMARK(readable)->Name("Forms/readable");

void opaque_encrypt(benchmark::State& state) {
  const forms::OpaqueKey key = bench_key();
  std::uint64_t id = first_id;
  for (auto _ : state) benchmark::DoNotOptimize(key.encrypt(id++));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(opaque_encrypt)->Name("Forms/opaque_encrypt");

void opaque_format(benchmark::State& state) {
  const forms::OpaqueKey key = bench_key();
  format_loop(state, [&key](std::uint64_t id, std::span<char> text) { return key.format(id, text); });
}
BENCHMARK(opaque_format)->Name("Forms/opaque_format");

void opaque_parse(benchmark::State& state) {
  const forms::OpaqueKey key = bench_key();
  std::array<char, forms::text_size_max> text{};
  const std::size_t n = *key.format(first_id, text);
  for (auto _ : state) {
    auto id = forms::parse_opaque(key, {text.data(), n});
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(opaque_parse)->Name("Forms/opaque_parse");

}  // namespace

BENCHMARK_MAIN();
