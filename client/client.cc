// client/client.cc — see client.h for the contract.
//
// Shape: one unconnected UDP socket and one eventfd that only the destructor writes (so every
// wait — for an answer, or after a RETRY — ends at once when the Client is being destroyed).
// `io_mutex` serializes exchanges: at most one request is outstanding, and each datagram sent
// carries a fresh request id, so anything that arrives is either the answer to the request
// now outstanding or is ignored. The prefetch buffer is a tbb::concurrent_bounded_queue; only
// threads holding `io_mutex` push into it and everyone else only pops, so the free space
// computed under the lock can only grow before the push and try_push never fails.
#include "client/client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <charconv>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <random>
#include <span>
#include <system_error>
#include <thread>

#include <tbb/concurrent_queue.h>

namespace flurry::client {
namespace {

using Clock = std::chrono::steady_clock;

// A conservative guess of how many IDs one range carries (a 12-bit sequence shared by 16
// workers, or js-safe's 11 bits shared by 8). It only sizes the request padding: a server with
// smaller slices answers with fewer IDs and the client asks again for the rest.
constexpr std::size_t ids_per_range_assumed = 256;
constexpr std::size_t ranges_per_answer_max = proto::ranges_max(proto::datagram_size_max);

// A RETRY hint of 0 must not turn into a busy loop.
constexpr std::chrono::microseconds retry_wait_min{50};

// After a failed background refill the prefetch thread waits this long (or for destruction)
// before it may try again, so a dead server is not hammered by an idle client.
constexpr std::chrono::milliseconds refill_backoff{250};

std::string errno_text(int err) { return std::system_category().message(err); }

void set_error(Error* error, ErrorCode code, std::string message) {
  if (error == nullptr) return;
  error->code = code;
  error->message = std::move(message);
}

struct Server {
  std::string name;  // as given in Options::servers
  sockaddr_in address{};
};

std::optional<Server> resolve(const std::string& text, Error* error) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    set_error(error, ErrorCode::invalid_argument,
              "server '" + text + "' is not HOST:PORT, e.g. 127.0.0.1:7420");
    return std::nullopt;
  }
  const std::string host = text.substr(0, colon);
  const std::string_view port_text = std::string_view(text).substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port == 0 ||
      port > 65535) {
    set_error(error, ErrorCode::invalid_argument,
              "server '" + text + "': port must be a number 1..65535");
    return std::nullopt;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* result = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    const std::string why = rc == EAI_SYSTEM ? errno_text(errno) : ::gai_strerror(rc);
    set_error(error, ErrorCode::resolve_failed,
              "server '" + text + "': cannot resolve '" + host + "' to an IPv4 address: " + why);
    if (result != nullptr) ::freeaddrinfo(result);
    return std::nullopt;
  }
  Server server;
  server.name = text;
  std::memcpy(&server.address, result->ai_addr, sizeof server.address);
  server.address.sin_port = htons(static_cast<std::uint16_t>(port));
  ::freeaddrinfo(result);
  return server;
}

bool check_options(const Options& options, Error* error) {
  auto fail = [error](std::string message) {
    set_error(error, ErrorCode::invalid_argument, std::move(message));
    return false;
  };
  if (options.servers.empty()) return fail("no server given; pass at least one HOST:PORT");
  if (options.servers.size() > servers_max) {
    return fail(std::to_string(options.servers.size()) + " servers given; at most " +
                std::to_string(servers_max) + " are allowed");
  }
  if (options.timeout < timeout_min || options.timeout > timeout_max) {
    return fail("timeout " + std::to_string(options.timeout.count()) + " ms is out of range " +
                std::to_string(timeout_min.count()) + ".." + std::to_string(timeout_max.count()) +
                " ms");
  }
  if (options.attempts < 1 || options.attempts > attempts_max) {
    return fail("attempts " + std::to_string(options.attempts) + " is out of range 1.." +
                std::to_string(attempts_max));
  }
  if (options.ids_per_request < 1 || options.ids_per_request > proto::count_max) {
    return fail("ids per request " + std::to_string(options.ids_per_request) +
                " is out of range 1.." + std::to_string(proto::count_max));
  }
  if (options.prefetch != 0 &&
      (options.prefetch < prefetch_min || options.prefetch > prefetch_max)) {
    return fail("prefetch " + std::to_string(options.prefetch) + " is out of range: 0 (off) or " +
                std::to_string(prefetch_min) + ".." + std::to_string(prefetch_max));
  }
  if (options.retry_wait_max < std::chrono::milliseconds{1} ||
      options.retry_wait_max > retry_wait_max_max) {
    return fail("retry wait max " + std::to_string(options.retry_wait_max.count()) +
                " ms is out of range 1.." + std::to_string(retry_wait_max_max.count()) + " ms");
  }
  if (options.retry_budget < std::chrono::milliseconds{0} ||
      options.retry_budget > retry_budget_max) {
    return fail("retry budget " + std::to_string(options.retry_budget.count()) +
                " ms is out of range 0.." + std::to_string(retry_budget_max.count()) + " ms");
  }
  return true;
}

