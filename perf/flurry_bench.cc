// perf/flurry_bench.cc — `flurry-bench`, the load generator.
//
// Closed loop: each of --threads threads owns one UDP socket and keeps --window GET_IDS
// requests outstanding against --server, for --duration-s seconds or --requests requests in
// all, whichever ends first (both bounded). It measures requests/s, IDs/s and the latency
// distribution (p50/p99/p99.9, from send to receipt), and checks every ID it received for
// duplicates (exit 1 if any, or if nothing was answered). Requests unanswered for
// --timeout-ms are counted as lost and replaced.
//   flurry-bench --server 127.0.0.1:7420 --threads 2 --window 16 --count 1 --duration-s 5 [--json]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "proto/wire.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string server = "127.0.0.1:7420";
  unsigned threads = 1;
  unsigned window = 8;
  std::uint32_t count = 1;
  double duration_s = 5;
  std::uint64_t requests = 50'000'000;
  unsigned timeout_ms = 200;
  bool json = false;
  std::string label;
};

struct ThreadResult {
  std::uint64_t sent = 0;
  std::uint64_t answered = 0;
  std::uint64_t retry = 0;
  std::uint64_t other_status = 0;
  std::uint64_t lost = 0;
  std::uint64_t malformed = 0;
  std::uint64_t ids = 0;
  std::vector<std::uint32_t> latency_ns;
  std::vector<flurry::proto::Range> ranges;
  std::string error;
};

constexpr std::size_t slots = 4096;  // > window_max, so request ids map to distinct slots

struct Outstanding {
  std::uint64_t request_id = 0;
  Clock::time_point sent;
  bool busy = false;
};

void run_thread(const Options& options, const sockaddr_in& server, std::uint64_t request_budget,
                Clock::time_point deadline, unsigned thread_index, ThreadResult* result) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) != 0) {
    result->error = std::string("socket/connect: ") + std::strerror(errno);
    if (fd >= 0) close(fd);
    return;
  }
  const int buffer_bytes = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
  std::vector<Outstanding> outstanding(slots);
  std::array<std::uint8_t, flurry::proto::datagram_size_max> request{};
  std::array<std::uint8_t, flurry::proto::datagram_size_max> answer{};
  const std::size_t padded =
      flurry::proto::request_size_for_ranges(std::min<std::size_t>(121, (options.count + 4095) / 4096 + 1));
  std::uint64_t next_seq = 0;
  unsigned in_flight = 0;
  const std::uint64_t id_base = static_cast<std::uint64_t>(thread_index) << 48;
  result->latency_ns.reserve(1 << 20);

  auto send_one = [&] {
    const std::uint64_t seq = next_seq++;
    flurry::proto::Request get;
    get.opcode = flurry::proto::Opcode::get_ids;
    get.count = options.count;
    get.request_id = id_base | seq;
    const std::size_t size = flurry::proto::encode_request(get, request, padded);
    Outstanding& slot = outstanding[seq % slots];
    slot = {get.request_id, Clock::now(), true};
    if (send(fd, request.data(), size, 0) == static_cast<ssize_t>(size)) {
      ++result->sent;
      ++in_flight;
    } else {
      slot.busy = false;
      ++result->lost;
    }
  };

  while (Clock::now() < deadline) {
    while (in_flight < options.window && result->sent + result->lost < request_budget) send_one();
    if (in_flight == 0) break;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(options.timeout_ms));
    const auto now = Clock::now();
    if (ready <= 0) {
      // Everything outstanding is older than the timeout: count it lost, start over.
      for (auto& slot : outstanding) {
        if (slot.busy && now - slot.sent >= std::chrono::milliseconds(options.timeout_ms)) {
          slot.busy = false;
          --in_flight;
          ++result->lost;
        }
      }
      continue;
    }
    for (;;) {
      const ssize_t n = recv(fd, answer.data(), answer.size(), MSG_DONTWAIT);
      if (n <= 0) break;
      const auto view = flurry::proto::decode_response(std::span<const std::uint8_t>(answer.data(), static_cast<std::size_t>(n)));
      if (view.error != flurry::proto::ResponseError::ok) {
        ++result->malformed;
        continue;
      }
      Outstanding& slot = outstanding[(view.header.request_id & 0xffffffffffffULL) % slots];
      if (!slot.busy || slot.request_id != view.header.request_id) {
        ++result->malformed;  // late answer to a request already counted lost
        continue;
      }
      slot.busy = false;
      --in_flight;
      const auto latency = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - slot.sent).count();
      result->latency_ns.push_back(static_cast<std::uint32_t>(std::min<long long>(latency, 0xffffffffLL)));
      ++result->answered;
      if (view.header.status == flurry::proto::Status::retry) {
        ++result->retry;
      } else if (view.header.status != flurry::proto::Status::ok) {
        ++result->other_status;
      } else {
        for (std::size_t i = 0; i < view.header.range_count; ++i) {
          const auto range = view.range(i);
          result->ranges.push_back(range);
          result->ids += range.count;
        }
      }
    }
  }
  close(fd);
}

