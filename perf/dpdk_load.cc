// perf/dpdk_load.cc — closed-loop UDP load for perf/veth_compare: requests/s and latency
// percentiles against a flurry server, or against a reflector (dpdk-testpmd 5tswap) that
// sends each request straight back (--echo).
//
//   dpdk_load --server IP:PORT [--threads N] [--window W] [--seconds S] [--count C] [--echo]
//
// Each thread owns one connected UDP socket and keeps W requests in flight (GET_IDS for C IDs
// each); an answer (or, with --echo, the echoed request) is matched by request id, its round
// trip recorded, and the next request sent. A request unanswered for 200 ms is counted lost
// and replaced. Bounded by --seconds. Every ID received is checked for duplicates (ranges
// sorted, overlaps counted). Prints one JSON line: requests_per_s, p50/p99/p999 in
// microseconds, lost, duplicates, and the client's CPU use (user+sys over wall time, in
// cores) so a reader can tell whether the client was the bottleneck.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "proto/wire.h"

namespace {

namespace proto = flurry::proto;

using Clock = std::chrono::steady_clock;
constexpr std::size_t window_max = 256;
constexpr auto lost_after = std::chrono::milliseconds(200);

struct Args {
  sockaddr_in server{};
  unsigned threads = 1;
  unsigned window = 16;
  double seconds = 5;
  std::uint32_t count = 1;
  bool echo = false;
};

struct ThreadResult {
  std::vector<std::uint32_t> latencies_ns;  // capped at 2^32 ns (4.3 s), far above lost_after
  std::vector<proto::Range> ranges;
  std::uint64_t sent = 0;
  std::uint64_t lost = 0;
  std::uint64_t bad = 0;  // not decodable / not ours / not OK
  std::uint64_t retry = 0;
  std::string error;
};

struct Slot {
  std::uint64_t request_id = 0;
  Clock::time_point sent_at;
  bool busy = false;
};

void run_thread(const Args& args, unsigned index, const std::atomic<bool>& stop, ThreadResult* result) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&args.server), sizeof args.server) != 0) {
    result->error = std::string("socket/connect: ") + std::strerror(errno);
    if (fd >= 0) close(fd);
    return;
  }
  result->latencies_ns.reserve(8'000'000 / args.threads);
  result->ranges.reserve(args.echo ? 0 : 8'000'000 / args.threads);
  std::array<Slot, window_max> slots{};
  std::uint64_t next_id = (std::uint64_t{index} << 48) | 1;
  std::array<std::uint8_t, proto::datagram_size_max> buffer{};
  const std::size_t request_size = proto::request_size_for_ranges(3);

  const auto send_slot = [&](Slot& slot) {
    proto::Request request;
    request.opcode = proto::Opcode::get_ids;
    request.count = args.count;
    request.request_id = next_id++;
    std::array<std::uint8_t, proto::datagram_size_max> out{};
    const std::size_t size = proto::encode_request(request, out, request_size);
    slot.request_id = request.request_id;
    slot.sent_at = Clock::now();
    slot.busy = true;
    ++result->sent;
    if (send(fd, out.data(), size, 0) < 0) ++result->lost, slot.busy = false;
  };
  for (unsigned i = 0; i < args.window; ++i) send_slot(slots[i]);

  while (!stop.load(std::memory_order_relaxed)) {
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, 20);
    const auto now = Clock::now();
    if (ready > 0) {
      // Drain what is there.
      for (;;) {
        const ssize_t n = recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
        if (n <= 0) break;
        const auto received_at = Clock::now();
        std::uint64_t id = 0;
        const std::span<const std::uint8_t> datagram(buffer.data(), static_cast<std::size_t>(n));
        proto::ResponseView view;
        if (args.echo) {
          if (n < static_cast<ssize_t>(proto::request_header_size)) { ++result->bad; continue; }
          id = proto::load_be<std::uint64_t>(buffer.data() + proto::request_offset::request_id);
        } else {
          view = proto::decode_response(datagram);
          if (view.error != proto::ResponseError::ok) { ++result->bad; continue; }
          id = view.header.request_id;
        }
        Slot* slot = nullptr;
        for (unsigned i = 0; i < args.window; ++i) {
          if (slots[i].busy && slots[i].request_id == id) { slot = &slots[i]; break; }
        }
        if (slot == nullptr) { ++result->bad; continue; }  // late answer to a request given up
        if (!args.echo) {
          if (view.header.status == proto::Status::retry) {
            ++result->retry;
          } else if (view.header.status != proto::Status::ok) {
            ++result->bad;
          } else {
            for (std::size_t r = 0; r < view.header.range_count; ++r) result->ranges.push_back(view.range(r));
          }
        }
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(received_at - slot->sent_at).count();
        result->latencies_ns.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(ns, UINT32_MAX)));
        send_slot(*slot);
      }
    }
    for (unsigned i = 0; i < args.window; ++i) {
      if (!slots[i].busy || now - slots[i].sent_at > lost_after) {
        if (slots[i].busy) ++result->lost;
        send_slot(slots[i]);
      }
    }
  }
  close(fd);
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

