// perf/flurry_bench.cc — `flurry-bench`, the one load generator (closed loop, kernel UDP).
//
// Contract:
//   * Each of --threads threads owns one connected UDP socket and keeps --window GET_IDS
//     requests for --count IDs outstanding against --server. Every request is padded to
//     proto::request_size_for_ids(--count, --ids-per-range), the rule of PROTOCOL.md "How a
//     client asks for N IDs"; there is no other sizing rule here.
//   * Bounded: it stops after --duration-s seconds or --requests requests in all, whichever
//     comes first; a request unanswered for --timeout-ms (checked every timeout / 4) is counted
//     lost and its slot reused.
//   * --seq NAME: GET_SEQ of the named sequence instead of GET_IDS (same sizing; the name
//     rides after the header), so GET_SEQ and GET_IDS can be measured side by side in one run.
//   * --echo: the server is a reflector that bounces the request itself (dpdk-testpmd 5tswap,
//     udp-reflector --echo); the echoed request is the answer, matched by request id. No IDs.
//   * Report (one line, or one JSON object with --json, keys kept stable for its callers):
//     requests/s, IDs/s, latency p50/p99/p99.9/max from send to receipt, lost/retry/late
//     counts, and the client's own CPU use (user + sys over wall time, in cores) so a reader
//     can tell whether the client was the bottleneck.
//   * Exit 0 only if something was answered and no ID came twice (perf/id_ranges.h); 1 on a
//     duplicate, on no answer, or on a socket failure; 2 (or CLI11's code) on bad options.
//   flurry-bench --server 127.0.0.1:7420 --threads 2 --window 16 --count 1 --duration-s 5 [--json]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "perf/id_ranges.h"
#include "proto/wire.h"

namespace {

namespace proto = flurry::proto;
using Clock = std::chrono::steady_clock;

// A request id is thread << 48 | sequence << slot_bits | slot: an answer finds its slot
// without a search, and an answer to an earlier use of the slot does not match.
constexpr unsigned slot_bits = 10;
constexpr unsigned window_max = 1U << slot_bits;
constexpr unsigned threads_max = 64;
constexpr std::uint64_t sequence_mask = (std::uint64_t{1} << (48 - slot_bits)) - 1;
static_assert(threads_max <= (1U << 16), "the thread index fills the top 16 bits");

struct Options {
  std::string server = "127.0.0.1:7420";
  unsigned threads = 1;
  unsigned window = 8;
  std::uint32_t count = 1;
  // PROTOCOL.md's c: 4096 IDs per range is one worker with a 12-bit sequence. A server with
  // smaller ranges answers fewer IDs per request; the bench counts what it gets.
  std::uint32_t ids_per_range = 4096;
  double duration_s = 5;
  std::uint64_t requests = 50'000'000;
  unsigned timeout_ms = 200;
  bool echo = false;
  bool json = false;
  std::string label;
  std::string seq;  // empty: GET_IDS
};

// What a request of `options` carries: GET_IDS, or GET_SEQ with the name.
proto::Request request_of(const Options& options) {
  proto::Request request;
  request.opcode = options.seq.empty() ? proto::Opcode::get_ids : proto::Opcode::get_seq;
  request.count = options.count;
  std::copy(options.seq.begin(), options.seq.end(), request.name.bytes.begin());
  request.name.size = static_cast<std::uint8_t>(options.seq.size());
  return request;
}

// What every thread shares: fixed before the threads start.
struct Plan {
  sockaddr_in server{};
  std::size_t request_size = proto::request_header_size;
  std::uint64_t request_budget = 0;  // per thread
  Clock::time_point deadline;
};

struct Counters {
  std::uint64_t sent = 0;
  std::uint64_t answered = 0;
  std::uint64_t retry = 0;
  std::uint64_t other_status = 0;
  std::uint64_t lost = 0;       // timed out, or the send failed
  std::uint64_t malformed = 0;  // not decodable, or a late answer to a request counted lost

