// client/client.h — the flurry UDP client library (C++ API). The C ABI is client/flurry_client.h.
//
// Contract:
//   * A Client asks one server at a time over one UDP socket, one request outstanding. Every
//     datagram it sends carries a fresh request id; an answer is accepted only if it passes
//     proto::decode_response, echoes the id of the request now outstanding, and is consistent
//     with that request (same opcode, never more IDs than asked). Anything else is counted
//     and ignored, so a late answer to an earlier attempt is never taken for the current one.
//   * Statuses: OK is used; RETRY waits `detail` microseconds (clamped to
//     Options::retry_wait_max, at most Options::retry_budget in total per exchange) and asks
//     the same server again; FENCED and a timeout move to the next server and use up one of
//     Options::attempts; BAD_REQUEST and UNAUTHORIZED end the call with an error naming the
//     reason (proto::to_string(RequestError)). NOT_OWNER (a monotonic sequence another node
//     serves, in cluster mode) uses an attempt and asks the server that last answered as the
//     node it names (every non-FENCED answer's header names its node), else the next server;
//     the call fails not_owner when every server answered during it and none is the owner.
//     NOT_OWNER with no owner known (a move under way) waits 50 ms, counted in
//     Options::retry_budget, and asks the next server without using an attempt.
//   * A response may hold fewer IDs than asked (anti-amplification, ceiling); the client
//     asks again for the rest. get() returns exactly n IDs or fails and appends nothing.
//   * No exception leaves this API for network or input errors; they are reported through
//     Error. (std::bad_alloc may still propagate from the C++ API; the C ABI catches it.)
//
// Thread safety: every member function may be called from any thread. Network exchanges are
// serialized on the one socket by an internal mutex, so concurrent get()/ping()/info() calls
// queue behind each other (and behind the prefetch thread's refill). With prefetch on, next()
// is the call meant for many threads: it usually pops from a lock-free buffer without a
// network round trip. The Client must not be destroyed while another thread is inside one of
// its member functions; destruction stops the prefetch thread, interrupting any exchange it
// has in flight, and returns promptly.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proto/layout.h"
#include "proto/wire.h"

