// perf/peer_bench.cc — `peer-bench`, the load generator for the peers flurry is compared with:
// a counter on a TCP server that speaks RESP (Redis INCR/INCRBY, also flurryd's RESP front
// end) or memcached's text protocol (incr; also flurryd's memcached front end, whose `get`
// of --count keys, katsubushi's `get id`, --command get measures), or an HTTP/1.1 GET on a
// keep-alive connection whose answer is one number (flurryd's HTTP front end with
// format=text, and perf/http_baseline: the same library answering a counter, nothing else).
//
// Contract:
//   * --connections TCP connections, spread over --threads threads; each keeps --pipeline
//     requests in flight (1: one request, one answer; more: pipelined, as a pipelining Redis
//     client does). In flight in all = connections x pipeline, the figure to set equal to
//     flurry-bench's threads x window for a fair comparison.
//   * Every answer is the counter's new value v; a request for n (INCR for 1, else INCRBY n;
//     memcached: incr k n) owns the
//     IDs (v - n, v]. With --command get (memcached only), a request is `get KEY KEY ...` of
//     --count keys and its answer the VALUE lines of --count IDs, then END. Every ID is checked
//     for duplicates (perf/id_ranges.h), as flurry-bench does for flurryd's, so a peer's
//     figures come with the same check. A refusal to ask again (flurryd's SERVER_ERROR or
//     -TRYAGAIN: its ceiling, a sequence's block on its way) is counted as refused, not as an
//     answer or an error; anything else that is not a number is an error.
//   * Latency from send to answer in perf/histogram.h; answers on one connection come in order,
//     so each connection keeps its send times in a FIFO ring.
//   * Bounded: --duration-s; one JSON object (--json) with flurry-bench's keys.
//   peer-bench --protocol resp --server 127.0.0.1:6379 --connections 16 --pipeline 16 --count 1
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/cli.h"
#include "perf/bench_util.h"
#include "perf/histogram.h"
#include "perf/id_ranges.h"

namespace cli = flurry::cli;

namespace {

using Clock = std::chrono::steady_clock;
using flurry::perf::Histogram;

constexpr unsigned pipeline_max = 1024;
constexpr unsigned connections_max = 1024;

struct Options {
  std::string protocol = "resp";
  std::string server = "127.0.0.1:6379";
  std::string key = "flurry-peer-bench";
  unsigned threads = 1;
  unsigned connections = 1;
  unsigned pipeline = 1;
  unsigned poll_us = 0;  // look for answers without sleeping this long before blocking
  std::uint32_t count = 1;
  std::string command = "incr";                    // memcached: incr, or get (count keys, an ID each)
  std::string path = "/v1/seq/bench?format=text";  // http: the GET asked; its body one number
  bool key_exists = false;  // memcached: no `add` first (a flurryd sequence exists already)
  double duration_s = 5;
  std::string label;
  std::string hgrm;
  bool json = false;
};

struct Result {
  std::uint64_t sent = 0;
  std::uint64_t answered = 0;
  std::uint64_t errors = 0;   // an answer that is not a number
  std::uint64_t refused = 0;  // SERVER_ERROR / -TRYAGAIN: the server asks to ask again
  Histogram latency_ns;
  flurry::perf::IdRanges ids;
  std::string error;
};

// One connection: its socket, what it has sent and not yet had answered, a partial answer.
struct Connection {
  int fd = -1;
  std::vector<Clock::time_point> sent_at;  // a ring of pipeline entries
  unsigned head = 0;                       // the oldest unanswered request
  unsigned in_flight = 0;
  std::string pending;  // bytes of an answer line not yet complete
};

class PeerThread {
 public:
  PeerThread(const Options& options, const sockaddr_in& server, unsigned connections, Result& result)
      : options_(options), server_(server), result_(result), connections_(connections) {
    if (options.protocol == "http") {
      request_ = fmt::format("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", options.path, options.server);
    } else if (options.protocol == "resp" && options.count == 1) {  // what a Redis counter's user sends
      request_ = fmt::format("*2\r\n$4\r\nINCR\r\n${}\r\n{}\r\n", options.key.size(), options.key);
    } else if (options.protocol == "resp") {
      request_ = fmt::format("*3\r\n$6\r\nINCRBY\r\n${}\r\n{}\r\n${}\r\n{}\r\n", options.key.size(),
                             options.key, std::to_string(options.count).size(), options.count);
    } else if (options.command == "get") {
      request_ = "get";
      for (std::uint32_t i = 0; i < options.count; ++i) request_ += " " + options.key;
      request_ += "\r\n";
    } else {
      request_ = fmt::format("incr {} {}\r\n", options.key, options.count);
    }
  }
  ~PeerThread() {
    for (Connection& c : connections_)
      if (c.fd >= 0) close(c.fd);
  }
  PeerThread(const PeerThread&) = delete;
  PeerThread& operator=(const PeerThread&) = delete;

