// client/client.cc — see client.h for the contract.
//
// Shape: Client::Impl owns the parts, each in its own file under client/: the Transport (UDP
// socket, resolved servers, the wake fd that only destruction writes), the Exchange (one
// request/answer with failover, RETRY back-off and answer validation, timed by the Clock of
// Options::clock or the steady clock) and, with Options::prefetch, the Prefetch buffer and
// its refill thread. `io_mutex` serializes exchanges: at most one request is outstanding.
// Members are destroyed in reverse order: the prefetch thread is stopped and joined while the
// exchange and the transport it uses are still alive.
#include "client/client.h"

#include <sodium.h>

#include <mutex>
#include <string>

#include "client/clock.h"
#include "client/errors.h"
#include "client/exchange.h"
#include "client/prefetch.h"
#include "client/transport.h"

namespace flurry::client {
namespace {

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
                std::to_string(timeout_min.count()) + ".." + std::to_string(timeout_max.count()) + " ms");
  }
  if (options.attempts < 1 || options.attempts > attempts_max) {
    return fail("attempts " + std::to_string(options.attempts) + " is out of range 1.." +
                std::to_string(attempts_max));
  }
  if (options.ids_per_request < 1 || options.ids_per_request > proto::count_max) {
    return fail("ids per request " + std::to_string(options.ids_per_request) + " is out of range 1.." +
                std::to_string(proto::count_max));
  }
  if (options.prefetch != 0 && (options.prefetch < prefetch_min || options.prefetch > prefetch_max)) {
    return fail("prefetch " + std::to_string(options.prefetch) + " is out of range: 0 (off) or " +
                std::to_string(prefetch_min) + ".." + std::to_string(prefetch_max));
  }
  if (options.retry_wait_max < std::chrono::milliseconds{1} || options.retry_wait_max > retry_wait_max_max) {
    return fail("retry wait max " + std::to_string(options.retry_wait_max.count()) +
                " ms is out of range 1.." + std::to_string(retry_wait_max_max.count()) + " ms");
  }
  if (options.retry_budget < std::chrono::milliseconds{0} || options.retry_budget > retry_budget_max) {
    return fail("retry budget " + std::to_string(options.retry_budget.count()) + " ms is out of range 0.." +
                std::to_string(retry_budget_max.count()) + " ms");
  }
  if (options.poll < std::chrono::microseconds{0} || options.poll > poll_max) {
    return fail("poll " + std::to_string(options.poll.count()) + " us is out of range 0.." +
                std::to_string(poll_max.count()) + " us");
  }
  return true;
}

}  // namespace

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::ok:
      return "ok";
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::resolve_failed:
      return "resolve_failed";
    case ErrorCode::system:
      return "system";
    case ErrorCode::no_answer:
      return "no_answer";
    case ErrorCode::fenced:
      return "fenced";
    case ErrorCode::retry_exhausted:
      return "retry_exhausted";
    case ErrorCode::bad_request:
      return "bad_request";
    case ErrorCode::unauthorized:
      return "unauthorized";
    case ErrorCode::shutting_down:
      return "shutting_down";
    case ErrorCode::unknown_sequence:
      return "unknown_sequence";
    case ErrorCode::not_owner:
      return "not_owner";
    case ErrorCode::draining:
      return "draining";
    case ErrorCode::exhausted:
      return "exhausted";
  }
  return "unknown";
}

proto::Layout to_layout(const proto::Info& info) { return proto::layout_of(info); }

struct Client::Impl {
  explicit Impl(const Options& given)
      : options(given),
        clock(given.clock != nullptr ? *given.clock : steady_clock()),
        exchange(options, transport, clock) {}

  Options options;
  Clock& clock;
  Transport transport;
  std::mutex io_mutex;  // one outstanding request: guards `exchange` and pushes into prefetch
  Exchange exchange;
  std::unique_ptr<Prefetch> prefetch;  // null when Options::prefetch is 0
  // With prefetch on, one buffer per named sequence next_seq() asked, up to
  // seq_prefetch_names_max (later names are fetched one request per call).
  std::mutex seq_prefetch_mutex;
  std::vector<std::pair<std::string, std::unique_ptr<Prefetch>>> seq_prefetch;

