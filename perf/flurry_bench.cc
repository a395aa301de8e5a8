// perf/flurry_bench.cc — `flurry-bench`, the one load generator (kernel UDP).
//
// Contract:
//   * Each of --threads threads owns one connected UDP socket and keeps up to --window GET_IDS
//     requests for --count IDs outstanding against --server, sending --batch of them per
//     system call (1: one send() each, as a client library does; more: sendmmsg; with --gso
//     one UDP GSO send, and answers received with UDP_GRO: a run of them in one receive, which
//     a server with --udp-gso/--udp-gro keeps together on loopback). Every request is padded to
//     proto::request_size_for_ids(--count, --ids-per-range), the rule of PROTOCOL.md "How a
//     client asks for N IDs"; there is no other sizing rule here.
//   * Bounded: it stops after --duration-s seconds or --requests requests in all, whichever
//     comes first; a request unanswered for --timeout-ms (checked every timeout / 4) is counted
//     lost and its slot reused.
//   * --seq NAME: GET_SEQ of the named sequence instead of GET_IDS (same sizing; the name
//     rides after the header), so GET_SEQ and GET_IDS can be measured side by side in one run.
//   * --echo: the server is a reflector that bounces the request itself (dpdk-testpmd 5tswap,
//     udp-reflector --echo); the echoed request is the answer, matched by request id. No IDs.
//   * Three modes:
//     - closed loop (default): a new request as soon as an answer frees a slot; what is in
//       flight at the end of --duration-s is cut off, unless nothing has come back yet: then it
//       waits up to --timeout-ms, and only a server silent that long is "no answer";
//     - open loop (--rate R): requests leave on a fixed schedule of R per second in all, whether
//       or not earlier ones were answered; latency counts from the scheduled send time, so a
//       stalled server shows up in the percentiles (no coordinated omission). A request that
//       finds the window full waits for a slot and keeps its scheduled time. After the last
//       scheduled send the thread waits up to --timeout-ms for what is in flight. Offered and
//       achieved rates are both reported;
//     - maximum-rate search (--max-rate, RFC 2544 style): a closed-loop probe, then a binary
//       search of open-loop trials of --trial-s for the highest rate served with at most 0.5 %
//       loss and, below it, with 0 % loss; then open-loop runs of --duration-s at 10, 50 and
//       90 % of the 0.5 % rate for their latency. Loss = scheduled requests not answered OK.
//   * Latency in a log-linear histogram with 3 significant digits (perf/histogram.h):
//     p50/p90/p99/p99.9/p99.99/max; --hgrm FILE writes HdrHistogram's percentile distribution
//     (microseconds) of the run (of the 50 % run for --max-rate).
//   * Report (one line, or one JSON object with --json, keys kept stable for its callers):
//     requests/s, IDs/s, latency, lost/retry/late counts, the client's own CPU use (user + sys
//     over wall time, in cores) so a reader can tell whether the client was the bottleneck,
//     and an environment block (CPU, cores, kernel, the server's INFO).
//   * Every ID of every run is checked for duplicates, across all runs of a --max-rate search.
//     Exit 0 only if something was answered and no ID came twice (perf/id_ranges.h); 1 on a
//     duplicate, on no answer, or on a socket failure; 2 (or CLI11's code) on bad options.
//   * --key-file F (a client key file, client::read_key_file): every request is signed
//     (PROTOCOL.md "Authentication", 3 bytes more than the unsigned size, at least 40) and an
//     answer counts only if its MAC verifies (else malformed). Against one flurryd with
//     --auth optional, a run with and a run without it compare signed and unsigned requests/s.
//   flurry-bench --server 127.0.0.1:7420 --threads 2 --window 16 --count 1 --duration-s 5 [--json]
//   flurry-bench --server 127.0.0.1:7420 --rate 50000 --duration-s 5 --hgrm run.hgrm
//   flurry-bench --server 127.0.0.1:7420 --max-rate --trial-s 1 --duration-s 2 --json
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fmt/format.h>
#include <sodium.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include <vector>
#include "base/cli.h"
#include "client/client.h"
#include "proto/auth.h"

#include "dataplane/udp_gso.h"
#include "perf/bench_util.h"
#include "perf/histogram.h"
#include "perf/id_ranges.h"
#include "proto/wire.h"

namespace cli = flurry::cli;