  Counters& operator+=(const Counters& other) {
    sent += other.sent;
    answered += other.answered;
    retry += other.retry;
    other_status += other.other_status;
    lost += other.lost;
    malformed += other.malformed;
    return *this;
  }
};

struct ThreadResult {
  Counters counters;
  std::vector<std::uint32_t> latency_ns;  // capped at 2^32 ns (4.3 s), above timeout_ms_max
  flurry::perf::IdRanges ids;
  std::string error;
};

// ---- options ----

std::optional<int> parse_options(int argc, char** argv, Options& options) {
  CLI::App app{
      "flurry-bench — closed-loop UDP load against flurryd (or a reflector with --echo); "
      "checks every ID for duplicates"};
  app.option_defaults()->always_capture_default();
  app.add_option("--server", options.server, "flurryd ADDR:PORT (IPv4)");
  app.add_option("--threads", options.threads, "client threads, one socket each")
      ->check(CLI::Range(1U, threads_max));
  app.add_option("--window", options.window, "outstanding requests per thread")
      ->check(CLI::Range(1U, window_max));
  app.add_option("--count", options.count, "IDs asked per request")->check(CLI::Range(1U, proto::count_max));
  app.add_option("--ids-per-range", options.ids_per_range,
                 "IDs one range holds on the server (sizes the request padding, PROTOCOL.md)")
      ->check(CLI::Range(1U, proto::count_max));
  app.add_option("--duration-s", options.duration_s, "how long to run")->check(CLI::Range(0.1, 600.0));
  app.add_option("--requests", options.requests, "stop after this many requests in all")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000}));
  app.add_option("--timeout-ms", options.timeout_ms, "a request unanswered this long is lost")
      ->check(CLI::Range(1U, 10'000U));
  app.add_flag("--echo", options.echo,
               "the server bounces the request itself (testpmd 5tswap): no IDs to check");
  app.add_option("--label", options.label, "a name for this run in the output");
  app.add_option("--seq", options.seq,
                 "ask GET_SEQ of this named sequence (flurryctl seq create) instead of GET_IDS")
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            return proto::valid_seq_name(name) ? ""
                                               : "'" + name + "': 1 to 32 characters from A-Z a-z 0-9 _ . -";
          },
          "NAME"));
  app.add_flag("--json", options.json, "print one JSON object");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return std::nullopt;
}

std::optional<sockaddr_in> resolve_server(const std::string& text) {
  sockaddr_in server{};
  server.sin_family = AF_INET;
  const auto colon = text.rfind(':');
  if (colon == std::string::npos ||
      inet_pton(AF_INET, text.substr(0, colon).c_str(), &server.sin_addr) != 1) {
    return std::nullopt;
  }
  unsigned port = 0;
  const char* begin = text.data() + colon + 1;
  const char* end = text.data() + text.size();
  const auto parsed = std::from_chars(begin, end, port);
  if (parsed.ec != std::errc{} || parsed.ptr != end || port == 0 || port > 65535) return std::nullopt;
  server.sin_port = htons(static_cast<std::uint16_t>(port));
  return server;
}

// ---- one thread's closed loop: send / wait / receive / expire ----

class LoadThread {
 public:
  LoadThread(const Options& options, const Plan& plan, unsigned thread_index, ThreadResult& result)
      : options_(options),
        plan_(plan),
        id_base_(std::uint64_t{thread_index} << 48),
        result_(result),
        slots_(options.window) {
    free_slots_.reserve(options.window);
    for (unsigned slot = options.window; slot-- > 0;) free_slots_.push_back(slot);
    result_.latency_ns.reserve(1 << 20);
    result_.ids.reserve(options.echo ? 0 : 1 << 16);
  }
  LoadThread(const LoadThread&) = delete;
  LoadThread& operator=(const LoadThread&) = delete;
  ~LoadThread() {
    if (fd_ >= 0) close(fd_);
  }