// Request size (with zero padding) that lets the answer carry enough ranges for `count` IDs.
std::size_t padded_size_for(std::uint32_t count) {
  return proto::request_size_for_ids(count, ids_per_range_assumed);
}

timespec to_timespec(Clock::duration duration) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count();
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  return ts;
}

}  // namespace

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::resolve_failed: return "resolve_failed";
    case ErrorCode::system: return "system";
    case ErrorCode::no_answer: return "no_answer";
    case ErrorCode::fenced: return "fenced";
    case ErrorCode::retry_exhausted: return "retry_exhausted";
    case ErrorCode::bad_request: return "bad_request";
    case ErrorCode::unauthorized: return "unauthorized";
    case ErrorCode::shutting_down: return "shutting_down";
  }
  return "unknown";
}

proto::Layout to_layout(const proto::Info& info) {
  return proto::layout_of(info);
}

struct Client::Impl {
  // An accepted answer to the outstanding request.
  struct Answer {
    proto::ResponseHeader header;
    std::array<proto::Range, ranges_per_answer_max> ranges{};
    proto::Info info;
    Clock::time_point received;
    std::size_t server = 0;
  };

  enum class Wait { answer, timeout, shutdown };

  // Why one attempt failed, for the error message.
  struct Failure {
    enum Kind : std::uint8_t { timeout, fenced, send_failed } kind = timeout;
    std::size_t server = 0;
    int err = 0;
  };

  struct AtomicCounters {
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> responses{0};
    std::atomic<std::uint64_t> retries{0};
    std::atomic<std::uint64_t> timeouts{0};
    std::atomic<std::uint64_t> fenced{0};
    std::atomic<std::uint64_t> ignored_responses{0};
    std::atomic<std::uint64_t> malformed_responses{0};
    std::atomic<std::uint64_t> send_errors{0};
    std::atomic<std::uint64_t> ids_received{0};
    std::atomic<std::uint64_t> prefetch_refills{0};
    std::atomic<std::uint64_t> prefetch_failures{0};
  };