namespace {

namespace proto = flurry::proto;
using flurry::perf::Histogram;
using Clock = std::chrono::steady_clock;

// A request id is thread << 48 | sequence << slot_bits | slot: an answer finds its slot
// without a search, and an answer to an earlier use of the slot does not match.
constexpr unsigned slot_bits = 10;
constexpr unsigned window_max = 1U << slot_bits;
constexpr unsigned threads_max = 64;
constexpr std::uint64_t sequence_mask = (std::uint64_t{1} << (48 - slot_bits)) - 1;
static_assert(threads_max <= (1U << 16), "the thread index fills the top 16 bits");
constexpr double rate_max = 100e6;  // requests/s; far above any path this runs on

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
  unsigned batch = 1;    // requests per send system call (sendmmsg when > 1)
  unsigned poll_us = 0;  // look for answers without sleeping this long before blocking
  bool gso = false;      // a batch as one UDP GSO send; answers received with UDP_GRO
  double rate = 0;       // open loop when > 0
  bool max_rate = false;
  double trial_s = 1;
  unsigned search_steps = 7;
  double loss_allowed = 0.005;
  std::string hgrm;
  bool echo = false;
  bool json = false;
  std::string label;
  std::string key_file;
  std::optional<flurry::client::Key> key;  // read from key_file
  std::string seq;                         // empty: GET_IDS
  // The node id signed requests are for (PROTOCOL.md "Bound to one server"): asked with INFO
  // before the run when there is a key.
  std::uint32_t server_node = proto::any_server;
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
  Clock::time_point started;
  Clock::time_point deadline;  // no send after it
  double rate_per_thread = 0;  // open loop when > 0
};

struct Counters {
  std::uint64_t scheduled = 0;  // open loop: send times reached before the deadline
  std::uint64_t sent = 0;
  std::uint64_t answered = 0;
  std::uint64_t answered_ok = 0;
  std::uint64_t retry = 0;
  std::uint64_t other_status = 0;
  std::uint64_t lost = 0;       // timed out, or the send failed
  std::uint64_t malformed = 0;  // not decodable, or a late answer to a request counted lost

  Counters& operator+=(const Counters& other) {
    scheduled += other.scheduled;
    sent += other.sent;
    answered += other.answered;
    answered_ok += other.answered_ok;
    retry += other.retry;
    other_status += other.other_status;
    lost += other.lost;
    malformed += other.malformed;
    return *this;
  }
};

struct ThreadResult {
  Counters counters;
  Histogram latency_ns;
  flurry::perf::IdRanges ids;
  std::string error;
};

// ---- options ----

void add_mode_options(cli::App& app, Options& options) {
  app.add_option("--rate", options.rate, "open loop: requests per second in all, on a fixed schedule")
      ->check(cli::Range(1.0, rate_max));
  app.add_flag("--max-rate", options.max_rate,
               "search the highest rate served with <= --loss-allowed loss and with none (RFC 2544)")
      ->excludes("--rate");
  app.add_option("--trial-s", options.trial_s, "--max-rate: seconds per search trial")
      ->check(cli::Range(0.1, 60.0));
  app.add_option("--search-steps", options.search_steps, "--max-rate: trials per binary search")
      ->check(cli::Range(1U, 20U));
  app.add_option("--loss-allowed", options.loss_allowed, "--max-rate: loss fraction of the first search")
      ->check(cli::Range(0.0, 0.5));
  app.add_option("--hgrm", options.hgrm, "write HdrHistogram's percentile distribution (us) here");
}

