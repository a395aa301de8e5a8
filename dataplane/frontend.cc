// dataplane/frontend.cc — see frontend.h.
#include "dataplane/frontend.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "dataplane/http_frontend.h"
#include "dataplane/memcache_frontend.h"
#include "dataplane/resp_frontend.h"

namespace flurry::dataplane {

std::string_view to_string(FrontendCount count) {
  switch (count) {
    case FrontendCount::connections_accepted:
      return "connections_accepted";
    case FrontendCount::requests_ids:
      return "requests_ids";
    case FrontendCount::requests_seq:
      return "requests_seq";
    case FrontendCount::requests_other:
      return "requests_other";
    case FrontendCount::ids_issued:
      return "ids_issued";
    case FrontendCount::seq_issued:
      return "seq_issued";
    case FrontendCount::answered_unknown_sequence:
      return "answered_unknown_sequence";
    case FrontendCount::answered_not_owner:
      return "answered_not_owner";
    case FrontendCount::answered_exhausted:
      return "answered_exhausted";
    case FrontendCount::answered_retry:
      return "answered_retry";
    case FrontendCount::answered_fenced:
      return "answered_fenced";
    case FrontendCount::bad_request:
      return "bad_request";
    case FrontendCount::protocol_error:
      return "protocol_error";
    case FrontendCount::logins:
      return "logins";
    case FrontendCount::login_failed:
      return "login_failed";
    case FrontendCount::answered_login_needed:
      return "answered_login_needed";
    case FrontendCount::answered_not_permitted:
      return "answered_not_permitted";
    case FrontendCount::answered_rate_limited:
      return "answered_rate_limited";
    case FrontendCount::count_:
      break;
  }
  return "unknown";
}

void FrontendCounters::visit(std::string_view counter_name, std::uint32_t core, const Door& door,
                             const CounterVisitor& visit) const {
  for (std::size_t i = 0; i < values.size(); ++i) {
    visit(counter_name, to_string(static_cast<FrontendCount>(i)), core, values[i].get());
  }
  door.visit([&](std::string_view event, std::uint64_t value) { visit(counter_name, event, core, value); });
}

std::size_t ranges_room(const core::Slice& slice, std::uint32_t ids_per_call_max) {
  return std::max(slice.ranges_for(ids_per_call_max), seq_pieces_max);
}

std::string refusal_text(const core::Issued& issued, std::string_view name) {
  const std::string quoted = "'" + std::string(name) + "'";
  switch (issued.status) {
    case proto::Status::retry:
      if (issued.source_limited) {
        return "this client address has used up its share of the node (--source-share); retry after " +
               std::to_string(issued.detail) + " us";
      }
      if (!name.empty()) {  // a named sequence ran dry on this door's slice
        return "sequence " + quoted + ": its next block has not reached this door yet (it becomes durable " +
               "first); retry after " + std::to_string(issued.detail) + " us";
      }
      return "the node's issue ceiling is reached; retry after " + std::to_string(issued.detail) + " us";
    case proto::Status::fenced:
      return issued.detail == proto::fenced_draining
                 ? "this node is draining (its operator is stopping it); ask another flurryd"
                 : "this node has lost its node id; ask another flurryd";
    case proto::Status::unknown_sequence:
      return "no sequence " + quoted + ": create it with `flurryctl seq create " + std::string(name) +
             "` (or start flurryd with --seq-auto-create segment|monotonic to create names on first use)";
    case proto::Status::not_owner:
      return "sequence " + quoted + " (monotonic) is served by " +
             (issued.detail == proto::not_owner_unknown ? std::string("another node, not known yet")
                                                        : "node " + std::to_string(issued.detail));
    case proto::Status::exhausted:
      return name.empty() ? std::string("this node's layout can issue no more IDs")
                          : "sequence " + quoted + " has no number left below 2^63";
    default:
      return "refused (" + std::string(proto::to_string(issued.status)) + ")";
  }
}

FrontendCount refusal_count(proto::Status status) {
  switch (status) {
    case proto::Status::retry:
      return FrontendCount::answered_retry;
    case proto::Status::fenced:
      return FrontendCount::answered_fenced;
    case proto::Status::unknown_sequence:
      return FrontendCount::answered_unknown_sequence;
    case proto::Status::not_owner:
      return FrontendCount::answered_not_owner;
    case proto::Status::exhausted:
      return FrontendCount::answered_exhausted;
    default:
      return FrontendCount::bad_request;
  }
}

namespace {

// Nothing issued yet, and more may come by waiting: a new sequence's first sub-block, or the
// next sub-block of one that ran dry. Not a source over its bound (that is the caller's to
// wait out) and not a partial answer (its numbers are issued: asking again would skip them).
bool worth_waiting(const core::Issued& issued) {
  return issued.ids == 0 && !issued.source_limited &&
         (issued.status == proto::Status::retry || issued.status == proto::Status::unknown_sequence);
}

}  // namespace

DoorRefusal door_refusal(DoorVerdict verdict, std::string_view key, std::uint64_t retry_hint_us) {
  const std::string quoted = "key '" + std::string(key) + "'";
  switch (verdict) {
    case DoorVerdict::served:
    case DoorVerdict::login_needed:
      break;
    case DoorVerdict::session_ended:
      return {FrontendCount::answered_login_needed,
              "this connection's key was removed or its door password changed since its login: log in again"};
    case DoorVerdict::not_permitted:
      return {FrontendCount::answered_not_permitted,
              quoted +
                  " may not: its opcodes, batch_max, seq_batch_max or sequences in the key file do not "
                  "allow this command with this count or name"};
    case DoorVerdict::rate_limited:
      return {FrontendCount::answered_rate_limited, quoted +
                                                        " is over its rate_per_s on this door; retry after " +
                                                        std::to_string(retry_hint_us) + " us"};
  }
  return {FrontendCount::answered_login_needed, {}};
}

core::Issued issue_seq_or_create(core::Slice& slice, const FrontendConfig& config, std::string_view name,
                                 std::uint32_t count, std::span<proto::Range> ranges,
                                 const core::Source& source, bool contiguous, std::string* refusal) {
  core::Issued issued = slice.issue_seq(name, count, ranges, config.clock->wall_ms(), source, contiguous);
  if (issued.status == proto::Status::unknown_sequence) {
    if (!config.create_sequence) return issued;
    if (Status created = config.create_sequence(std::string(name)); !created.ok()) {
      *refusal = "no sequence '" + std::string(name) + "', and it was not created: " + created.message();
      return issued;
    }
  } else if (!worth_waiting(issued)) {
    return issued;
  }
  // Created, or ran dry: the sub-blocks reach this slice within a step of flurry-seq (1 ms; a
  // block reservation first, a disk write or an etcd transaction). A door's caller (redis-cli,
  // redis-benchmark, a memcached client, curl) does not retry TRYAGAIN the way flurry's clients
  // retry RETRY, so the door waits, bounded: then TRYAGAIN. A pipelined INCRBY load drains a
  // slice's sub-blocks faster than one refill step; without the wait redis-benchmark stopped on
  // the first TRYAGAIN (integration_door_auth).
  const auto deadline = std::chrono::steady_clock::now() + config.sequence_wait;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    issued = slice.issue_seq(name, count, ranges, config.clock->wall_ms(), source, contiguous);
  } while (worth_waiting(issued) && std::chrono::steady_clock::now() < deadline);
  return issued;
}

Result<std::unique_ptr<Frontend>> open_frontend(core::FrontEndKind kind, const FrontendConfig& config,
                                                core::Shared& shared) {
  switch (kind) {
    case core::FrontEndKind::resp:
      return RespFrontend::open(config, shared);
    case core::FrontEndKind::http:
      return HttpFrontend::open(config, shared);
    case core::FrontEndKind::memcache:
      return MemcacheFrontend::open(config, shared);
  }
  return Error{"unknown front end"};
}

Result<int> listen_tcp(const std::string& address, std::uint16_t port, std::string_view flag) {
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &where.sin_addr) != 1) {
    return Error{std::string(flag) + ": '" + address + "' is not an IPv4 address"};
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error{std::string(flag) + ": socket: " + std::strerror(errno)};
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&where), sizeof where) != 0 || listen(fd, 128) != 0) {
    const int err = errno;
    close(fd);
    return Error{std::string(flag) + " " + address + ":" + std::to_string(port) + ": cannot listen (" +
                 std::strerror(err) + "): is another server on that port? Pick another with " +
                 std::string(flag)};
  }
  return fd;
}

}  // namespace flurry::dataplane
