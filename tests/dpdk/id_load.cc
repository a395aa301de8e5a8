// tests/dpdk/id_load.cc — fetches IDs from a server with several threads through the client
// library (flurry::client::Client, one per thread) and checks every one of them.
//
//   id_load --server 10.77.0.1:7420 --ids 1000000 --threads 4 [--per-request 16]
//           [--seconds 60] [--out FILE] [--above FILE]... [--tolerate-failure]
//           [--timeout-ms 200] [--attempts 10]
//
// Bounded in count (--ids) and time (--seconds). Checks: all IDs unique (sorted, every
// neighbour compared), and with --above FILE every ID is above every ID in FILE (IDs from an
// earlier run of the server, e.g. before a kill -9) and none repeats one of them. --out
// writes the IDs received (uint64 little-endian) for a later --above. Prints one JSON line.
// Exit 0: checks passed and --ids reached (or, with --tolerate-failure, the server stopped
// answering: what arrived is still checked and written). The generous default timeout and
// attempts ride out scheduling stalls of a busy CI machine (2 CPUs shared with a
// busy-polling DPDK worker): an answer that comes late is not a lost one. Exit 1: a duplicate or an ID not
// above the earlier ones. Exit 2: usage. Exit 3: too few IDs.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string server;
  std::uint64_t ids = 1'000'000;
  unsigned threads = 4;
  std::uint32_t per_request = 16;
  double seconds = 60;
  std::string out;
  std::vector<std::string> above;
  bool tolerate_failure = false;
  unsigned timeout_ms = 200;
  unsigned attempts = 10;
};

int usage(const char* message) {
  std::fprintf(stderr,
               "id_load: %s\nusage: id_load --server HOST:PORT [--ids N] [--threads N] "
               "[--per-request N] [--seconds S] [--out FILE] [--above FILE]... [--tolerate-failure] "
               "[--timeout-ms MS] [--attempts N]\n",
               message);
  return 2;
}

bool read_ids(const std::string& path, std::vector<std::uint64_t>* ids) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::uint64_t id = 0;
  while (in.read(reinterpret_cast<char*>(&id), sizeof id)) ids->push_back(id);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (flag == "--server")
      args.server = value();
    else if (flag == "--ids")
      args.ids = std::stoull(value());
    else if (flag == "--threads")
      args.threads = static_cast<unsigned>(std::stoul(value()));
    else if (flag == "--per-request")
      args.per_request = static_cast<std::uint32_t>(std::stoul(value()));
    else if (flag == "--seconds")
      args.seconds = std::stod(value());
    else if (flag == "--out")
      args.out = value();
    else if (flag == "--above")
      args.above.push_back(value());
    else if (flag == "--tolerate-failure")
      args.tolerate_failure = true;
    else if (flag == "--timeout-ms")
      args.timeout_ms = static_cast<unsigned>(std::stoul(value()));
    else if (flag == "--attempts")
      args.attempts = static_cast<unsigned>(std::stoul(value()));
    else
      return usage(("unknown argument " + flag).c_str());
  }
  if (args.server.empty()) return usage("--server is required");
  if (args.threads == 0 || args.threads > 64 || args.per_request == 0 || args.ids == 0) {
    return usage("--threads 1..64, --per-request >= 1, --ids >= 1");
  }

  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(args.seconds));
  std::vector<std::vector<std::uint64_t>> per_thread(args.threads);
  std::vector<std::string> errors(args.threads);
  std::atomic<std::uint64_t> claimed{0};
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> retries{0};
  std::atomic<std::uint64_t> timeouts{0};
  const auto started = Clock::now();
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < args.threads; ++t) {
    threads.emplace_back([&, t] {
      flurry::client::Options options;
      options.servers = {args.server};
      options.ids_per_request = args.per_request;
      options.timeout = std::chrono::milliseconds(args.timeout_ms);
      options.attempts = args.attempts;
      flurry::client::Error error;
      auto client = flurry::client::Client::create(options, &error);
      if (!client) {
        errors[t] = error.message;
        return;
      }
      std::vector<std::uint64_t>& ids = per_thread[t];
      ids.reserve(args.ids / args.threads + args.per_request);
      while (Clock::now() < deadline) {
        const std::uint64_t before = claimed.fetch_add(args.per_request);
        if (before >= args.ids) break;
        const std::uint64_t n = std::min<std::uint64_t>(args.per_request, args.ids - before);
        if (!client->get(n, ids, &error)) {
          errors[t] = error.message;
          break;
        }
      }
      const auto counters = client->counters();
      requests += counters.requests;
      retries += counters.retries;
      timeouts += counters.timeouts;
    });
  }
  for (auto& thread : threads) thread.join();
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();

  std::vector<std::uint64_t> all;
  for (auto& ids : per_thread) all.insert(all.end(), ids.begin(), ids.end());
  if (!args.out.empty()) {
    std::ofstream out(args.out, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(all.data()),
              static_cast<std::streamsize>(all.size() * sizeof(std::uint64_t)));
  }
  std::sort(all.begin(), all.end());
  std::uint64_t duplicates = 0;
  for (std::size_t i = 1; i < all.size(); ++i) duplicates += all[i] == all[i - 1];

  std::uint64_t earlier_count = 0;
  std::uint64_t not_above = 0;
  std::uint64_t earlier_max = 0;
  for (const auto& path : args.above) {
    std::vector<std::uint64_t> earlier;
    if (!read_ids(path, &earlier)) return usage(("cannot read " + path).c_str());
    earlier_count += earlier.size();
    for (const std::uint64_t id : earlier) earlier_max = std::max(earlier_max, id);
  }
  if (earlier_count != 0) {
    for (const std::uint64_t id : all) not_above += id <= earlier_max;
  }

  std::string first_error;
  unsigned failed_threads = 0;
  for (const auto& e : errors) {
    if (!e.empty()) {
      ++failed_threads;
      if (first_error.empty()) first_error = e;
    }
  }
  for (char& c : first_error) {
    if (c == '"' || c == '\\') c = '\'';
  }
  std::printf(
      "{\"ids\": %zu, \"unique\": %s, \"duplicates\": %llu, \"earlier_ids\": %llu, "
      "\"not_above_earlier\": %llu, \"min\": %llu, \"max\": %llu, \"seconds\": %.3f, "
      "\"ids_per_s\": %.0f, \"requests\": %llu, \"retries\": %llu, \"timeouts\": %llu, "
      "\"failed_threads\": %u, \"error\": \"%s\"}\n",
      all.size(), duplicates == 0 ? "true" : "false", static_cast<unsigned long long>(duplicates),
      static_cast<unsigned long long>(earlier_count), static_cast<unsigned long long>(not_above),
      static_cast<unsigned long long>(all.empty() ? 0 : all.front()),
      static_cast<unsigned long long>(all.empty() ? 0 : all.back()), elapsed_s,
      elapsed_s > 0 ? static_cast<double>(all.size()) / elapsed_s : 0.0,
      static_cast<unsigned long long>(requests.load()), static_cast<unsigned long long>(retries.load()),
      static_cast<unsigned long long>(timeouts.load()), failed_threads, first_error.c_str());
  if (duplicates != 0 || not_above != 0) return 1;
  if (all.size() < args.ids && !(args.tolerate_failure && failed_threads != 0)) return 3;
  return 0;
}