std::optional<int> parse_options(int argc, char** argv, Options& options) {
  cli::App app{
      "flurry-bench — UDP load against flurryd (or a reflector with --echo) in closed loop, open "
      "loop or a maximum-rate search; checks every ID for duplicates"};
  app.option_defaults()->always_capture_default();
  app.add_option("--server", options.server, "flurryd ADDR:PORT (IPv4)");
  app.add_option("--threads", options.threads, "client threads, one socket each")
      ->check(cli::Range(1U, threads_max));
  app.add_option("--window", options.window, "outstanding requests per thread (at most)")
      ->check(cli::Range(1U, window_max));
  app.add_option("--count", options.count, "IDs asked per request")->check(cli::Range(1U, proto::count_max));
  app.add_option("--ids-per-range", options.ids_per_range,
                 "IDs one range holds on the server (sizes the request padding, PROTOCOL.md)")
      ->check(cli::Range(1U, proto::count_max));
  app.add_option("--duration-s", options.duration_s, "how long to run")->check(cli::Range(0.1, 600.0));
  app.add_option("--requests", options.requests, "stop after this many requests in all")
      ->check(cli::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000}));
  app.add_option("--timeout-ms", options.timeout_ms, "a request unanswered this long is lost")
      ->check(cli::Range(1U, 10'000U));
  app.add_option("--poll-us", options.poll_us,
                 "look for answers without sleeping this long before blocking (0: block at once; a polling "
                 "client pays CPU for no wakeup on its side)")
      ->check(cli::Range(0U, 1'000'000U));
  app.add_option("--batch", options.batch,
                 "requests per system call: 1 = one send each, as a client does; more = sendmmsg")
      ->check(cli::Range(1U, 64U));
  app.add_flag("--gso", options.gso,
               "send each --batch as one UDP GSO message (UDP_SEGMENT) and receive answers with UDP_GRO "
               "(Linux 5.0+): the datagrams are the same, the system calls and socket-queue entries fewer");
  add_mode_options(app, options);
  app.add_flag("--echo", options.echo,
               "the server bounces the request itself (testpmd 5tswap): no IDs to check");
  app.add_option("--label", options.label, "a name for this run in the output");
  app.add_option("--seq", options.seq,
                 "ask GET_SEQ of this named sequence (flurryctl seq create) instead of GET_IDS")
      ->check(cli::Validator(
          [](std::string& name) -> std::string {
            return proto::valid_seq_name(name)
                       ? ""
                       : "'" + name + "': 1 to 32 characters from A-Z a-z 0-9 _ . - :";
          },
          "NAME"));
  app.add_flag("--json", options.json, "print one JSON object");
  app.add_option("--key-file", options.key_file,
                 "sign every request with this client key (id = N, secret = \"hex\"); verify every answer");
  app.set_version_flag("--version", "flurry-bench " FLURRY_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const cli::ParseError& error) {
    return app.exit(error);
  }
  if (!options.key_file.empty()) {
    flurry::client::Key key;
    flurry::client::Error error;
    if (!flurry::client::read_key_file(options.key_file, &key, &error) || sodium_init() < 0) {
      std::fprintf(stderr, "flurry-bench: %s\n", error.message.c_str());
      return 2;
    }
    options.key = key;
  }
  return std::nullopt;
}

// ---- one thread's loop: send / wait / receive / expire ----

class LoadThread {
 public:
  LoadThread(const Options& options, const Plan& plan, unsigned thread_index, ThreadResult& result)
      : options_(options),
        plan_(plan),
        id_base_(std::uint64_t{thread_index} << 48),
        result_(result),
        slots_(options.window),
        next_send_(plan.started) {
    free_slots_.reserve(options.window);
    batch_.resize(std::min(options.batch, options.window));
    batch_iov_.resize(batch_.size());
    batch_messages_.resize(batch_.size());
    for (unsigned slot = options.window; slot-- > 0;) free_slots_.push_back(slot);
    result_.ids.reserve(options.echo ? 0 : 1 << 16);
    if (open_loop()) {
      interval_ = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(1.0 / plan.rate_per_thread));
      // Threads start their schedules spread over one interval, not all at once.
      next_send_ += interval_ * thread_index / std::max(1U, options.threads);
    }
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
    Clock::time_point due;  // the scheduled send time (open loop), else the send time
    bool busy = false;
    std::uint64_t mac = 0;  // --key-file: the request's MAC, which the answer MAC covers
  };
  std::size_t encode(const proto::Request& get, std::span<std::uint8_t> out) const;

  bool open_loop() const { return plan_.rate_per_thread > 0; }
  bool open_socket();
  void send_closed();
  void send_open(Clock::time_point now);
  void advance_schedule(Clock::time_point until);
  unsigned send_batch(unsigned n, Clock::time_point first_due, Clock::duration step);
  Clock::time_point next_event(Clock::time_point next_expire) const;
  void wait_readable(Clock::time_point now, Clock::time_point until) const;
  void receive_all();
  void on_datagram(std::span<const std::uint8_t> datagram, Clock::time_point now);
  void record_answer(const proto::ResponseView& view);
  void expire(Clock::time_point now);

  const Options& options_;
  const Plan& plan_;
  // plan_.deadline, or later for a closed-loop thread that started after it (run()).
  Clock::time_point deadline_;
  const std::uint64_t id_base_;
  ThreadResult& result_;
  int fd_ = -1;
  std::vector<Slot> slots_;
  std::vector<unsigned> free_slots_;  // a stack; never holds more than window entries
  unsigned in_flight_ = 0;
  std::uint64_t attempts_ = 0;  // sent + failed sends, against request_budget
  std::uint64_t sequence_ = 0;
  Clock::time_point next_send_;  // open loop: the next scheduled send
  Clock::duration interval_{};   // open loop: between scheduled sends
  std::vector<std::array<std::uint8_t, proto::datagram_size_max>> batch_;  // --batch requests
  std::vector<iovec> batch_iov_;
  std::vector<mmsghdr> batch_messages_;
  // A receive: one answer, or with --gso a UDP_GRO run of them (up to 64 KiB).
  std::vector<std::uint8_t> answer_ = std::vector<std::uint8_t>(proto::datagram_size_max);
  std::array<std::uint8_t, CMSG_SPACE(sizeof(int))> answer_control_{};
  std::array<std::uint8_t, flurry::dataplane::gso_control_size> send_control_{};
  int send_gso(unsigned n);
};