int usage(const char* text) {
  std::fprintf(stderr, "dpdk_load: %s\nusage: dpdk_load --server IP:PORT [--threads N] [--window W] "
               "[--seconds S] [--count C] [--echo]\n", text);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  std::string server;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (flag == "--server") server = value();
    else if (flag == "--threads") args.threads = static_cast<unsigned>(std::stoul(value()));
    else if (flag == "--window") args.window = static_cast<unsigned>(std::stoul(value()));
    else if (flag == "--seconds") args.seconds = std::stod(value());
    else if (flag == "--count") args.count = static_cast<std::uint32_t>(std::stoul(value()));
    else if (flag == "--echo") args.echo = true;
    else return usage(("unknown argument " + flag).c_str());
  }
  const auto colon = server.rfind(':');
  args.server.sin_family = AF_INET;
  if (colon == std::string::npos || inet_pton(AF_INET, server.substr(0, colon).c_str(), &args.server.sin_addr) != 1) {
    return usage("--server IP:PORT is required");
  }
  args.server.sin_port = htons(static_cast<std::uint16_t>(std::stoul(server.substr(colon + 1))));
  if (args.threads == 0 || args.threads > 64 || args.window == 0 || args.window > window_max ||
      args.seconds <= 0 || args.seconds > 600 || args.count == 0) {
    return usage("--threads 1..64, --window 1..256, --seconds (0, 600], --count >= 1");
  }

  std::vector<ThreadResult> results(args.threads);
  std::atomic<bool> stop{false};
  const double cpu_before = cpu_seconds();
  const auto started = Clock::now();
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < args.threads; ++t) {
    threads.emplace_back(run_thread, std::cref(args), t, std::cref(stop), &results[t]);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(args.seconds));
  stop = true;
  for (auto& thread : threads) thread.join();
  const double wall_s = std::chrono::duration<double>(Clock::now() - started).count();
  const double cpu_cores = (cpu_seconds() - cpu_before) / wall_s;

  std::vector<std::uint32_t> latencies;
  std::vector<proto::Range> ranges;
  std::uint64_t sent = 0, lost = 0, bad = 0, retry = 0;
  std::string error;
  for (auto& r : results) {
    latencies.insert(latencies.end(), r.latencies_ns.begin(), r.latencies_ns.end());
    ranges.insert(ranges.end(), r.ranges.begin(), r.ranges.end());
    sent += r.sent, lost += r.lost, bad += r.bad, retry += r.retry;
    if (error.empty()) error = r.error;
  }
  std::sort(latencies.begin(), latencies.end());
  const auto percentile_us = [&](double p) {
    if (latencies.empty()) return 0.0;
    const auto index = static_cast<std::size_t>(p * static_cast<double>(latencies.size() - 1));
    return latencies[index] / 1000.0;
  };
  std::sort(ranges.begin(), ranges.end(), [](const proto::Range& a, const proto::Range& b) { return a.first < b.first; });
  std::uint64_t ids = 0, overlaps = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    ids += ranges[i].count;
    if (i > 0 && ranges[i - 1].first + ranges[i - 1].count > ranges[i].first) ++overlaps;
  }
  std::printf("{\"answers\": %zu, \"requests_per_s\": %.0f, \"p50_us\": %.1f, \"p99_us\": %.1f, "
              "\"p999_us\": %.1f, \"sent\": %llu, \"lost\": %llu, \"bad\": %llu, \"retry\": %llu, "
              "\"ids\": %llu, \"duplicates\": %llu, \"client_cpu_cores\": %.2f, \"seconds\": %.2f, "
              "\"error\": \"%s\"}\n",
              latencies.size(), static_cast<double>(latencies.size()) / wall_s, percentile_us(0.50),
              percentile_us(0.99), percentile_us(0.999), static_cast<unsigned long long>(sent),
              static_cast<unsigned long long>(lost), static_cast<unsigned long long>(bad),
              static_cast<unsigned long long>(retry), static_cast<unsigned long long>(ids),
              static_cast<unsigned long long>(overlaps), cpu_cores, wall_s, error.c_str());
  return overlaps == 0 && error.empty() ? 0 : 1;
}