  // The buffer of `name`, made and started on first use; null when prefetch is off, the
  // names are used up, or its thread cannot start.
  Prefetch* seq_buffer(std::string_view name) {
    if (options.prefetch == 0) return nullptr;
    std::lock_guard lock(seq_prefetch_mutex);
    for (auto& [buffered_name, buffer] : seq_prefetch) {
      if (buffered_name == name) return buffer.get();
    }
    if (seq_prefetch.size() >= seq_prefetch_names_max) return nullptr;
    auto buffer =
        std::make_unique<Prefetch>(options, exchange, io_mutex, transport, clock, std::string(name));
    if (!buffer->start(nullptr)) return nullptr;
    seq_prefetch.emplace_back(std::string(name), std::move(buffer));
    return seq_prefetch.back().second.get();
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() = default;

std::unique_ptr<Client> Client::create(const Options& options, Error* error) {
  if (!check_options(options, error)) return nullptr;
  // Request ids come from libsodium's ChaCha20 (client/exchange.cc), signing from its SipHash.
  if (sodium_init() < 0) {
    set_error(error, ErrorCode::system, "libsodium failed to initialise (sodium_init)");
    return nullptr;
  }
  auto impl = std::make_unique<Impl>(options);
  if (!impl->transport.open(options.servers, error)) return nullptr;
  if (options.prefetch != 0) {
    impl->prefetch = std::make_unique<Prefetch>(impl->options, impl->exchange, impl->io_mutex,
                                                impl->transport, impl->clock);
    if (!impl->prefetch->start(error)) return nullptr;
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

namespace {

// n within get_count_max; `what` names the unit in the message.
bool count_allowed(std::size_t n, std::string_view what, Error* error) {
  if (n <= get_count_max) return true;
  set_error(error, ErrorCode::invalid_argument,
            "asked for " + std::to_string(n) + " " + std::string(what) + " in one call; at most " +
                std::to_string(get_count_max) + " are allowed");
  return false;
}

}  // namespace

bool Client::get_ranges(std::size_t n, std::vector<proto::Range>& out, Error* error) {
  if (!count_allowed(n, "IDs", error)) return false;
  std::lock_guard io(impl_->io_mutex);
  return impl_->exchange.fetch(n, out, error);
}

namespace {

void expand(const std::vector<proto::Range>& ranges, std::size_t n, std::vector<std::uint64_t>& out) {
  out.reserve(out.size() + n);
  for (const proto::Range& range : ranges) {
    for (std::uint32_t i = 0; i < range.count; ++i) out.push_back(range.first + i);
  }
}

}  // namespace

bool Client::get(std::size_t n, std::vector<std::uint64_t>& out, Error* error) {
  std::vector<proto::Range> ranges;
  if (!get_ranges(n, ranges, error)) return false;
  expand(ranges, n, out);
  return true;
}

bool Client::get_seq_ranges(std::string_view name, std::size_t n, std::vector<proto::Range>& out,
                            Error* error) {
  if (!proto::valid_seq_name(name)) {
    set_error(error, ErrorCode::invalid_argument,
              "bad sequence name '" + std::string(name.substr(0, 64)) +
                  "': 1 to 32 characters from A-Z a-z 0-9 _ . - :");
    return false;
  }
  if (!count_allowed(n, "numbers", error)) return false;
  std::lock_guard io(impl_->io_mutex);
  return impl_->exchange.fetch_seq(name, n, out, error);
}

bool Client::get_seq(std::string_view name, std::size_t n, std::vector<std::uint64_t>& out, Error* error) {
  std::vector<proto::Range> ranges;
  if (!get_seq_ranges(name, n, ranges, error)) return false;
  expand(ranges, n, out);
  return true;
}

std::optional<std::uint64_t> Client::next_seq(std::string_view name, Error* error) {
  if (proto::valid_seq_name(name)) {
    if (Prefetch* buffer = impl_->seq_buffer(name)) return buffer->next(error);
  }
  std::vector<proto::Range> ranges;
  if (!get_seq_ranges(name, 1, ranges, error)) return std::nullopt;
  return ranges.front().first;
}

std::optional<std::uint64_t> Client::next(Error* error) {
  if (impl_->prefetch != nullptr) return impl_->prefetch->next(error);
  std::vector<proto::Range> ranges;
  if (!get_ranges(1, ranges, error)) return std::nullopt;
  return ranges.front().first;
}

std::optional<PingResult> Client::ping(Error* error) {
  std::lock_guard io(impl_->io_mutex);
  Exchange& exchange = impl_->exchange;
  if (!exchange.run(proto::Opcode::ping, 0, proto::request_header_size, error)) {
    return std::nullopt;
  }
  PingResult result;
  result.rtt = std::chrono::duration_cast<std::chrono::nanoseconds>(exchange.rtt());
  result.server = impl_->transport.name(exchange.answer().server);
  result.node = exchange.answer().header.node;
  return result;
}

std::optional<proto::Info> Client::info(Error* error) {
  std::lock_guard io(impl_->io_mutex);
  if (!impl_->exchange.run(proto::Opcode::info, 0, proto::request_header_size, error)) {
    return std::nullopt;
  }
  return impl_->exchange.answer().info;
}

Counters Client::counters() const {
  Counters result;
  impl_->exchange.report(result);
  if (impl_->prefetch != nullptr) impl_->prefetch->report(result);
  std::lock_guard lock(impl_->seq_prefetch_mutex);
  for (const auto& [name, buffer] : impl_->seq_prefetch) buffer->report(result);
  return result;
}

const Options& Client::options() const { return impl_->options; }

}  // namespace flurry::client