bool LoadThread::open_socket() {
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || connect(fd_, reinterpret_cast<const sockaddr*>(&plan_.server), sizeof plan_.server) != 0) {
    result_.error = std::string("socket/connect: ") + std::strerror(errno);
    return false;
  }
  const int buffer_bytes = 4 << 20;  // a full window of the largest answers, many times over
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
  if (options_.gso) {
    const int one = 1;
    if (setsockopt(fd_, SOL_UDP, UDP_GRO, &one, sizeof one) != 0) {
      result_.error = std::string("--gso: UDP_GRO: ") + std::strerror(errno) + " (needs Linux 5.0+)";
      return false;
    }
    answer_.resize(65536);
  }
  return true;
}

// The first n requests of batch_ (all of one size) as one UDP GSO message; n or -1.
int LoadThread::send_gso(unsigned n) {
  msghdr message{};
  message.msg_iov = batch_iov_.data();
  message.msg_iovlen = n;
  flurry::dataplane::set_udp_segment(message, send_control_,
                                     static_cast<std::uint16_t>(batch_iov_[0].iov_len));
  return sendmsg(fd_, &message, 0) >= 0 ? static_cast<int>(n) : -1;
}

// Runs until the deadline (closed loop) or until the deadline and the drain after it (open
// loop: what is in flight gets --timeout-ms to come back), or the budget is spent and settled.
void LoadThread::run() {
  if (!open_socket()) return;
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  const auto expire_tick = std::max<Clock::duration>(timeout / 4, std::chrono::milliseconds(1));
  // A closed-loop thread that starts after the deadline (thread start-up took the whole of a
  // short run on a loaded host or in a sanitizer build) still sends a window and waits a
  // little for it, so a server that answers is never reported as silent.
  deadline_ = plan_.deadline;
  if (!open_loop() && Clock::now() >= deadline_) {
    deadline_ = Clock::now() + std::min<Clock::duration>(timeout, std::chrono::milliseconds(200));
  }
  // The closed loop stops at the deadline, unless nothing has come back yet: then what is in
  // flight gets --timeout-ms too, so a server slower than a short run (its first answer after a
  // 0.5 s run's deadline: a sanitizer build on a loaded host) is not reported as silent.
  const auto end = [&] {
    return open_loop() || result_.counters.answered == 0 ? deadline_ + timeout : deadline_;
  };
  auto next_expire = Clock::now() + expire_tick;
  for (auto now = Clock::now(); now < end(); now = Clock::now()) {
    if (open_loop()) {
      send_open(now);
    } else if (now < deadline_) {
      send_closed();
    }
    const bool sending_done = now >= deadline_ || attempts_ >= plan_.request_budget;
    if (in_flight_ == 0 && sending_done) break;  // budget or time spent, and settled
    wait_readable(Clock::now(), std::min(next_event(next_expire), end()));
    receive_all();
    now = Clock::now();
    if (now >= next_expire) {
      expire(now);
      next_expire = now + expire_tick;
    }
  }
  if (!open_loop()) {
    // Closed loop: what is in flight at the deadline was cut off, not lost, unless nothing came
    // back: then it had its --timeout-ms and is lost.
    if (result_.counters.answered == 0) {
      for (const Slot& slot : slots_) result_.counters.lost += slot.busy ? 1 : 0;
    }
    return;
  }
  // The offered load is the schedule: every send time before the deadline counts, also those
  // this thread was not scheduled to see (a stall across the deadline), and they count as lost.
  advance_schedule(deadline_);
  for (const Slot& slot : slots_) result_.counters.lost += slot.busy ? 1 : 0;  // not back after the drain
  result_.counters.lost += result_.counters.scheduled - attempts_;             // never sent
}

// Sends up to `n` requests (n <= free slots), the k-th due at first_due + k * step, with one
// sendmmsg; returns how many left. What the kernel refused counts lost once and keeps its slot
// free, and ends the caller's round, so a refused destination costs one call per loop turn.
unsigned LoadThread::send_batch(unsigned n, Clock::time_point first_due, Clock::duration step) {
  proto::Request get = request_of(options_);
  n = std::min<unsigned>(n, static_cast<unsigned>(batch_.size()));
  for (unsigned k = 0; k < n; ++k) {
    const unsigned slot_index = free_slots_[free_slots_.size() - 1 - k];
    get.request_id = id_base_ | ((sequence_++ & sequence_mask) << slot_bits) | slot_index;
    const std::size_t size = encode(get, batch_[k]);
    batch_iov_[k] = {batch_[k].data(), size};
    batch_messages_[k] = {};
    batch_messages_[k].msg_hdr.msg_iov = &batch_iov_[k];
    batch_messages_[k].msg_hdr.msg_iovlen = 1;
    slots_[slot_index] = {get.request_id, first_due + step * k, false,
                          options_.key ? proto::load_be<std::uint64_t>(batch_[k].data() + size - 8) : 0};
  }
  const int result = n == 1         ? (send(fd_, batch_[0].data(), batch_iov_[0].iov_len, 0) ==
                                       static_cast<ssize_t>(batch_iov_[0].iov_len)
                                           ? 1
                                           : -1)
                     : options_.gso ? send_gso(n)
                                    : sendmmsg(fd_, batch_messages_.data(), n, 0);
  const unsigned sent = result > 0 ? static_cast<unsigned>(result) : 0;
  for (unsigned k = 0; k < sent; ++k) {
    slots_[free_slots_.back()].busy = true;
    free_slots_.pop_back();
  }
  attempts_ += sent + (sent < n ? 1 : 0);
  result_.counters.sent += sent;
  result_.counters.lost += sent < n ? 1 : 0;
  in_flight_ += sent;
  return sent;
}

