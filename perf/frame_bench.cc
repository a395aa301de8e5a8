// perf/frame_bench.cc — the DPDK backend's per-frame work, without DPDK (dataplane/frame).
//
//   Checksum/loop16/N     the one's-complement sum the old way: 16-bit big-endian words, one
//                         at a time (the baseline, kept here only to be measured against)
//   Checksum/words64/N    frame::checksum_add (64-bit host-order words, folded once)
//   Frame/get_ids/N       a whole GET_IDS frame for N IDs: Ethernet, IPv4 and UDP checked
//                         (checksums in software, as on a memif or af_packet port), the
//                         handler, the answer's headers and checksums; the request is copied
//                         back into the buffer each round (a 64-byte copy, part of the figure)
//   Frame/get_ids_offload/N  the same with the port verifying and computing the checksums
//   Frame/get_ids_trusted/N  process() with the request's checksums trusted (a net_memif port),
//                         answer checksums in software: the general path as memif_compare runs it
//   Frame/plain/N, Frame/plain_trusted/N, Frame/plain_offload/N  the same three through the fast
//                         path (frame::PlainPath), prepared and finished once a burst of 32
//   Checksum/update       frame::checksum_update (RFC 1624), one 16-bit word changed
// bytes_per_second is over the summed bytes (Checksum) or the request frame (Frame).
#include <benchmark/benchmark.h>

#include <array>
#include <cstring>
#include <vector>

#include "core/handler.h"
#include "dataplane/frame.h"
#include "dataplane/plain_path.h"
#include "proto/wire.h"

namespace {

namespace frame = flurry::dataplane::frame;

std::uint32_t checksum_loop16(std::uint32_t sum, const std::uint8_t* data, std::size_t size) {
  std::uint64_t total = sum;
  std::size_t i = 0;
  for (; i + 1 < size; i += 2) total += (std::uint32_t{data[i]} << 8) | data[i + 1];
  if (i < size) total += std::uint32_t{data[i]} << 8;
  while (total >> 32) total = (total & 0xffffffff) + (total >> 32);
  return static_cast<std::uint32_t>(total);
}

std::vector<std::uint8_t> random_bytes(std::size_t size) {
  std::vector<std::uint8_t> bytes(size);
  std::uint32_t x = 2463534242u;
  for (auto& byte : bytes) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    byte = static_cast<std::uint8_t>(x);
  }
  return bytes;
}