  void run();

 private:
  struct Slot {
    std::uint64_t request_id = 0;
    Clock::time_point sent;
    bool busy = false;
  };

  bool open_socket();
  void send_window();
  void wait_readable(Clock::time_point now, Clock::time_point next_expire) const;
  void receive_all();
  void on_datagram(std::span<const std::uint8_t> datagram, Clock::time_point now);
  void record_answer(const proto::ResponseView& view);
  void expire(Clock::time_point now);

  const Options& options_;
  const Plan& plan_;
  const std::uint64_t id_base_;
  ThreadResult& result_;
  int fd_ = -1;
  std::vector<Slot> slots_;
  std::vector<unsigned> free_slots_;  // a stack; never holds more than window entries
  unsigned in_flight_ = 0;
  std::uint64_t attempts_ = 0;  // sent + failed sends, against request_budget
  std::uint64_t sequence_ = 0;
  std::array<std::uint8_t, proto::datagram_size_max> request_{};
  std::array<std::uint8_t, proto::datagram_size_max> answer_{};
};

bool LoadThread::open_socket() {
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || connect(fd_, reinterpret_cast<const sockaddr*>(&plan_.server), sizeof plan_.server) != 0) {
    result_.error = std::string("socket/connect: ") + std::strerror(errno);
    return false;
  }
  const int buffer_bytes = 4 << 20;  // a full window of the largest answers, many times over
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
  return true;
}

void LoadThread::run() {
  if (!open_socket()) return;
  const auto expire_tick = std::max<Clock::duration>(std::chrono::milliseconds(options_.timeout_ms) / 4,
                                                     std::chrono::milliseconds(1));
  auto next_expire = Clock::now() + expire_tick;
  for (auto now = Clock::now(); now < plan_.deadline; now = Clock::now()) {
    send_window();
    if (in_flight_ == 0 && attempts_ >= plan_.request_budget) break;  // budget spent and settled
    wait_readable(Clock::now(), next_expire);
    receive_all();
    now = Clock::now();
    if (now >= next_expire) {
      expire(now);
      next_expire = now + expire_tick;
    }
  }
}

// Fills the window. A failed send leaves its slot free and ends this round, so a refused
// destination costs one send per loop turn, not a spin through the whole budget.
void LoadThread::send_window() {
  proto::Request get = request_of(options_);
  while (!free_slots_.empty() && attempts_ < plan_.request_budget) {
    const unsigned slot_index = free_slots_.back();
    get.request_id = id_base_ | ((sequence_++ & sequence_mask) << slot_bits) | slot_index;
    const std::size_t size = proto::encode_request(get, request_, plan_.request_size);
    ++attempts_;
    if (send(fd_, request_.data(), size, 0) != static_cast<ssize_t>(size)) {
      ++result_.counters.lost;
      return;
    }
    free_slots_.pop_back();
    slots_[slot_index] = {get.request_id, Clock::now(), true};
    ++result_.counters.sent;
    ++in_flight_;
  }
}

// Sleeps until an answer arrives, the next expiry check or the deadline, whichever is first.
void LoadThread::wait_readable(Clock::time_point now, Clock::time_point next_expire) const {
  const auto until = std::min(next_expire, plan_.deadline);
  if (until <= now) return;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(until - now);
  pollfd ready{fd_, POLLIN, 0};
  poll(&ready, 1, static_cast<int>(wait.count()));
}

// Drains what has arrived, at most one window's worth per turn (bounded).
void LoadThread::receive_all() {
  for (unsigned turn = 0; turn < window_max; ++turn) {
    const ssize_t n = recv(fd_, answer_.data(), answer_.size(), MSG_DONTWAIT);
    if (n <= 0) return;  // nothing left, or an ICMP error reported on the connected socket
    on_datagram(std::span<const std::uint8_t>(answer_.data(), static_cast<std::size_t>(n)), Clock::now());
  }
}