// The request, signed with --key-file's key when there is one (PROTOCOL.md "Authentication":
// 3 bytes more than the unsigned size, at least the signed minimum).
std::size_t LoadThread::encode(const proto::Request& get, std::span<std::uint8_t> out) const {
  if (!options_.key) return proto::encode_request(get, out, plan_.request_size);
  const std::size_t size = std::max(plan_.request_size + 3, proto::signed_request_size_min);
  const auto stamp_us = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                       std::chrono::system_clock::now().time_since_epoch())
                                                       .count());
  return proto::encode_signed_request(get, out, size, options_.key->id, options_.server_node, stamp_us,
                                      options_.key->secret, crypto_shorthash);
}

// Fills the window, --batch requests per system call.
void LoadThread::send_closed() {
  while (!free_slots_.empty() && attempts_ < plan_.request_budget) {
    const auto room =
        static_cast<unsigned>(std::min<std::uint64_t>(free_slots_.size(), plan_.request_budget - attempts_));
    const unsigned n = std::min(room, options_.batch);
    if (send_batch(n, Clock::now(), Clock::duration::zero()) < n) return;
  }
}

// Counts the send times up to `until` (and before the deadline) as scheduled.
void LoadThread::advance_schedule(Clock::time_point until) {
  while (next_send_ <= until && next_send_ < deadline_ && result_.counters.scheduled < plan_.request_budget) {
    ++result_.counters.scheduled;
    next_send_ += interval_;
  }
}

// Sends what the schedule has made due. A request that finds no free slot stays due: it
// leaves when a slot frees, with its latency still counted from its scheduled time.
void LoadThread::send_open(Clock::time_point now) {
  advance_schedule(now);
  while (attempts_ < result_.counters.scheduled && !free_slots_.empty()) {
    const auto pending = static_cast<unsigned>(result_.counters.scheduled - attempts_);
    const Clock::time_point first_due = next_send_ - interval_ * pending;
    const unsigned n = std::min({pending, static_cast<unsigned>(free_slots_.size()), options_.batch});
    if (send_batch(n, first_due, interval_) < n) return;
  }
}

// When the loop must next wake up with nothing received: the next scheduled send (open loop,
// unless the window is full), the next expiry check, or the deadline.
Clock::time_point LoadThread::next_event(Clock::time_point next_expire) const {
  auto until = std::min(next_expire, deadline_);
  if (open_loop() && !free_slots_.empty()) until = std::min(until, next_send_);
  return until;
}