namespace flurry::client {

class Clock;  // client/clock.h

// Where flurryd listens by default (its --listen default).
inline constexpr std::string_view default_server = "127.0.0.1:7420";

// Bounds on Options, checked by Client::create (CONTRIBUTING.md, bounds: every number has a minimum and
// a maximum).
inline constexpr std::size_t servers_max = 64;
inline constexpr std::chrono::milliseconds timeout_min{1};
inline constexpr std::chrono::milliseconds timeout_max{60'000};
inline constexpr unsigned attempts_max = 100;
inline constexpr std::size_t prefetch_min = 2;
inline constexpr std::size_t prefetch_max = std::size_t{1} << 24;
inline constexpr std::chrono::milliseconds retry_wait_max_max{10'000};
inline constexpr std::chrono::milliseconds retry_budget_max{600'000};
inline constexpr std::chrono::microseconds poll_max{10'000};
// The largest n one get()/get_ranges() call accepts; ask several times for more.
inline constexpr std::size_t get_count_max = std::size_t{1} << 26;
// The most named sequences next_seq() keeps a prefetch buffer (and a refill thread) for.
inline constexpr std::size_t seq_prefetch_names_max = 16;

// An authentication key (PROTOCOL.md "Authentication"): with one, every request is signed
// and only answers whose MAC verifies are accepted.
struct Key {
  std::uint32_t id = 0;                   // the key id of the server's key file
  std::array<std::uint8_t, 16> secret{};  // the 16-byte SipHash-2-4 secret
};

struct Options {
  // "HOST:PORT" each; HOST is an IPv4 address or a name, resolved once (getaddrinfo, IPv4)
  // by Client::create. Tried in order; the client stays on a server until it times out or
  // answers FENCED. 1..servers_max entries.
  std::vector<std::string> servers{std::string(default_server)};
  // How long one attempt waits for its answer. timeout_min..timeout_max.
  std::chrono::milliseconds timeout{100};
  // Attempts per exchange; each timeout or FENCED answer moves to the next server in the
  // list (wrapping around). 1..attempts_max.
  unsigned attempts = 5;
  // The most IDs asked in one request. The request is padded with zero bytes
  // (proto::request_size_for_ranges) so that the answer may carry enough ranges for this
  // many IDs. 1..proto::count_max.
  std::uint32_t ids_per_request = 4096;
  // 0: off. Otherwise the size of a local ID buffer that a background thread refills when it
  // falls below half, so that next() usually returns without a network round trip.
  // 0 or prefetch_min..prefetch_max. IDs left in the buffer at destruction are never used.
  std::size_t prefetch = 0;
  // The longest single wait after a RETRY answer, whatever its hint. 1 ms..retry_wait_max_max.
  std::chrono::milliseconds retry_wait_max{100};
  // The most time one exchange spends waiting on RETRY answers, and on a sequence owner being
  // chosen (NOT_OWNER, no owner known), before it fails with ErrorCode::retry_exhausted (or
  // uses its attempts on the owner). 0..retry_budget_max.
  std::chrono::milliseconds retry_budget{2'000};
  // 0: off. Otherwise, after sending a request, look for the answer without sleeping for this
  // long before blocking: an answer that arrives meanwhile needs no wakeup of the calling
  // thread (on a VM that wakeup is 15-25 µs, most of a loopback round trip). Costs that
  // thread's CPU while it looks; for latency-bound callers with a core to spare. Applies to
  // calls on the application's threads, not to the prefetch threads' refills (no one waits on
  // those). Destruction still interrupts a polling call at once.
  // 0..poll_max; measured in real time whatever Options::clock is.
  std::chrono::microseconds poll{0};
  // The time source of every wait: answer timeouts, RETRY back-off, the prefetch thread's
  // back-off after a failed refill, and PingResult::rtt. Null: the real steady clock
  // (client/clock.h steady_clock()). Not owned; must outlive the Client. Tests pass a clock
  // they step, so nothing sleeps in real time.
  Clock* clock = nullptr;
  // Sign every request with this key and accept only answers whose MAC verifies (counted in
  // Counters::unverified_responses otherwise). Unsigned refusals (e.g. unknown_key) cannot be
  // trusted: they are not accepted, but their reason is named if the attempts then run out.
  std::optional<Key> key;
};

enum class ErrorCode : std::uint8_t {
  ok = 0,
  invalid_argument,  // bad Options, malformed "HOST:PORT", n above get_count_max
  resolve_failed,    // a server name has no IPv4 address
  system,            // socket(), eventfd() or thread creation failed (errno text in message)
  no_answer,         // every attempt timed out (or could not be sent)
  fenced,            // attempts ran out and at least one server answered FENCED
  retry_exhausted,   // the server kept answering RETRY for longer than retry_budget
  bad_request,       // the server answered BAD_REQUEST; message names the RequestError
  unauthorized,      // the server answered UNAUTHORIZED; message names the RequestError
  shutting_down,     // the Client is being destroyed (seen only by the prefetch thread)
  unknown_sequence,  // GET_SEQ: the server has no sequence of that name (flurryctl seq create)
  not_owner,         // GET_SEQ: a monotonic sequence served by another node (named in message)
  draining,          // attempts ran out and the servers that answered FENCED were draining
                     // (their operator is stopping them: a planned move, not a lost node id)
  exhausted,         // EXHAUSTED: the layout's time or the sequence's numbers have run out:
                     // no server will ever issue them again
};
std::string_view to_string(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::ok;
  // One sentence for a person: what failed, where, and the fix when known, e.g.
  // "no answer from 127.0.0.1:7420 after 5 attempts of 100 ms".
  std::string message;
};

// Reads a client key file: TOML with `id = N` and `secret = "32 hex digits"` at the top level
// (`name` and comments allowed). Refused unless the file is mode 0600 or stricter.
// Errors (returns false, sets *error): invalid_argument naming the file and the fix.
bool read_key_file(const std::string& path, Key* key, Error* error);

// Per-client counters, monotonic since create. Read with Client::counters().
struct Counters {
  std::uint64_t requests = 0;              // datagrams sent (every attempt and re-ask)
  std::uint64_t responses = 0;             // answers accepted for the outstanding request
  std::uint64_t retries = 0;               // RETRY answers
  std::uint64_t timeouts = 0;              // attempts that got no accepted answer in time
  std::uint64_t fenced = 0;                // FENCED answers
  std::uint64_t ignored_responses = 0;     // well-formed, but for another request id
  std::uint64_t malformed_responses = 0;   // failed decode_response, or inconsistent with
                                           // the request (wrong opcode, more IDs than asked)
  std::uint64_t send_errors = 0;           // sendto() failures (counted as failed attempts)
  std::uint64_t unverified_responses = 0;  // Options::key set: unsigned, or a MAC that does not verify
  std::uint64_t ids_received = 0;          // IDs in accepted OK answers
  std::uint64_t prefetch_refills = 0;      // background refills that added IDs
  std::uint64_t prefetch_failures = 0;     // background refills that failed
};

struct PingResult {
  std::chrono::nanoseconds rtt{0};  // send to receipt of the accepted answer
  std::string server;               // "HOST:PORT" as given in Options::servers
  std::uint16_t node = 0;           // node id from the answer's header
};

// The layout an INFO answer describes, for proto::Layout::decode. Not validated: a server
// that sent nonsense yields a nonsense layout; check it with proto::validate if it matters.
proto::Layout to_layout(const proto::Info& info);

class Client {
 public:
  // Checks `options`, resolves every server, opens the socket and, with prefetch on, starts
  // the refill thread (which begins filling at once). Sends nothing otherwise, so it succeeds
  // whether or not a server is up.
  // Errors (returns nullptr and sets *error if error is not null):
  //   invalid_argument — an option out of bounds, or a server not "HOST:PORT" with a port
  //                      1..65535;
  //   resolve_failed   — getaddrinfo found no IPv4 address for a HOST;
  //   system           — socket(), eventfd() or std::thread failed.
  static std::unique_ptr<Client> create(const Options& options, Error* error);

  // Stops and joins the prefetch thread (interrupting its exchange), closes the socket.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Appends exactly n unique IDs to `out` (in the order the server issued them), asking as
  // many times as needed; n == 0 succeeds at once. On failure appends nothing (IDs already
  // received are dropped, never reused) and returns false.
  // Errors: invalid_argument (n > get_count_max), no_answer, fenced, retry_exhausted,
  //         bad_request, unauthorized.
  bool get(std::size_t n, std::vector<std::uint64_t>& out, Error* error);

  // As get(), but appends ranges (first, count) whose counts sum to exactly n; each range
  // holds the consecutive IDs first .. first + count - 1. Same errors as get().
  bool get_ranges(std::size_t n, std::vector<proto::Range>& out, Error* error);

  // One ID. With prefetch on, pops from the local buffer (and wakes the refill thread when
  // it falls below half); when the buffer is empty, fetches synchronously. With prefetch
  // off, one request. Returns nullopt on failure.
  // Errors: no_answer, fenced, retry_exhausted, bad_request, unauthorized.
  std::optional<std::uint64_t> next(Error* error);
  // Appends ranges holding exactly n numbers of the named sequence (GET_SEQ), asking as many
  // times as needed; on failure appends nothing. Numbers are unique for the sequence; in
  // `segment` mode they increase per server core, in `monotonic` mode per sequence.
  // Errors: invalid_argument (bad name, n > get_count_max), unknown_sequence, not_owner,
  //         no_answer, fenced, retry_exhausted, bad_request, unauthorized.
  bool get_seq_ranges(std::string_view name, std::size_t n, std::vector<proto::Range>& out, Error* error);
  // As get_seq_ranges(), one number per element.
  bool get_seq(std::string_view name, std::size_t n, std::vector<std::uint64_t>& out, Error* error);
  // One number of the named sequence. With prefetch on, from a buffer of this name (made on
  // first use, refilled in the background like next()'s, at most seq_prefetch_names_max
  // names per client; numbers left in it at destruction are never used). Same errors as
  // get_seq().
  std::optional<std::uint64_t> next_seq(std::string_view name, Error* error);

  // Round-trip time of one PING exchange, with the same attempts and failover as get().
  // A fenced server still answers PING, so a ping never fails with fenced.
  // Errors: no_answer, bad_request, unauthorized.
  std::optional<PingResult> ping(Error* error);

  // The server's layout (INFO). Use to_layout() to decode its IDs.
  // Errors: no_answer, bad_request, unauthorized.
  std::optional<proto::Info> info(Error* error);

  // A snapshot of this client's counters. Never fails.
  Counters counters() const;

  // The options this client was created with. Never fails.
  const Options& options() const;

  struct Impl;  // client/client.cc

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flurry::client