void LoadThread::on_datagram(std::span<const std::uint8_t> datagram, Clock::time_point now) {
  proto::ResponseView view;
  std::uint64_t request_id = 0;
  if (options_.echo) {
    const auto echoed = proto::decode_request(datagram);
    if (echoed.error != proto::RequestError::ok) {
      ++result_.counters.malformed;
      return;
    }
    request_id = echoed.request.request_id;
  } else {
    view = proto::decode_response(datagram);
    if (view.error != proto::ResponseError::ok) {
      ++result_.counters.malformed;
      return;
    }
    request_id = view.header.request_id;
  }
  const auto slot_index = static_cast<unsigned>(request_id & (window_max - 1));
  if (slot_index >= slots_.size() || !slots_[slot_index].busy ||
      slots_[slot_index].request_id != request_id) {
    ++result_.counters.malformed;  // a late answer to a request already counted lost
    return;
  }
  Slot& slot = slots_[slot_index];
  slot.busy = false;
  free_slots_.push_back(slot_index);
  --in_flight_;
  ++result_.counters.answered;
  const auto latency = std::chrono::duration_cast<std::chrono::nanoseconds>(now - slot.sent).count();
  result_.latency_ns.push_back(static_cast<std::uint32_t>(std::min<long long>(latency, 0xffffffffLL)));
  if (!options_.echo) record_answer(view);
}

void LoadThread::record_answer(const proto::ResponseView& view) {
  if (view.header.status == proto::Status::retry) {
    ++result_.counters.retry;
    return;
  }
  if (view.header.status != proto::Status::ok) {
    ++result_.counters.other_status;
    return;
  }
  for (std::size_t i = 0; i < view.header.range_count; ++i) {
    const proto::Range range = view.range(i);
    result_.ids.add(range.first, range.count);
  }
}

void LoadThread::expire(Clock::time_point now) {
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  for (unsigned slot_index = 0; slot_index < slots_.size(); ++slot_index) {
    Slot& slot = slots_[slot_index];
    if (!slot.busy || now - slot.sent < timeout) continue;
    slot.busy = false;
    free_slots_.push_back(slot_index);
    --in_flight_;
    ++result_.counters.lost;
  }
}

// ---- all threads, merged ----

struct Run {
  std::vector<ThreadResult> results;
  double elapsed_s = 0;
  double client_cpu_cores = 0;  // user + sys of this process over wall time
};

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

Run run_threads(const Options& options, const sockaddr_in& server) {
  Run run;
  run.results.resize(options.threads);
  const double cpu_before = cpu_seconds();
  const auto started = Clock::now();
  const Plan plan{server, proto::request_size_for_ids(options.count, options.ids_per_range),
                  std::max<std::uint64_t>(1, options.requests / options.threads),
                  started + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(options.duration_s))};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < options.threads; ++t) {
    threads.emplace_back([&options, &plan, &run, t] { LoadThread(options, plan, t, run.results[t]).run(); });
  }
  for (auto& thread : threads) thread.join();
  run.elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
  run.client_cpu_cores = (cpu_seconds() - cpu_before) / run.elapsed_s;
  return run;
}

struct Totals {
  Counters counters;
  std::vector<std::uint32_t> latency_ns;  // sorted
  std::uint64_t ids = 0;
  std::uint64_t duplicates = 0;
  std::string error;  // the first thread's failure
};

Totals merge_results(std::vector<ThreadResult>& results) {
  Totals totals;
  flurry::perf::IdRanges ids;
  for (ThreadResult& result : results) {
    if (totals.error.empty()) totals.error = result.error;
    totals.counters += result.counters;
    totals.latency_ns.insert(totals.latency_ns.end(), result.latency_ns.begin(), result.latency_ns.end());
    result.latency_ns = {};
    ids.append(result.ids);
    result.ids = {};
  }
  std::sort(totals.latency_ns.begin(), totals.latency_ns.end());
  totals.ids = ids.ids();
  totals.duplicates = flurry::perf::count_duplicate_ids(ids.spans());
  return totals;
}