// Sleeps until an answer arrives or `until`, whichever is first (ppoll: microsecond timeouts,
// which an open-loop schedule needs). With --poll-us it first looks without sleeping for that
// long, so an answer arriving then needs no wakeup on the client's side.
void LoadThread::wait_readable(Clock::time_point now, Clock::time_point until) const {
  pollfd ready{fd_, POLLIN, 0};
  if (options_.poll_us != 0) {
    const timespec zero{};
    const auto poll_until = std::min(until, now + std::chrono::microseconds(options_.poll_us));
    do {
      if (ppoll(&ready, 1, &zero, nullptr) != 0) return;
    } while ((now = Clock::now()) < poll_until);
  }
  if (until <= now) return;
  const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now);
  const timespec timeout{static_cast<time_t>(wait.count() / 1'000'000'000),
                         static_cast<long>(wait.count() % 1'000'000'000)};
  ppoll(&ready, 1, &timeout, nullptr);
}

// Drains what has arrived, at most one window's worth per turn (bounded).
void LoadThread::receive_all() {
  for (unsigned turn = 0; turn < window_max; ++turn) {
    iovec buffer{answer_.data(), answer_.size()};
    msghdr message{};
    message.msg_iov = &buffer;
    message.msg_iovlen = 1;
    message.msg_control = answer_control_.data();
    message.msg_controllen = options_.gso ? answer_control_.size() : 0;
    const ssize_t n = recvmsg(fd_, &message, MSG_DONTWAIT);
    if (n <= 0) return;  // nothing left, or an ICMP error reported on the connected socket
    const auto length = static_cast<std::size_t>(n);
    // One answer, or a GRO run of answers of one size (the last may be shorter).
    const std::size_t step = options_.gso ? flurry::dataplane::gro_segment_size(message, length) : length;
    const auto now = Clock::now();
    for (std::size_t offset = 0; offset < length; offset += step) {
      on_datagram(std::span<const std::uint8_t>(answer_.data() + offset, std::min(step, length - offset)),
                  now);
    }
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
    const std::size_t mac_size = options_.key ? proto::answer_mac_size : 0;
    if (datagram.size() < mac_size) {
      ++result_.counters.malformed;
      return;
    }
    view = proto::decode_response(datagram.first(datagram.size() - mac_size));
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
  if (options_.key && !proto::verify_answer(datagram, slot.mac, options_.key->secret, crypto_shorthash)) {
    ++result_.counters.malformed;  // not signed by the key for this request
    return;
  }
  slot.busy = false;
  free_slots_.push_back(slot_index);
  --in_flight_;
  ++result_.counters.answered;
  const auto latency = std::chrono::duration_cast<std::chrono::nanoseconds>(now - slot.due).count();
  result_.latency_ns.record(static_cast<std::uint64_t>(std::max<long long>(latency, 0)));
  if (options_.echo) {
    ++result_.counters.answered_ok;
  } else {
    record_answer(view);
  }
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
  ++result_.counters.answered_ok;
  for (std::size_t i = 0; i < view.header.range_count; ++i) {
    const proto::Range range = view.range(i);
    result_.ids.add(range.first, range.count);
  }
}

void LoadThread::expire(Clock::time_point now) {
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  for (unsigned slot_index = 0; slot_index < slots_.size(); ++slot_index) {
    Slot& slot = slots_[slot_index];
    if (!slot.busy || now - slot.due < timeout) continue;
    slot.busy = false;
    free_slots_.push_back(slot_index);
    --in_flight_;
    ++result_.counters.lost;
  }
}

// ---- one run of all threads, merged ----

using flurry::perf::cpu_seconds;

struct Totals {
  double rate = 0;              // offered requests/s (open loop), 0 for closed loop
  double seconds = 0;           // the sending period: rates are per second of it
  double client_cpu_cores = 0;  // user + sys of this process over wall time
  Counters counters;
  Histogram latency_ns;
  std::uint64_t ids = 0;
  std::string error;  // the first thread's failure

  double loss() const {
    const std::uint64_t asked = rate > 0 ? counters.scheduled : counters.sent;
    return asked == 0 ? 1.0 : 1.0 - static_cast<double>(counters.answered_ok) / static_cast<double>(asked);
  }
};

// One run at `rate` (0: closed loop) for `seconds`; its IDs are appended to `all_ids`.
Totals run_once(const Options& options, const sockaddr_in& server, double rate, double seconds,
                flurry::perf::IdRanges& all_ids) {
  std::vector<ThreadResult> results(options.threads);
  const double cpu_before = cpu_seconds();
  const auto started = Clock::now();
  const Plan plan{
      server,
      proto::request_size_for_ids(options.count, options.ids_per_range),
      std::max<std::uint64_t>(1, options.requests / options.threads),
      started,
      started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)),
      rate / options.threads};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < options.threads; ++t) {
    threads.emplace_back([&options, &plan, &results, t] { LoadThread(options, plan, t, results[t]).run(); });
  }
  for (auto& thread : threads) thread.join();
  Totals totals;
  totals.rate = rate;
  const double wall = std::chrono::duration<double>(Clock::now() - started).count();
  totals.seconds = rate > 0 ? seconds : wall;
  totals.client_cpu_cores = (cpu_seconds() - cpu_before) / wall;
  for (ThreadResult& result : results) {
    if (totals.error.empty()) totals.error = result.error;
    totals.counters += result.counters;
    totals.latency_ns.add(result.latency_ns);
    totals.ids += result.ids.ids();
    all_ids.append(result.ids);
  }
  return totals;
}

// ---- report ----