  void run(Clock::time_point deadline);

 private:
  bool connect_all();
  bool create_key(int fd);
  bool fill(Connection& c);
  bool drain(Connection& c);
  void on_line(Connection& c, std::string_view line);
  void on_get_line(Connection& c, std::string_view line);
  void on_http(Connection& c, std::string_view status_line, std::string_view body);
  bool drain_http(Connection& c);
  enum class Outcome { served, refused, error };
  void finish(Connection& c, Outcome outcome);  // the oldest request's answer is complete

  const Options& options_;
  const sockaddr_in server_;
  Result& result_;
  std::vector<Connection> connections_;
  std::string request_;
  std::string batch_;
  char buffer_[65536];
};

bool PeerThread::connect_all() {
  for (Connection& c : connections_) {
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (c.fd < 0 || connect(c.fd, reinterpret_cast<const sockaddr*>(&server_), sizeof server_) != 0) {
      result_.error = fmt::format("connect {}: {}", options_.server, std::strerror(errno));
      return false;
    }
    c.sent_at.resize(options_.pipeline);
  }
  return options_.protocol != "memcached" || options_.key_exists || options_.command == "get" ||
         create_key(connections_.front().fd);
}

// memcached's incr answers NOT_FOUND for a missing key: add it (a no-op if it exists).
bool PeerThread::create_key(int fd) {
  const std::string add = fmt::format("add {} 0 0 1\r\n0\r\n", options_.key);
  if (send(fd, add.data(), add.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(add.size())) return false;
  std::string answer;
  while (answer.find("\r\n") == std::string::npos) {
    const ssize_t n = recv(fd, buffer_, sizeof buffer_, 0);
    if (n <= 0) {
      result_.error = "memcached: no answer to add";
      return false;
    }
    answer.append(buffer_, static_cast<std::size_t>(n));
  }
  if (answer.rfind("STORED", 0) == 0 || answer.rfind("NOT_STORED", 0) == 0) return true;
  result_.error = "memcached: add answered " + answer.substr(0, answer.find('\r'));
  return false;
}

// Tops the connection up to --pipeline requests in flight, in one write.
bool PeerThread::fill(Connection& c) {
  const unsigned room = options_.pipeline - c.in_flight;
  if (room == 0) return true;
  batch_.clear();
  for (unsigned i = 0; i < room; ++i) batch_ += request_;
  if (send(c.fd, batch_.data(), batch_.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(batch_.size())) {
    result_.error = fmt::format("send: {}", std::strerror(errno));
    return false;
  }
  const auto now = Clock::now();
  for (unsigned i = 0; i < room; ++i) c.sent_at[(c.head + c.in_flight + i) % options_.pipeline] = now;
  c.in_flight += room;
  result_.sent += room;
  return true;
}

void PeerThread::finish(Connection& c, Outcome outcome) {
  if (outcome == Outcome::served) {
    const auto now = Clock::now();
    result_.latency_ns.record(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - c.sent_at[c.head]).count()));
    ++result_.answered;
  } else {
    ++(outcome == Outcome::refused ? result_.refused : result_.errors);
  }
  c.head = (c.head + 1) % options_.pipeline;
  --c.in_flight;
}

bool refusal(std::string_view line) {
  return line.starts_with("SERVER_ERROR") || line.starts_with("-TRYAGAIN");
}

// --command get: VALUE lines, each followed by its ID, then END (or one refusal line).
void PeerThread::on_get_line(Connection& c, std::string_view line) {
  if (line.starts_with("VALUE ")) return;
  if (line == "END") return finish(c, Outcome::served);
  if (refusal(line)) return finish(c, Outcome::refused);
  std::uint64_t value = 0;
  const auto parsed = std::from_chars(line.data(), line.data() + line.size(), value);
  if (parsed.ec != std::errc{} || parsed.ptr != line.data() + line.size()) return finish(c, Outcome::error);
  result_.ids.add(value, 1);
}

void PeerThread::on_line(Connection& c, std::string_view line) {
  if (c.in_flight == 0) {
    ++result_.errors;  // an answer to nothing
    return;
  }
  if (options_.command == "get") return on_get_line(c, line);
  if (refusal(line)) return finish(c, Outcome::refused);
  finish(c, Outcome::served);
  if (!line.empty() && line.front() == ':') line.remove_prefix(1);  // RESP integer
  std::uint64_t value = 0;
  const auto parsed = std::from_chars(line.data(), line.data() + line.size(), value);
  if (parsed.ec != std::errc{} || parsed.ptr != line.data() + line.size() || value < options_.count) {
    ++result_.errors;
    return;
  }
  result_.ids.add(value - options_.count + 1, options_.count);
}

// http: 200 with one number (the ID, and a newline) is served; 503 (the ceiling, a block on its
// way) refused; anything else an error.
void PeerThread::on_http(Connection& c, std::string_view status_line, std::string_view body) {
  if (c.in_flight == 0) {
    ++result_.errors;
    return;
  }
  if (status_line.starts_with("HTTP/1.1 503")) return finish(c, Outcome::refused);
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.remove_suffix(1);
  std::uint64_t value = 0;
  const auto parsed = std::from_chars(body.data(), body.data() + body.size(), value);
  if (!status_line.starts_with("HTTP/1.1 200") || parsed.ec != std::errc{} ||
      parsed.ptr != body.data() + body.size()) {
    return finish(c, Outcome::error);
  }
  finish(c, Outcome::served);
  result_.ids.add(value, 1);
}

// Whole responses off the front of c.pending: the head up to its blank line, then
// Content-Length bytes of body (every answer here carries one).
bool PeerThread::drain_http(Connection& c) {
  std::size_t start = 0;
  for (;;) {
    const std::size_t head_end = c.pending.find("\r\n\r\n", start);
    if (head_end == std::string::npos) break;
    const std::string_view head = std::string_view(c.pending).substr(start, head_end - start);
    std::size_t length = 0;
    std::size_t at = 0;
    for (const char* name : {"\r\nContent-Length:", "\r\ncontent-length:"}) {
      if ((at = head.find(name)) != std::string_view::npos) {
        std::string_view digits = head.substr(at + std::strlen(name));
        while (!digits.empty() && digits.front() == ' ') digits.remove_prefix(1);
        std::from_chars(digits.data(), digits.data() + digits.size(), length);
        break;
      }
    }
    if (at == std::string_view::npos) {
      result_.error = "an HTTP answer without Content-Length";
      return false;
    }
    const std::size_t body_start = head_end + 4;
    if (c.pending.size() < body_start + length) break;
    on_http(c, head.substr(0, head.find("\r\n")), std::string_view(c.pending).substr(body_start, length));
    start = body_start + length;
  }
  c.pending.erase(0, start);
  return true;
}

bool PeerThread::drain(Connection& c) {
  const ssize_t n = recv(c.fd, buffer_, sizeof buffer_, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN)) {
    result_.error =
        n == 0 ? "the server closed the connection" : fmt::format("recv: {}", std::strerror(errno));
    return false;
  }
  if (n < 0) return true;
  c.pending.append(buffer_, static_cast<std::size_t>(n));
  if (options_.protocol == "http") return drain_http(c);
  std::size_t start = 0;
  for (std::size_t end; (end = c.pending.find("\r\n", start)) != std::string::npos; start = end + 2) {
    on_line(c, std::string_view(c.pending).substr(start, end - start));
  }
  c.pending.erase(0, start);
  return true;
}