double percentile(const std::vector<std::uint32_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto index = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1));
  return sorted[index] / 1000.0;  // microseconds
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"flurry-bench — closed-loop UDP load against flurryd; checks every ID for duplicates"};
  app.option_defaults()->always_capture_default();
  app.add_option("--server", options.server, "flurryd ADDR:PORT (IPv4)");
  app.add_option("--threads", options.threads, "client threads, one socket each")->check(CLI::Range(1U, 64U));
  app.add_option("--window", options.window, "outstanding requests per thread")->check(CLI::Range(1U, 1024U));
  app.add_option("--count", options.count, "IDs asked per request")->check(CLI::Range(1U, flurry::proto::count_max));
  app.add_option("--duration-s", options.duration_s, "how long to run")->check(CLI::Range(0.1, 600.0));
  app.add_option("--requests", options.requests, "stop after this many requests in all")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000}));
  app.add_option("--timeout-ms", options.timeout_ms, "a request unanswered this long is lost")->check(CLI::Range(1U, 10'000U));
  app.add_option("--label", options.label, "a name for this run in the output");
  app.add_flag("--json", options.json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  sockaddr_in server{};
  server.sin_family = AF_INET;
  const auto colon = options.server.rfind(':');
  if (colon == std::string::npos ||
      inet_pton(AF_INET, options.server.substr(0, colon).c_str(), &server.sin_addr) != 1) {
    std::fprintf(stderr, "flurry-bench: --server '%s' must be IPv4ADDR:PORT\n", options.server.c_str());
    return 2;
  }
  server.sin_port = htons(static_cast<std::uint16_t>(std::stoi(options.server.substr(colon + 1))));

  std::vector<ThreadResult> results(options.threads);
  std::vector<std::thread> threads;
  const auto started = Clock::now();
  const auto deadline = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.duration_s));
  const std::uint64_t budget = std::max<std::uint64_t>(1, options.requests / options.threads);
  for (unsigned t = 0; t < options.threads; ++t) {
    threads.emplace_back(run_thread, std::cref(options), std::cref(server), budget, deadline, t, &results[t]);
  }
  for (auto& thread : threads) thread.join();
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();

  ThreadResult total;
  std::vector<std::uint32_t> latency;
  std::vector<std::uint64_t> ids;
  for (auto& r : results) {
    if (!r.error.empty()) {
      std::fprintf(stderr, "flurry-bench: %s\n", r.error.c_str());
      return 1;
    }
    total.sent += r.sent;
    total.answered += r.answered;
    total.retry += r.retry;
    total.other_status += r.other_status;
    total.lost += r.lost;
    total.malformed += r.malformed;
    total.ids += r.ids;
    latency.insert(latency.end(), r.latency_ns.begin(), r.latency_ns.end());
    for (const auto& range : r.ranges) {
      for (std::uint32_t k = 0; k < range.count; ++k) ids.push_back(range.first + k);
    }
  }
  std::sort(latency.begin(), latency.end());
  std::sort(ids.begin(), ids.end());
  const std::uint64_t duplicates =
      static_cast<std::uint64_t>(ids.size() - static_cast<std::size_t>(std::unique(ids.begin(), ids.end()) - ids.begin()));

  nlohmann::json report = {
      {"label", options.label},
      {"server", options.server},
      {"threads", options.threads},
      {"window", options.window},
      {"count", options.count},
      {"seconds", elapsed_s},
      {"requests_sent", total.sent},
      {"requests_answered", total.answered},
      {"requests_per_second", static_cast<double>(total.answered) / elapsed_s},
      {"ids", total.ids},
      {"ids_per_second", static_cast<double>(total.ids) / elapsed_s},
      {"retry", total.retry},
      {"other_status", total.other_status},
      {"lost", total.lost},
      {"malformed_or_late", total.malformed},
      {"p50_us", percentile(latency, 0.50)},
      {"p99_us", percentile(latency, 0.99)},
      {"p999_us", percentile(latency, 0.999)},
      {"max_us", latency.empty() ? 0.0 : latency.back() / 1000.0},
      {"duplicates", duplicates},
  };
  if (options.json) {
    std::puts(report.dump().c_str());
  } else {
    fmt::print("{}{} threads x window {}, count {}: {:.0f} req/s, {:.0f} IDs/s; latency p50 {:.1f} us, p99 {:.1f} us, "
               "p99.9 {:.1f} us; lost {}, retry {}; {} IDs checked, {} duplicates\n",
               options.label.empty() ? "" : options.label + ": ", options.threads, options.window, options.count,
               report["requests_per_second"].get<double>(), report["ids_per_second"].get<double>(),
               report["p50_us"].get<double>(), report["p99_us"].get<double>(), report["p999_us"].get<double>(),
               total.lost, total.retry, ids.size(), duplicates);
  }
  if (duplicates != 0) {
    std::fprintf(stderr, "flurry-bench: %llu DUPLICATE IDs\n", static_cast<unsigned long long>(duplicates));
    return 1;
  }
  if (total.answered == 0) {
    std::fprintf(stderr, "flurry-bench: no answer from %s\n", options.server.c_str());
    return 1;
  }
  return 0;
}