  static void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
    counter.fetch_add(n, std::memory_order_relaxed);
  }

  Options options;
  std::vector<Server> servers;
  int socket_fd = -1;
  int wake_fd = -1;  // eventfd; readable once destruction has begun

  // One outstanding request: guards the socket, the fields below and pushes into `buffer`.
  std::mutex io_mutex;
  std::size_t current = 0;  // index into servers
  std::uint64_t next_request_id = 0;
  std::array<std::uint8_t, proto::datagram_size_max> send_buffer{};
  // One byte more than any valid datagram, so an oversize one is seen as such.
  std::array<std::uint8_t, proto::datagram_size_max + 1> receive_buffer{};
  Answer answer;
  Clock::duration rtt{0};  // of `answer`, from the send of the attempt it answered
  std::vector<Failure> failures;  // of the current exchange, for its error message

  AtomicCounters counters;

  // Prefetch (options.prefetch != 0).
  tbb::concurrent_bounded_queue<std::uint64_t> buffer;
  std::mutex refill_mutex;
  std::condition_variable refill_cv;
  bool refill_wanted = true;             // under refill_mutex
  std::atomic<bool> stopping{false};     // set under refill_mutex
  std::atomic<bool> refill_requested{true};  // a wake-up is pending or a refill is running
  std::thread refill_thread;

  ~Impl() {
    {
      std::lock_guard lock(refill_mutex);
      stopping.store(true);
    }
    refill_cv.notify_all();
    if (wake_fd >= 0) {
      const std::uint64_t one = 1;
      // Cannot fail short of a bug: the counter is far from overflowing.
      [[maybe_unused]] const ssize_t written = ::write(wake_fd, &one, sizeof one);
    }
    if (refill_thread.joinable()) refill_thread.join();
    if (socket_fd >= 0) ::close(socket_fd);
    if (wake_fd >= 0) ::close(wake_fd);
  }

  void advance() { current = (current + 1) % servers.size(); }

  // Sleeps `duration` unless destruction begins; returns false if it did.
  bool sleep_for(Clock::duration duration) {
    const Clock::time_point deadline = Clock::now() + duration;
    for (;;) {
      const Clock::time_point now = Clock::now();
      if (now >= deadline) return true;
      pollfd fd{wake_fd, POLLIN, 0};
      const timespec ts = to_timespec(deadline - now);
      if (::ppoll(&fd, 1, &ts, nullptr) > 0 && (fd.revents & POLLIN) != 0) return false;
    }
  }

  // Checks an answer that echoes the outstanding request's id against that request: the
  // rules of proto/PROTOCOL.md "Response decoding" that need the request. decode_response has
  // already checked everything else (status for the opcode, ranges only in OK GET_IDS answers,
  // ranges nonempty, increasing, below 2^63).
  static bool consistent(const proto::ResponseView& view, const proto::Request& request) {
    if (view.header.opcode != request.opcode) return false;
    std::uint64_t ids = 0;
    for (std::size_t i = 0; i < view.header.range_count; ++i) ids += view.range(i).count;
    return ids <= request.count;  // never more IDs than asked
  }

  // Classifies one received datagram; true if it is the answer to `request`.
  bool accept(std::span<const std::uint8_t> datagram, const proto::Request& request) {
    const proto::ResponseView view = proto::decode_response(datagram);
    if (view.error != proto::ResponseError::ok) {
      bump(counters.malformed_responses);
      return false;
    }
    if (view.header.request_id != request.request_id) {
      bump(counters.ignored_responses);  // late answer to an earlier attempt, or foreign
      return false;
    }
    if (!consistent(view, request)) {
      bump(counters.malformed_responses);
      return false;
    }
    answer.header = view.header;
    if (view.header.status == proto::Status::ok) {
      if (request.opcode == proto::Opcode::info) answer.info = view.info();
      for (std::size_t i = 0; i < view.header.range_count; ++i) answer.ranges[i] = view.range(i);
    }
    return true;
  }

  // Waits until the answer to `request` arrives (into `answer`), the deadline passes, or
  // destruction begins. Everything else that arrives is counted and dropped.
  Wait await(const proto::Request& request, Clock::time_point deadline) {
    for (;;) {
      for (;;) {
        const ssize_t n =
            ::recv(socket_fd, receive_buffer.data(), receive_buffer.size(), MSG_DONTWAIT);
        if (n < 0) {
          if (errno == EINTR) continue;
          break;  // EAGAIN: drained. Other errors are transient on an unconnected socket.
        }
        if (accept(std::span<const std::uint8_t>(receive_buffer.data(), static_cast<std::size_t>(n)),
                   request)) {
          answer.received = Clock::now();
          return Wait::answer;
        }
      }
      const Clock::time_point now = Clock::now();
      if (now >= deadline) return Wait::timeout;
      std::array<pollfd, 2> fds{{{socket_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}}};
      const timespec ts = to_timespec(deadline - now);
      const int rc = ::ppoll(fds.data(), fds.size(), &ts, nullptr);
      if (rc > 0 && (fds[1].revents & POLLIN) != 0) return Wait::shutdown;
      if (rc > 0 && (fds[0].revents & POLLERR) != 0) {
        int pending = 0;  // clear a queued socket error so ppoll does not spin on it
        socklen_t length = sizeof pending;
        ::getsockopt(socket_fd, SOL_SOCKET, SO_ERROR, &pending, &length);
      }
    }
  }

  std::string timeout_text() const { return std::to_string(options.timeout.count()) + " ms"; }

  void fail_attempts(Error* error) const {
    const std::string attempts_text =
        std::to_string(options.attempts) + (options.attempts == 1 ? " attempt" : " attempts");
    bool all_timeouts = true;
    bool any_fenced = false;
    std::vector<std::size_t> order;  // servers in order of first failure
    for (const Failure& failure : failures) {
      all_timeouts = all_timeouts && failure.kind == Failure::timeout;
      any_fenced = any_fenced || failure.kind == Failure::fenced;
      if (std::find(order.begin(), order.end(), failure.server) == order.end()) {
        order.push_back(failure.server);
      }
    }
    std::string names;
    for (std::size_t server : order) names += (names.empty() ? "" : ", ") + servers[server].name;
    if (all_timeouts) {
      set_error(error, ErrorCode::no_answer,
                "no answer from " + names + " after " + attempts_text + " of " + timeout_text());
      return;
    }
    std::string text = "no server could serve the request after " + attempts_text + ":";
    for (std::size_t server : order) {
      std::size_t timeouts = 0;
      std::size_t fenced = 0;
      std::size_t send_failed = 0;
      int err = 0;
      for (const Failure& failure : failures) {
        if (failure.server != server) continue;
        if (failure.kind == Failure::timeout) ++timeouts;
        if (failure.kind == Failure::fenced) ++fenced;
        if (failure.kind == Failure::send_failed) {
          ++send_failed;
          err = failure.err;
        }
      }
      auto times = [](std::size_t n) { return n == 1 ? std::string(" once") : " " + std::to_string(n) + " times"; };
      text += " " + servers[server].name;
      std::string sep;
      if (fenced > 0) {
        text += " answered FENCED" + times(fenced) + " (it lost its node id)";
        sep = ",";
      }
      if (timeouts > 0) {
        text += sep + " gave no answer within " + timeout_text() + times(timeouts);
        sep = ",";
      }
      if (send_failed > 0) text += sep + " could not be sent to (" + errno_text(err) + ")" + times(send_failed);
      text += ";";
    }
    text.pop_back();
    set_error(error, any_fenced ? ErrorCode::fenced : ErrorCode::no_answer, std::move(text));
  }

  bool shutting_down(Error* error) const {
    set_error(error, ErrorCode::shutting_down, "the client is being destroyed");
    return false;
  }

  // One request/answer exchange with failover and RETRY handling; leaves the accepted answer
  // (status OK) in `answer` and its round-trip time in `rtt`. Caller holds io_mutex.
  bool exchange(proto::Opcode opcode, std::uint32_t count, std::size_t padded_size, Error* error) {
    failures.clear();
    Clock::duration retry_waited{0};
    unsigned attempt = 0;
    while (attempt < options.attempts) {
      const std::size_t server_index = current;
      const Server& server = servers[server_index];
      proto::Request request;
      request.opcode = opcode;
      request.count = count;
      request.request_id = next_request_id++;
      const std::size_t size = proto::encode_request(request, send_buffer, padded_size);
      const Clock::time_point sent = Clock::now();
      bump(counters.requests);
      ssize_t n = -1;
      do {
        n = ::sendto(socket_fd, send_buffer.data(), size, 0,
                     reinterpret_cast<const sockaddr*>(&server.address), sizeof server.address);
      } while (n < 0 && errno == EINTR);
      if (n < 0) {
        bump(counters.send_errors);
        failures.push_back({Failure::send_failed, server_index, errno});
        advance();
        ++attempt;
        // A send that fails at once (no route) must not spin through the attempts.
        if (!sleep_for(std::chrono::milliseconds{1})) return shutting_down(error);
        continue;
      }
      const Wait wait = await(request, sent + options.timeout);
      if (wait == Wait::shutdown) return shutting_down(error);
      if (wait == Wait::timeout) {
        bump(counters.timeouts);
        failures.push_back({Failure::timeout, server_index, 0});
        advance();
        ++attempt;
        continue;
      }
      bump(counters.responses);
      answer.server = server_index;
      const proto::ResponseHeader& header = answer.header;
      switch (header.status) {
        case proto::Status::ok:
          rtt = answer.received - sent;
          return true;
        case proto::Status::retry: {
          bump(counters.retries);
          const Clock::duration wait_for = std::clamp<Clock::duration>(
              std::chrono::microseconds{header.detail}, retry_wait_min, options.retry_wait_max);
          if (retry_waited + wait_for > options.retry_budget) {
            set_error(error, ErrorCode::retry_exhausted,
                      server.name + " kept answering RETRY for " +
                          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             retry_waited).count()) +
                          " ms (budget " + std::to_string(options.retry_budget.count()) +
                          " ms): its issue ceiling is not rising; is its watermark store or "
                          "etcd stalled?");
            return false;
          }
          if (!sleep_for(wait_for)) return shutting_down(error);
          retry_waited += wait_for;
          continue;  // same server, same attempt
        }
        case proto::Status::fenced:
          bump(counters.fenced);
          failures.push_back({Failure::fenced, server_index, 0});
          advance();
          ++attempt;
          continue;
        case proto::Status::bad_request:
        case proto::Status::unauthorized: {
          const bool bad = header.status == proto::Status::bad_request;
          const std::string_view reason =
              header.detail <= 0xff
                  ? proto::to_string(static_cast<proto::RequestError>(header.detail))
                  : std::string_view("unknown");
          set_error(error, bad ? ErrorCode::bad_request : ErrorCode::unauthorized,
                    server.name + " answered " + std::string(proto::to_string(header.status)) +
                        " (" + std::string(reason) + ") to " +
                        std::string(proto::to_string(opcode)) +
                        (bad ? ": the server rejects this request; is the client built for "
                               "another wire version?"
                             : ": this server requires authentication, which this client "
                               "does not support"));
          return false;
        }
      }
      // consistent() admits no other status: a broken invariant, not bad input.
      std::fputs("flurry client: accepted an answer with an unknown status\n", stderr);
      std::abort();
    }
    fail_attempts(error);
    return false;
  }

  // Appends ranges holding exactly n IDs, or nothing. Caller holds io_mutex.
  bool fetch(std::size_t n, std::vector<proto::Range>& out, Error* error) {
    const std::size_t original = out.size();
    std::size_t remaining = n;
    while (remaining > 0) {
      const auto count = static_cast<std::uint32_t>(
          std::min<std::size_t>(remaining, options.ids_per_request));
      if (!exchange(proto::Opcode::get_ids, count, padded_size_for(count), error)) {
        out.resize(original);
        return false;
      }
      std::uint64_t ids = 0;
      for (std::size_t i = 0; i < answer.header.range_count; ++i) {
        out.push_back(answer.ranges[i]);
        ids += answer.ranges[i].count;
      }
      bump(counters.ids_received, ids);
      remaining -= ids;  // consistent() guarantees ids <= count <= remaining
    }
    return true;
  }

  // Pushes every ID of `ranges` after skipping the first `skip`. Caller holds io_mutex.
  void push(const std::vector<proto::Range>& ranges, std::size_t skip) {
    for (const proto::Range& range : ranges) {
      for (std::uint32_t i = 0; i < range.count; ++i) {
        if (skip > 0) {
          --skip;
          continue;
        }
        // Cannot fail: see the file comment.
        [[maybe_unused]] const bool pushed = buffer.try_push(range.first + i);
      }
    }
  }

  std::size_t buffered() const {
    const std::ptrdiff_t size = buffer.size();  // negative only with blocked pop(), unused
    return size < 0 ? 0 : static_cast<std::size_t>(size);
  }

  void maybe_wake_refill() {
    if (buffered() >= options.prefetch / 2) return;
    if (refill_requested.load(std::memory_order_relaxed)) return;
    if (refill_requested.exchange(true)) return;
    {
      std::lock_guard lock(refill_mutex);
      refill_wanted = true;
    }
    refill_cv.notify_one();
  }

  // Tops the buffer up towards options.prefetch, one request at a time (io_mutex is released
  // in between so that get()/ping() callers are not starved). Stops when the room left is
  // less than one full request (or half the buffer): topping up by a few IDs at a time while
  // consumers drain would turn one large request into many tiny ones. False on failure.
  bool refill() {
    const std::size_t batch_min =
        std::min<std::size_t>(options.ids_per_request, options.prefetch / 2);
    std::vector<proto::Range> ranges;
    bool added = false;
    while (!stopping.load()) {
      std::lock_guard io(io_mutex);
      const std::size_t size = buffered();
      const std::size_t room = size >= options.prefetch ? 0 : options.prefetch - size;
      if (room == 0 || room < batch_min) break;
      const std::size_t want = std::min<std::size_t>(room, options.ids_per_request);
      ranges.clear();
      if (!fetch(want, ranges, nullptr)) {
        if (!stopping.load()) bump(counters.prefetch_failures);
        return false;
      }
      push(ranges, 0);
      added = true;
    }
    if (added) bump(counters.prefetch_refills);
    return true;
  }

  void refill_loop() {
    std::unique_lock lock(refill_mutex);
    for (;;) {
      refill_cv.wait(lock, [this] { return stopping.load() || refill_wanted; });
      if (stopping.load()) return;
      refill_wanted = false;
      lock.unlock();
      const bool ok = refill();
      refill_requested.store(false);
      lock.lock();
      if (!ok) refill_cv.wait_for(lock, refill_backoff, [this] { return stopping.load(); });
    }
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() = default;

std::unique_ptr<Client> Client::create(const Options& options, Error* error) {
  if (!check_options(options, error)) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  for (const std::string& text : options.servers) {
    std::optional<Server> server = resolve(text, error);
    if (!server) return nullptr;
    impl->servers.push_back(std::move(*server));
  }
  impl->socket_fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (impl->socket_fd < 0) {
    set_error(error, ErrorCode::system, "cannot open a UDP socket: " + errno_text(errno));
    return nullptr;
  }
  impl->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wake_fd < 0) {
    set_error(error, ErrorCode::system, "cannot create an eventfd: " + errno_text(errno));
    return nullptr;
  }
  // Random start: request ids of two clients (or two runs of one) rarely meet, and a stray
  // answer to a previous process on the same port is not taken for ours.
  std::random_device random;
  impl->next_request_id = (std::uint64_t{random()} << 32) ^ random();
  impl->failures.reserve(options.attempts);
  if (options.prefetch != 0) {
    impl->buffer.set_capacity(static_cast<std::ptrdiff_t>(options.prefetch));
    try {
      Impl* raw = impl.get();
      impl->refill_thread = std::thread([raw] { raw->refill_loop(); });
    } catch (const std::system_error& e) {
      set_error(error, ErrorCode::system, std::string("cannot start the prefetch thread: ") + e.what());
      return nullptr;
    }
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

bool Client::get_ranges(std::size_t n, std::vector<proto::Range>& out, Error* error) {
  if (n > get_count_max) {
    set_error(error, ErrorCode::invalid_argument,
              "asked for " + std::to_string(n) + " IDs in one call; at most " +
                  std::to_string(get_count_max) + " are allowed");
    return false;
  }
  std::lock_guard io(impl_->io_mutex);
  return impl_->fetch(n, out, error);
}

bool Client::get(std::size_t n, std::vector<std::uint64_t>& out, Error* error) {
  std::vector<proto::Range> ranges;
  if (!get_ranges(n, ranges, error)) return false;
  out.reserve(out.size() + n);
  for (const proto::Range& range : ranges) {
    for (std::uint32_t i = 0; i < range.count; ++i) out.push_back(range.first + i);
  }
  return true;
}

std::optional<std::uint64_t> Client::next(Error* error) {
  Impl& impl = *impl_;
  if (impl.options.prefetch == 0) {
    std::vector<proto::Range> ranges;
    if (!get_ranges(1, ranges, error)) return std::nullopt;
    return ranges.front().first;
  }
  std::uint64_t id = 0;
  if (impl.buffer.try_pop(id)) {
    impl.maybe_wake_refill();
    return id;
  }
  // Empty: take the socket (waiting out a refill already in flight), then look again.
  std::lock_guard io(impl.io_mutex);
  if (!impl.buffer.try_pop(id)) {
    const std::size_t want = std::min<std::size_t>(impl.options.prefetch - impl.buffered(),
                                                   impl.options.ids_per_request);
    std::vector<proto::Range> ranges;
    if (!impl.fetch(std::max<std::size_t>(want, 1), ranges, error)) return std::nullopt;
    id = ranges.front().first;
    impl.push(ranges, 1);
  }
  impl.maybe_wake_refill();
  return id;
}

std::optional<PingResult> Client::ping(Error* error) {
  std::lock_guard io(impl_->io_mutex);
  if (!impl_->exchange(proto::Opcode::ping, 0, proto::request_header_size, error)) {
    return std::nullopt;
  }
  PingResult result;
  result.rtt = std::chrono::duration_cast<std::chrono::nanoseconds>(impl_->rtt);
  result.server = impl_->servers[impl_->answer.server].name;
  result.node = impl_->answer.header.node;
  return result;
}

std::optional<proto::Info> Client::info(Error* error) {
  std::lock_guard io(impl_->io_mutex);
  if (!impl_->exchange(proto::Opcode::info, 0, proto::request_header_size, error)) {
    return std::nullopt;
  }
  return impl_->answer.info;
}

Counters Client::counters() const {
  const Impl::AtomicCounters& c = impl_->counters;
  auto load = [](const std::atomic<std::uint64_t>& value) {
    return value.load(std::memory_order_relaxed);
  };
  Counters result;
  result.requests = load(c.requests);
  result.responses = load(c.responses);
  result.retries = load(c.retries);
  result.timeouts = load(c.timeouts);
  result.fenced = load(c.fenced);
  result.ignored_responses = load(c.ignored_responses);
  result.malformed_responses = load(c.malformed_responses);
  result.send_errors = load(c.send_errors);
  result.ids_received = load(c.ids_received);
  result.prefetch_refills = load(c.prefetch_refills);
  result.prefetch_failures = load(c.prefetch_failures);
  return result;
}

const Options& Client::options() const { return impl_->options; }

}  // namespace flurry::client