void PeerThread::run(Clock::time_point deadline) {
  if (!connect_all()) return;
  std::vector<pollfd> ready(connections_.size());
  for (std::size_t i = 0; i < connections_.size(); ++i) ready[i] = {connections_[i].fd, POLLIN, 0};
  // The run ends at the deadline and what is in flight then is cut off, unless nothing has come
  // back yet: then what is in flight gets up to 5 s more, so a server slower than a short run
  // (a 0.3 s smoke row on a loaded host) is not reported as silent. A thread that connected after
  // the deadline still sends its window.
  if (Clock::now() >= deadline) deadline = Clock::now() + std::chrono::milliseconds(200);
  const auto give_up = deadline + std::chrono::seconds(5);
  for (auto now = Clock::now();; now = Clock::now()) {
    const bool heard = result_.answered + result_.refused + result_.errors > 0;
    if (now >= (heard ? deadline : give_up)) break;
    if (now < deadline) {
      for (Connection& c : connections_)
        if (!fill(c)) return;
    } else if (std::none_of(connections_.begin(), connections_.end(),
                            [](const Connection& c) { return c.in_flight > 0; })) {
      break;
    }
    // --poll-us: look without sleeping for that long first (no wakeup on the client's side).
    int found = 0;
    if (options_.poll_us != 0) {
      const auto poll_until = Clock::now() + std::chrono::microseconds(options_.poll_us);
      while ((found = poll(ready.data(), ready.size(), 0)) == 0 && Clock::now() < poll_until) {
      }
    }
    if (found < 0 || (found == 0 && poll(ready.data(), ready.size(), 50) < 0)) continue;
    for (std::size_t i = 0; i < connections_.size(); ++i) {
      if ((ready[i].revents & (POLLIN | POLLERR | POLLHUP)) != 0 && !drain(connections_[i])) return;
    }
  }
}