void checksum_loop16_bench(benchmark::State& state) {
  const auto bytes = random_bytes(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(checksum_loop16(0, bytes.data(), bytes.size()));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(checksum_loop16_bench)->Name("Checksum/loop16")->Arg(20)->Arg(64)->Arg(1472);

void checksum_words64_bench(benchmark::State& state) {
  const auto bytes = random_bytes(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(frame::checksum_add(0, bytes));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(checksum_words64_bench)->Name("Checksum/words64")->Arg(20)->Arg(64)->Arg(1472);

constexpr frame::Identity identity{{0x02, 0, 0, 0, 0, 0x01}, 0x0a000001, 7420};
constexpr std::uint32_t peer_ip = 0x0a000002;

void put16(std::uint8_t* at, std::uint16_t value) {
  at[0] = static_cast<std::uint8_t>(value >> 8);
  at[1] = static_cast<std::uint8_t>(value);
}
void put32(std::uint8_t* at, std::uint32_t value) {
  put16(at, static_cast<std::uint16_t>(value >> 16));
  put16(at + 2, static_cast<std::uint16_t>(value));
}

// An Ethernet + IPv4 + UDP frame carrying a GET_IDS request for `count`, checksums correct.
std::vector<std::uint8_t> get_ids_frame(std::uint32_t count) {
  std::array<std::uint8_t, flurry::proto::datagram_size_max> payload{};
  flurry::proto::Request request;
  request.opcode = flurry::proto::Opcode::get_ids;
  request.count = count;
  request.request_id = 7;
  const std::size_t payload_size = flurry::proto::encode_request(request, payload);
  std::vector<std::uint8_t> b(42 + payload_size);
  std::memcpy(b.data(), identity.mac.data(), 6);
  const std::array<std::uint8_t, 6> peer_mac = {0x02, 0, 0, 0, 0, 0x02};
  std::memcpy(b.data() + 6, peer_mac.data(), 6);
  put16(b.data() + 12, frame::ether_type_ipv4);
  b[14] = 0x45;
  put16(b.data() + 16, static_cast<std::uint16_t>(28 + payload_size));
  b[22] = 64;
  b[23] = frame::ip_proto_udp;
  put32(b.data() + 26, peer_ip);
  put32(b.data() + 30, identity.ip);
  put16(b.data() + 24, frame::checksum_finish(frame::checksum_add(0, std::span(b.data() + 14, 20))));
  const auto udp_length = static_cast<std::uint16_t>(8 + payload_size);
  put16(b.data() + 34, 40000);
  put16(b.data() + 36, identity.port);
  put16(b.data() + 38, udp_length);
  std::memcpy(b.data() + 42, payload.data(), payload_size);
  const std::uint32_t sum =
      frame::checksum_add(frame::pseudo_header_sum(peer_ip, identity.ip, frame::ip_proto_udp, udp_length),
                          std::span(b.data() + 34, udp_length));
  put16(b.data() + 40, frame::checksum_finish(sum));
  return b;
}

enum class Setting { software, trusted, offload };

void frame_get_ids(benchmark::State& state, Setting setting) {
  flurry::core::HandlerConfig config;
  flurry::core::WorkerStats stats;
  flurry::core::Handler handler(config, stats);
  handler.start_above(0);
  const auto request = get_ids_frame(static_cast<std::uint32_t>(state.range(0)));
  std::vector<std::uint8_t> buffer(2048);
  frame::RxMeta rx;
  frame::TxOffload tx;
  if (setting != Setting::software) rx = {frame::Checksum::good, frame::Checksum::good};
  if (setting == Setting::offload) tx = {true, true};
  flurry::core::Burst burst{1000, ~std::uint64_t{0} >> 1};
  std::uint64_t calls = 0;
  for (auto _ : state) {
    if ((++calls & 255) == 0) ++burst.now_t;
    std::memcpy(buffer.data(), request.data(), request.size());
    const frame::Result result = frame::process(buffer, request.size(), rx, identity, tx, handler, burst);
    if (result.action != frame::Action::udp_answer) state.SkipWithError("the frame was not answered");
    benchmark::DoNotOptimize(result.length);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(calls));
  state.SetBytesProcessed(static_cast<std::int64_t>(calls * request.size()));
}
BENCHMARK_CAPTURE(frame_get_ids, software, Setting::software)->Name("Frame/get_ids")->Arg(1)->Arg(100);
BENCHMARK_CAPTURE(frame_get_ids, offload, Setting::offload)->Name("Frame/get_ids_offload")->Arg(1)->Arg(100);
BENCHMARK_CAPTURE(frame_get_ids, trusted, Setting::trusted)->Name("Frame/get_ids_trusted")->Arg(1)->Arg(100);

// The fast path over bursts of 32 copies of the request, as a worker runs it.
void frame_plain(benchmark::State& state, Setting setting) {
  flurry::core::HandlerConfig config;
  flurry::core::WorkerStats stats;
  flurry::core::Handler handler(config, stats);
  handler.start_above(0);
  const auto request = get_ids_frame(static_cast<std::uint32_t>(state.range(0)));
  constexpr std::size_t burst_size = 32;
  std::vector<std::vector<std::uint8_t>> buffers(burst_size, std::vector<std::uint8_t>(2048));
  frame::RxMeta rx;
  frame::TxOffload tx;
  if (setting != Setting::software) rx = {frame::Checksum::good, frame::Checksum::good};
  if (setting == Setting::offload) tx = {true, true};
  frame::PlainPath plain(identity, tx);
  flurry::core::Burst burst{1000, ~std::uint64_t{0} >> 1};
  std::uint64_t calls = 0;
  for (auto _ : state) {
    if ((++calls & 7) == 0) ++burst.now_t;
    for (auto& buffer : buffers) std::memcpy(buffer.data(), request.data(), request.size());
    if (!plain.prepare(handler, burst)) state.SkipWithError("no fast path");
    for (auto& buffer : buffers) {
      std::size_t length = plain.answer(buffer, request.size(), rx, handler, burst);
      if (length == 0) {  // two ranges (a count that straddles a unit): the general path, as a worker
        length = frame::process(buffer, request.size(), rx, identity, tx, handler, burst).length;
        if (length == 0) state.SkipWithError("the frame was not answered");
      }
      benchmark::DoNotOptimize(length);
    }
    plain.finish(handler);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(calls * burst_size));
  state.SetBytesProcessed(static_cast<std::int64_t>(calls * burst_size * request.size()));
}
BENCHMARK_CAPTURE(frame_plain, software, Setting::software)->Name("Frame/plain")->Arg(1)->Arg(100);
BENCHMARK_CAPTURE(frame_plain, trusted, Setting::trusted)->Name("Frame/plain_trusted")->Arg(1)->Arg(100);
BENCHMARK_CAPTURE(frame_plain, offload, Setting::offload)->Name("Frame/plain_offload")->Arg(1)->Arg(100);

void checksum_update_bench(benchmark::State& state) {
  std::uint16_t checksum = 0x1234, word = 0;
  for (auto _ : state) {
    checksum = frame::checksum_update(checksum, word, static_cast<std::uint16_t>(word + 1));
    ++word;
    benchmark::DoNotOptimize(checksum);
  }
}
BENCHMARK(checksum_update_bench)->Name("Checksum/update");

}  // namespace

BENCHMARK_MAIN();