double us(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

nlohmann::json run_json(const Totals& totals) {
  const Counters& c = totals.counters;
  const Histogram& latency = totals.latency_ns;
  return {
      {"offered_per_second", totals.rate},
      {"seconds", totals.seconds},
      {"requests_scheduled", c.scheduled},
      {"requests_sent", c.sent},
      {"requests_answered", c.answered},
      {"requests_per_second", static_cast<double>(c.answered) / totals.seconds},
      {"ids", totals.ids},
      {"ids_per_second", static_cast<double>(totals.ids) / totals.seconds},
      {"retry", c.retry},
      {"other_status", c.other_status},
      {"lost", c.lost},
      {"loss", totals.loss()},
      {"malformed_or_late", c.malformed},
      {"p50_us", us(latency.value_at_percentile(50))},
      {"p90_us", us(latency.value_at_percentile(90))},
      {"p99_us", us(latency.value_at_percentile(99))},
      {"p999_us", us(latency.value_at_percentile(99.9))},
      {"p9999_us", us(latency.value_at_percentile(99.99))},
      {"max_us", us(latency.max())},
      {"client_cpu_cores", totals.client_cpu_cores},
  };
}

std::string read_first_line_with(const char* path, std::string_view key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "";
}

// The server's INFO (layout and workers), asked once; null if it does not answer (--echo).
nlohmann::json server_info(const sockaddr_in& server) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  std::array<std::uint8_t, proto::datagram_size_max> buffer{};
  proto::Request info;
  info.opcode = proto::Opcode::info;
  info.request_id = 0x1f0;
  const std::size_t size = proto::encode_request(info, buffer);
  nlohmann::json result = nullptr;
  pollfd ready{fd, POLLIN, 0};
  if (connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) == 0 &&
      send(fd, buffer.data(), size, 0) == static_cast<ssize_t>(size) && poll(&ready, 1, 500) == 1) {
    const ssize_t n = recv(fd, buffer.data(), buffer.size(), 0);
    const auto view = proto::decode_response({buffer.data(), n > 0 ? static_cast<std::size_t>(n) : 0});
    if (n > 0 && view.error == proto::ResponseError::ok && view.header.opcode == proto::Opcode::info &&
        view.body.size() == proto::info_body_size) {
      const proto::Info i = view.info();
      result = {{"node", view.header.node}, {"workers", i.workers},     {"time_unit_ms", i.time_unit_ms},
                {"time_bits", i.time_bits}, {"node_bits", i.node_bits}, {"sequence_bits", i.sequence_bits},
                {"core_bits", i.core_bits}};
    }
  }
  close(fd);
  return result;
}

nlohmann::json environment(const sockaddr_in& server, bool echo) {
  utsname name{};
  uname(&name);
  return {{"cpu", read_first_line_with("/proc/cpuinfo", "model name")},
          {"cores_online", std::thread::hardware_concurrency()},
          {"kernel", std::string(name.sysname) + " " + name.release},
          {"host", name.nodename},
          {"flurry_bench_version", FLURRY_VERSION},
          {"server_info", echo ? nlohmann::json(nullptr) : server_info(server)}};
}

nlohmann::json options_json(const Options& options) {
  return {
      {"label", options.label},
      {"server", options.server},
      {"threads", options.threads},
      {"window", options.window},
      {"count", options.count},
      {"echo", options.echo},
      {"batch", options.batch},
      {"poll_us", options.poll_us},
      {"gso", options.gso},
      {"seq", options.seq},
      {"request_bytes",
       std::max(proto::request_size_for_ids(options.count, options.ids_per_range),
                options.seq.empty() ? std::size_t{0} : proto::request_header_size + 1 + options.seq.size())}};
}

void print_run(const Options& options, std::string_view mode, const nlohmann::json& run) {
  fmt::print(
      "{}{} threads x window {}, count {}{}, {}: {:.0f} req/s, {:.0f} IDs/s; latency p50 {:.1f} us, "
      "p90 {:.1f} us, p99 {:.1f} us, p99.9 {:.1f} us, max {:.1f} us; lost {}, retry {}; client CPU {:.2f} "
      "cores\n",
      options.label.empty() ? "" : options.label + ": ", options.threads, options.window, options.count,
      options.echo ? " (echo)" : "", mode, run["requests_per_second"].get<double>(),
      run["ids_per_second"].get<double>(), run["p50_us"].get<double>(), run["p90_us"].get<double>(),
      run["p99_us"].get<double>(), run["p999_us"].get<double>(), run["max_us"].get<double>(),
      run["lost"].get<std::uint64_t>(), run["retry"].get<std::uint64_t>(),
      run["client_cpu_cores"].get<double>());
}

// ---- modes ----

struct Outcome {
  nlohmann::json report;
  std::uint64_t answered = 0;
  std::string error;
};

Outcome single_run(const Options& options, const sockaddr_in& server, flurry::perf::IdRanges& ids) {
  const Totals totals = run_once(options, server, options.rate, options.duration_s, ids);
  nlohmann::json report = options_json(options);
  report.update(run_json(totals));
  report["mode"] = options.rate > 0 ? "open" : "closed";
  if (!options.json) print_run(options, report["mode"].get<std::string>(), report);
  if (!flurry::perf::write_hgrm(options.hgrm, totals.latency_ns, "flurry-bench"))
    return {report, totals.counters.answered, "--hgrm failed"};
  return {report, totals.counters.answered, totals.error};
}