using flurry::perf::cpu_seconds;

int report(const Options& options, std::vector<Result>& results, double seconds, double cpu_cores) {
  Result total;
  for (Result& r : results) {
    if (total.error.empty()) total.error = r.error;
    total.sent += r.sent;
    total.answered += r.answered;
    total.errors += r.errors;
    total.refused += r.refused;
    total.latency_ns.add(r.latency_ns);
    total.ids.append(r.ids);
  }
  const std::uint64_t ids = total.ids.ids();
  const std::uint64_t duplicates = flurry::perf::count_duplicate_ids_parallel(total.ids.spans());
  const auto us = [](std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
  const nlohmann::json json = {
      {"label", options.label},
      {"protocol", options.protocol},
      {"server", options.server},
      {"connections", options.connections},
      {"pipeline", options.pipeline},
      {"poll_us", options.poll_us},
      {"count", options.count},
      {"command", options.protocol == "resp"   ? (options.count == 1 ? "incr" : "incrby")
                  : options.protocol == "http" ? "GET " + options.path
                                               : options.command},
      {"seconds", seconds},
      {"requests_sent", total.sent},
      {"requests_answered", total.answered},
      {"requests_per_second", static_cast<double>(total.answered) / seconds},
      {"ids", ids},
      {"ids_per_second", static_cast<double>(ids) / seconds},
      {"errors", total.errors},
      {"refused", total.refused},
      {"p50_us", us(total.latency_ns.value_at_percentile(50))},
      {"p99_us", us(total.latency_ns.value_at_percentile(99))},
      {"p999_us", us(total.latency_ns.value_at_percentile(99.9))},
      {"max_us", us(total.latency_ns.max())},
      {"duplicates", duplicates},
      {"client_cpu_cores", cpu_cores}};
  if (options.json) {
    std::puts(json.dump().c_str());
  } else {
    fmt::print(
        "{}: {} x pipeline {}, count {}: {:.0f} req/s, {:.0f} IDs/s, p50 {:.1f} us, p99 {:.1f} us; "
        "{} refused; {} IDs checked, {} duplicates; client CPU {:.2f} cores\n",
        options.protocol, options.connections, options.pipeline, options.count,
        json["requests_per_second"].get<double>(), json["ids_per_second"].get<double>(),
        json["p50_us"].get<double>(), json["p99_us"].get<double>(), total.refused, ids, duplicates,
        cpu_cores);
  }
  if (!total.error.empty()) std::fprintf(stderr, "peer-bench: %s\n", total.error.c_str());
  const bool written = flurry::perf::write_hgrm(options.hgrm, total.latency_ns, "peer-bench");
  if (duplicates != 0)
    std::fprintf(stderr, "peer-bench: %llu DUPLICATE IDs\n", static_cast<unsigned long long>(duplicates));
  if (total.errors != 0)
    std::fprintf(stderr, "peer-bench: %llu answers were neither a number nor a refusal\n",
                 static_cast<unsigned long long>(total.errors));
  if (total.answered == 0 && total.error.empty())
    std::fprintf(stderr,
                 "peer-bench: no request was answered (%llu refused: the server asked to ask again)\n",
                 static_cast<unsigned long long>(total.refused));
  return total.error.empty() && written && duplicates == 0 && total.errors == 0 && total.answered > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  cli::App app{
      "peer-bench — pipelined counter load on a RESP (Redis INCR/INCRBY), memcached (incr) or HTTP/1.1 "
      "(GET, keep-alive) server"};
  app.option_defaults()->always_capture_default();
  app.add_option("--protocol", options.protocol, "resp, memcached or http")
      ->check(cli::IsMember({"resp", "memcached", "http"}));
  app.add_option("--path", options.path,
                 "http: the path asked (its answer one number: flurryd's /v1/seq/NAME?format=text or "
                 "/v1/ids?format=text)");
  app.add_option("--server", options.server, "ADDR:PORT (IPv4, TCP)");
  app.add_option("--key", options.key, "the counter's key (--command get: the key asked --count times)");
  app.add_option(
         "--command", options.command,
         "memcached: incr (the counter), or get (--count keys a request, an ID each: katsubushi's and "
         "flurryd's memcached front end)")
      ->check(cli::IsMember({"incr", "get"}));
  app.add_flag("--key-exists", options.key_exists,
               "memcached incr: the key exists already (a flurryd sequence), do not `add` it first");
  app.add_option("--threads", options.threads, "client threads")->check(cli::Range(1U, 64U));
  app.add_option("--connections", options.connections, "TCP connections in all")
      ->check(cli::Range(1U, connections_max));
  app.add_option("--poll-us", options.poll_us,
                 "look for answers without sleeping this long before blocking (0: block at once), as "
                 "flurry-bench --poll-us does")
      ->check(cli::Range(0U, 1'000'000U));
  app.add_option("--pipeline", options.pipeline, "requests in flight per connection")
      ->check(cli::Range(1U, pipeline_max));
  app.add_option("--count", options.count, "IDs per request (INCRBY n)")->check(cli::Range(1U, 1U << 20));
  app.add_option("--duration-s", options.duration_s, "how long to run")->check(cli::Range(0.1, 600.0));
  app.add_option("--label", options.label, "a name for this run in the output");
  app.add_option("--hgrm", options.hgrm,
                 "write the latency distribution (microseconds) in HdrHistogram's percentile format");
  app.add_flag("--json", options.json, "print one JSON object");
  try {
    app.parse(argc, argv);
  } catch (const cli::ParseError& error) {
    return app.exit(error);
  }
  if (options.protocol == "http" && options.count != 1) {
    std::fprintf(stderr, "peer-bench: --protocol http asks one number a request (--count 1)\n");
    return 2;
  }
  if (options.protocol != "memcached" && options.command != "incr") {
    std::fprintf(stderr, "peer-bench: --command get is memcached's (--protocol memcached)\n");
    return 2;
  }
  const std::optional<sockaddr_in> endpoint = flurry::perf::parse_ipv4_endpoint(options.server);
  if (!endpoint) {
    std::fprintf(stderr, "peer-bench: --server '%s' must be IPv4ADDR:PORT\n", options.server.c_str());
    return 2;
  }
  const unsigned threads = std::min(options.threads, options.connections);
  std::vector<Result> results(threads);
  const double cpu_before = cpu_seconds();
  const auto started = Clock::now();
  const auto deadline = started + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options.duration_s));
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    const unsigned share = options.connections / threads + (t < options.connections % threads ? 1 : 0);
    workers.emplace_back([&, t, share] { PeerThread(options, *endpoint, share, results[t]).run(deadline); });
  }
  for (auto& worker : workers) worker.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return report(options, results, seconds, (cpu_seconds() - cpu_before) / seconds);
}
