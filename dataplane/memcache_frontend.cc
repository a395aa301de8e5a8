// dataplane/memcache_frontend.cc — see memcache_frontend.h.
#include "dataplane/memcache_frontend.h"

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <span>

namespace flurry::dataplane {

namespace {

// Above every line the parser accepts (memcache.h: a get line, a storage command and its
// data), so a command always fits; the parser's limits answer first.
static_assert(memcache::keys_line_size_max < TcpDoor::input_max &&
              memcache::line_size_max + memcache::data_size_max + 2 < TcpDoor::input_max);

// config.info's `flurry_version:X` line (flurryd's INFO text), for `version` and stats.
std::string version_of(std::string_view info) {
  constexpr std::string_view field = "flurry_version:";
  const std::size_t at = info.find(field);
  if (at == std::string_view::npos) return "unknown";
  const std::string_view rest = info.substr(at + field.size());
  return std::string(rest.substr(0, rest.find_first_of("\r\n")));
}

// memcached's own words for a command before the login (memcached -Y), then how to log in.
constexpr std::string_view unauthenticated =
    "CLIENT_ERROR unauthenticated: log in first with set <any key> 0 0 <bytes> and the data "
    "'<key name> <door password>' (memcached's ASCII authentication)";

}  // namespace

Result<std::unique_ptr<Frontend>> MemcacheFrontend::open(const FrontendConfig& config, core::Shared& shared) {
  Result<int> fd = listen_tcp(config.endpoint.address, config.endpoint.port, "--memcache-listen");
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<Frontend>(new MemcacheFrontend(config, shared, fd.value()));
}

MemcacheFrontend::MemcacheFrontend(const FrontendConfig& config, core::Shared& shared, int listen_fd)
    : TcpDoor(listen_fd, "--memcache-listen", door_, counters_, shared.stop),
      config_(config),
      slice_(config.slice, shared),
      door_(config.door),
      auth_(config.auth, config.verify_password, shared, config.slice.core),
      version_(version_of(config.info)),
      ranges_(ranges_room(slice_, config.ids_per_call_max)) {
  // A get line of keys_line_size_max holds at most one key every two bytes.
  tokens_.reserve(memcache::keys_line_size_max / 2 + 1);
}

MemcacheFrontend::~MemcacheFrontend() { stop(); }

Status MemcacheFrontend::start() {
  started_ms_ = door_now_ms();
  return start_loop();
}

std::string MemcacheFrontend::describe() const {
  return "memcached protocol on tcp " + config_.endpoint.text() + " (try: printf 'get id\\r\\n' | nc -q1 " +
         config_.endpoint.address + " " + std::to_string(config_.endpoint.port) + ")";
}

void MemcacheFrontend::stop() { stop_loop(); }

void MemcacheFrontend::visit_counters(const CounterVisitor& visit) const {
  counters_.visit("memcache", config_.slice.core, door_, visit);
}

std::unique_ptr<TcpConnection> MemcacheFrontend::make_connection() { return std::make_unique<Connection>(); }

void MemcacheFrontend::before_wait() { auth_.quiesce(); }  // holds no key table between rounds (core/keys.h)

void MemcacheFrontend::after_loop() { auth_.leave(); }

bool MemcacheFrontend::process(TcpConnection& base) {
  auto& connection = static_cast<Connection&>(base);
  std::size_t at = 0;
  while (!connection.closing && connection.out.size() < output_max) {
    const memcache::Parsed parsed = memcache::parse(std::string_view(connection.in).substr(at), tokens_);
    if (parsed.result == memcache::Parse::incomplete) break;
    if (parsed.result == memcache::Parse::fatal) {
      counters_.add(FrontendCount::protocol_error);
      memcache::line(connection.out, "CLIENT_ERROR " + std::string(parsed.error));
      connection.closing = true;
      break;
    }
    at += parsed.consumed;
    execute(connection, parsed);
  }
  connection.in.erase(0, at);
  return at > 0;
}

void MemcacheFrontend::execute(Connection& connection, const memcache::Parsed& parsed) {
  std::string& out = connection.out;
  if (parsed.result == memcache::Parse::error) {
    counters_.add(FrontendCount::bad_request);
    return memcache::line(out, "ERROR");
  }
  if (parsed.result == memcache::Parse::client_error) {
    counters_.add(FrontendCount::bad_request);
    return memcache::line(out, "CLIENT_ERROR " + std::string(parsed.error));
  }
  if (parsed.verb == memcache::Verb::store && parsed.set && auth_.mode() != core::AuthMode::off)
    return command_login(connection, parsed);
  // --auth required: nothing but a login and quit before one (door_auth.h).
  if (auth_.required() && !connection.session.logged_in() && parsed.verb != memcache::Verb::quit) {
    counters_.add(FrontendCount::answered_login_needed);
    if (parsed.noreply) return;
    return memcache::line(out, unauthenticated);
  }
  const core::Key* key = nullptr;
  switch (parsed.verb) {
    case memcache::Verb::get:
    case memcache::Verb::gets:
      return command_get(connection, parsed.verb == memcache::Verb::gets);
    case memcache::Verb::incr:
      return command_incr(connection, parsed);
    case memcache::Verb::version:
      counters_.add(FrontendCount::requests_other);
      if (!admitted(connection, DoorUse::other, 1, {}, true, &key)) return;
      return memcache::line(out, "VERSION " + version_);
    case memcache::Verb::stats:
      counters_.add(FrontendCount::requests_other);
      if (tokens_.size() > 1) {  // memcached's sub-statistics (items, slabs, ...): none here
        counters_.add(FrontendCount::bad_request);
        return memcache::line(out, "ERROR");
      }
      if (!admitted(connection, DoorUse::info, 1, {}, true, &key)) return;
      return command_stats(connection);
    case memcache::Verb::quit:
      counters_.add(FrontendCount::requests_other);
      connection.closing = true;
      return;
    case memcache::Verb::decr:
      counters_.add(FrontendCount::bad_request);
      if (parsed.noreply) return;
      return memcache::line(out,
                            "CLIENT_ERROR a named sequence only goes up (incr NAME N); create and delete it "
                            "with flurryctl seq");
    case memcache::Verb::store:
    case memcache::Verb::remove:
    case memcache::Verb::touch:
      counters_.add(FrontendCount::bad_request);
      if (parsed.noreply) return;
      return memcache::line(out,
                            "CLIENT_ERROR flurry stores nothing: get KEY answers a fresh ID, incr NAME N the "
                            "numbers of a named sequence");
    case memcache::Verb::unknown:
      break;
  }
  counters_.add(FrontendCount::bad_request);
  memcache::line(out, "ERROR");
}

// set <any key> <flags> <exptime> <bytes> + `<key name> <door password>`: memcached's ASCII
// authentication. One hash verification; a failed login closes the connection (as RESP's
// WRONGPASS does): each guess costs the guesser a new connection.
void MemcacheFrontend::command_login(Connection& connection, const memcache::Parsed& parsed) {
  counters_.add(FrontendCount::requests_other);
  const std::size_t space = parsed.data.find(' ');
  std::string refused;
  if (space == std::string_view::npos || space == 0 || space + 1 == parsed.data.size()) {
    connection.session.end();
    refused = "the data of a login is '<key name> <door password>'";
  } else {
    refused = auth_.login(connection.session, parsed.data.substr(0, space), parsed.data.substr(space + 1));
  }
  if (refused.empty()) {
    counters_.add(FrontendCount::logins);
    if (!parsed.noreply) memcache::line(connection.out, "STORED");
    return;
  }
  counters_.add(FrontendCount::login_failed);
  memcache::line(connection.out, "CLIENT_ERROR authentication failure: " + refused);
  connection.closing = true;
}

bool MemcacheFrontend::admitted(Connection& connection, DoorUse use, std::uint32_t count,
                                std::string_view sequence, bool reply, const core::Key** key) {
  const DoorVerdict verdict =
      auth_.admit(connection.session, use, count, sequence, config_.clock->wall_ms(), key);
  std::string& out = connection.out;
  if (verdict == DoorVerdict::served) return true;
  if (verdict == DoorVerdict::login_needed) {
    counters_.add(FrontendCount::answered_login_needed);
    if (reply) memcache::line(out, unauthenticated);
    return false;
  }
  const DoorRefusal refusal =
      door_refusal(verdict, auth_.key_name(connection.session), config_.slice.retry_hint_us);
  counters_.add(refusal.count);
  if (!reply) return false;
  if (verdict == DoorVerdict::session_ended) {
    memcache::line(out, "CLIENT_ERROR unauthenticated: " + refusal.text);
  } else {  // rate_limited is temporary: memcached's SERVER_ERROR, as for the ceiling
    memcache::line(out,
                   (verdict == DoorVerdict::rate_limited ? "SERVER_ERROR " : "CLIENT_ERROR ") + refusal.text);
  }
  return false;
}

// get KEY... / gets KEY...: one fresh ID a key, in the order of the keys (katsubushi's answer
// to any key). All of them come in one issue, or none is answered.
void MemcacheFrontend::command_get(Connection& connection, bool cas) {
  std::string& out = connection.out;
  counters_.add(FrontendCount::requests_ids);
  const std::span<const std::string_view> keys(tokens_.data() + 1, tokens_.size() - 1);
  ++cmd_get_;
  if (keys.size() > config_.ids_per_call_max) {
    counters_.add(FrontendCount::bad_request);
    get_misses_ += keys.size();
    return memcache::line(out, "CLIENT_ERROR too many keys: one get takes at most " +
                                   std::to_string(config_.ids_per_call_max) + " (one fresh ID a key)");
  }
  const auto count = static_cast<std::uint32_t>(keys.size());
  const core::Key* key = nullptr;  // the session's, when logged in
  if (!admitted(connection, DoorUse::ids, count, {}, true, &key)) {
    get_misses_ += keys.size();
    return;
  }
  const core::Issued issued = slice_.issue(count, ranges_, config_.clock->wall_ms(),
                                           key != nullptr ? core::Source::none() : connection.source);
  counters_.add(FrontendCount::ids_issued, issued.ids);
  auth_.count_issued(key, issued.ids);
  if (issued.status != proto::Status::ok) {
    // The IDs issued before the refusal are dropped: skipped, never issued again.
    counters_.add(refusal_count(issued.status));
    get_misses_ += keys.size();
    return memcache::line(out, "SERVER_ERROR " + refusal_text(issued, {}));
  }
  get_hits_ += keys.size();
  std::size_t next = 0;
  for (const proto::Range& range : std::span(ranges_.data(), issued.range_count)) {
    for (std::uint64_t k = 0; k < range.count; ++k) memcache::value(out, keys[next++], range.first + k, cas);
  }
  out += "END\r\n";
}

// incr NAME N: N numbers of the named sequence in one run, answered with the last (the caller
// owns last-N+1 .. last, as RESP's INCRBY). A run that would come in two pieces (a block ended
// inside it) is skipped and asked again (core::Slice::issue_seq, contiguous).
void MemcacheFrontend::command_incr(Connection& connection, const memcache::Parsed& parsed) {
  std::string& out = connection.out;
  counters_.add(FrontendCount::requests_seq);
  const std::string_view name = tokens_[1];
  const bool reply = !parsed.noreply;
  if (parsed.delta < 1 || parsed.delta > config_.ids_per_call_max) {
    counters_.add(FrontendCount::bad_request);
    if (!reply) return;
    return memcache::line(out, "CLIENT_ERROR invalid numeric delta argument: from 1 to " +
                                   std::to_string(config_.ids_per_call_max) +
                                   " (the numbers of the sequence taken in one run)");
  }
  if (!proto::valid_seq_name(name)) {
    counters_.add(FrontendCount::bad_request);
    if (!reply) return;
    return memcache::line(out, "CLIENT_ERROR '" + std::string(name.substr(0, 40)) +
                                   "' is not a sequence name: 1 to 32 characters from A-Z a-z 0-9 _ . - :");
  }
  const auto n = static_cast<std::uint32_t>(parsed.delta);
  const core::Key* key = nullptr;
  if (!admitted(connection, DoorUse::seq, n, name, reply, &key)) return;
  std::string refusal;  // --seq-auto-create refused the name: why
  const core::Issued issued =
      issue_seq_or_create(slice_, config_, name, n, ranges_,
                          key != nullptr ? core::Source::none() : connection.source, true, &refusal);
  counters_.add(FrontendCount::seq_issued, issued.ids);
  auth_.count_issued(key, issued.ids);
  if (issued.status == proto::Status::bad_request) {
    counters_.add(FrontendCount::bad_request);
    if (!reply) return;
    return memcache::line(out, "CLIENT_ERROR incr " + std::string(name) + " " + std::to_string(n) +
                                   ": no run of " + std::to_string(n) +
                                   " numbers came in one piece (the longest was " +
                                   std::to_string(issued.detail) + "); ask for fewer");
  }
  if (issued.status != proto::Status::ok) {
    counters_.add(refusal_count(issued.status));
    if (!reply) return;
    // memcached's answer to incr of a missing key; the clients know it (pymemcache: None).
    if (!refusal.empty()) return memcache::line(out, "SERVER_ERROR " + refusal);
    if (issued.status == proto::Status::unknown_sequence) return memcache::line(out, "NOT_FOUND");
    return memcache::line(out, "SERVER_ERROR " + refusal_text(issued, name));
  }
  if (!reply) return;
  const proto::Range& last_range = ranges_[issued.range_count - 1];
  memcache::number(out, last_range.first + last_range.count - 1);
}

// katsubushi's STAT lines first (a dashboard made for it keeps working), then flurry's: this
// front end's counters and door events by the names of `flurryctl stats` and /metrics.
void MemcacheFrontend::command_stats(Connection& connection) {
  std::string& out = connection.out;
  memcache::stat(out, "pid", static_cast<std::uint64_t>(getpid()));
  memcache::stat(out, "uptime", (door_now_ms() - started_ms_) / 1000);
  memcache::stat(out, "time", config_.clock->wall_ms() / 1000);
  memcache::stat(out, "version", std::string_view(version_));
  memcache::stat(out, "curr_connections", open_connections());
  memcache::stat(out, "total_connections",
                 counters_.values[static_cast<std::size_t>(FrontendCount::connections_accepted)].get());
  memcache::stat(out, "cmd_get", cmd_get_);
  memcache::stat(out, "get_hits", get_hits_);
  memcache::stat(out, "get_misses", get_misses_);
  memcache::stat(out, "node_id", slice_.node_id());
  memcache::stat(out, "core", slice_.core());
  counters_.visit("memcache", config_.slice.core, door_,
                  [&](std::string_view, std::string_view reason, std::uint32_t, std::uint64_t value) {
                    memcache::stat(out, reason, value);
                  });
  out += "END\r\n";
}

}  // namespace flurry::dataplane