// Binary search in (low, high] for the highest rate whose trial loses at most `loss_allowed`.
double search_rate(const Options& options, const sockaddr_in& server, double low, double high,
                   double loss_allowed, nlohmann::json& trials, flurry::perf::IdRanges& ids) {
  double best = 0;
  for (unsigned step = 0; step < options.search_steps && high - low > 1; ++step) {
    const double rate = step == 0 ? high : (low + high) / 2;
    const Totals totals = run_once(options, server, rate, options.trial_s, ids);
    const bool pass = totals.error.empty() && totals.loss() <= loss_allowed;
    nlohmann::json trial = run_json(totals);
    trial["criterion"] = loss_allowed;
    trial["pass"] = pass;
    trials.push_back(trial);
    if (!options.json) {
      fmt::print("  trial {:.0f}/s: loss {:.4f} %, p99 {:.1f} us: {}\n", rate, 100 * totals.loss(),
                 trial["p99_us"].get<double>(), pass ? "pass" : "fail");
    }
    if (pass) {
      best = rate;
      if (step == 0) break;  // the top of the range already passes
      low = rate;
    } else {
      high = rate;
    }
  }
  return best;
}

Outcome max_rate(Options options, const sockaddr_in& server, flurry::perf::IdRanges& ids) {
  const Totals probe = run_once(options, server, 0, options.trial_s, ids);
  nlohmann::json report = options_json(options);
  report["mode"] = "max-rate";
  report["closed_loop_probe"] = run_json(probe);
  if (!probe.error.empty() || probe.counters.answered == 0)
    return {report, probe.counters.answered, probe.error};
  const double ceiling = 1.25 * static_cast<double>(probe.counters.answered) / probe.seconds;
  nlohmann::json trials = nlohmann::json::array();
  const double best_loss = search_rate(options, server, 0, ceiling, options.loss_allowed, trials, ids);
  const double best_zero = best_loss == 0 ? 0 : search_rate(options, server, 0, best_loss, 0.0, trials, ids);
  report["trials"] = trials;
  report["max_rate_loss_allowed"] = options.loss_allowed;
  report["max_rate_at_loss_allowed"] = best_loss;
  report["max_rate_zero_loss"] = best_zero;
  nlohmann::json at = nlohmann::json::object();
  std::uint64_t answered = probe.counters.answered;
  for (const int percent : {10, 50, 90}) {
    if (best_loss == 0) break;
    const Totals totals = run_once(options, server, best_loss * percent / 100.0, options.duration_s, ids);
    at[std::to_string(percent)] = run_json(totals);
    answered += totals.counters.answered;
    if (percent == 50 && !flurry::perf::write_hgrm(options.hgrm, totals.latency_ns, "flurry-bench"))
      return {report, answered, "--hgrm failed"};
  }
  report["latency_at_percent_of_max"] = at;
  if (!options.json) {
    fmt::print("max rate: {:.0f} req/s at <= {:.2f} % loss, {:.0f} req/s at 0 % loss\n", best_loss,
               100 * options.loss_allowed, best_zero);
    for (auto& [percent, run] : at.items()) print_run(options, "open loop at " + percent + " % of max", run);
  }
  return {report, answered, ""};
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (const auto exit_code = parse_options(argc, argv, options)) return *exit_code;
  const auto server = flurry::perf::parse_ipv4_endpoint(options.server);
  if (!server) {
    std::fprintf(stderr, "flurry-bench: --server '%s' must be IPv4ADDR:PORT (port 1..65535)\n",
                 options.server.c_str());
    return 2;
  }
  if (options.key && !options.echo) {
    const nlohmann::json info = server_info(*server);
    if (info.contains("node")) options.server_node = info["node"].get<std::uint32_t>();
  }
  flurry::perf::IdRanges ids;
  Outcome outcome = options.max_rate ? max_rate(options, *server, ids) : single_run(options, *server, ids);
  const std::uint64_t duplicates = flurry::perf::count_duplicate_ids_parallel(ids.spans());
  outcome.report["ids_checked"] = ids.ids();
  outcome.report["duplicates"] = duplicates;
  outcome.report["environment"] = environment(*server, options.echo);
  if (options.json) {
    std::puts(outcome.report.dump().c_str());
  } else {
    fmt::print("{} IDs checked, {} duplicates\n", ids.ids(), duplicates);
  }
  if (!outcome.error.empty()) {
    std::fprintf(stderr, "flurry-bench: %s\n", outcome.error.c_str());
    return 1;
  }
  if (duplicates != 0) {
    std::fprintf(stderr, "flurry-bench: %llu DUPLICATE IDs\n", static_cast<unsigned long long>(duplicates));
    return 1;
  }
  if (outcome.answered == 0) {
    std::fprintf(stderr, "flurry-bench: no answer from %s\n", options.server.c_str());
    return 1;
  }
  return 0;
}