// ---- report ----

double percentile_us(const std::vector<std::uint32_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto index = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1));
  return sorted[index] / 1000.0;
}

nlohmann::json report_json(const Options& options, const Totals& totals, const Run& run) {
  const Counters& c = totals.counters;
  const auto& latency = totals.latency_ns;
  return {
      {"label", options.label},
      {"server", options.server},
      {"threads", options.threads},
      {"window", options.window},
      {"count", options.count},
      {"echo", options.echo},
      {"seq", options.seq},
      {"request_bytes",
       std::max(proto::request_size_for_ids(options.count, options.ids_per_range),
                options.seq.empty() ? std::size_t{0} : proto::request_header_size + 1 + options.seq.size())},
      {"seconds", run.elapsed_s},
      {"requests_sent", c.sent},
      {"requests_answered", c.answered},
      {"requests_per_second", static_cast<double>(c.answered) / run.elapsed_s},
      {"ids", totals.ids},
      {"ids_per_second", static_cast<double>(totals.ids) / run.elapsed_s},
      {"retry", c.retry},
      {"other_status", c.other_status},
      {"lost", c.lost},
      {"malformed_or_late", c.malformed},
      {"p50_us", percentile_us(latency, 0.50)},
      {"p99_us", percentile_us(latency, 0.99)},
      {"p999_us", percentile_us(latency, 0.999)},
      {"max_us", latency.empty() ? 0.0 : latency.back() / 1000.0},
      {"duplicates", totals.duplicates},
      {"client_cpu_cores", run.client_cpu_cores},
  };
}

void print_line(const Options& options, const nlohmann::json& report) {
  fmt::print(
      "{}{} threads x window {}, count {}{}: {:.0f} req/s, {:.0f} IDs/s; latency p50 {:.1f} us, "
      "p99 {:.1f} us, p99.9 {:.1f} us; lost {}, retry {}; {} IDs checked, {} duplicates; "
      "client CPU {:.2f} cores\n",
      options.label.empty() ? "" : options.label + ": ", options.threads, options.window, options.count,
      options.echo ? " (echo)" : "", report["requests_per_second"].get<double>(),
      report["ids_per_second"].get<double>(), report["p50_us"].get<double>(), report["p99_us"].get<double>(),
      report["p999_us"].get<double>(), report["lost"].get<std::uint64_t>(),
      report["retry"].get<std::uint64_t>(), report["ids"].get<std::uint64_t>(),
      report["duplicates"].get<std::uint64_t>(), report["client_cpu_cores"].get<double>());
}

// Prints the report; returns the exit code.
int report(const Options& options, const Totals& totals, const Run& run) {
  const nlohmann::json json = report_json(options, totals, run);
  if (options.json) {
    std::puts(json.dump().c_str());
  } else {
    print_line(options, json);
  }
  if (totals.duplicates != 0) {
    std::fprintf(stderr, "flurry-bench: %llu DUPLICATE IDs\n",
                 static_cast<unsigned long long>(totals.duplicates));
    return 1;
  }
  if (totals.counters.answered == 0) {
    std::fprintf(stderr, "flurry-bench: no answer from %s\n", options.server.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (const auto exit_code = parse_options(argc, argv, options)) return *exit_code;
  const auto server = resolve_server(options.server);
  if (!server) {
    std::fprintf(stderr, "flurry-bench: --server '%s' must be IPv4ADDR:PORT (port 1..65535)\n",
                 options.server.c_str());
    return 2;
  }
  Run run = run_threads(options, *server);
  const Totals totals = merge_results(run.results);
  if (!totals.error.empty()) {
    std::fprintf(stderr, "flurry-bench: %s\n", totals.error.c_str());
    return 1;
  }
  return report(options, totals, run);
}
