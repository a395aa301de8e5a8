// dataplane/resp_frontend.cc — see resp_frontend.h.
#include "dataplane/resp_frontend.h"

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <span>

#include "dataplane/resp.h"

namespace flurry::dataplane {

namespace {

bool is(std::string_view arg, std::string_view name) { return resp::equals_ignoring_case(arg, name); }

// A decimal count in [1, max]; 0 when it is not one.
std::uint32_t count_of(std::string_view text, std::uint32_t max) {
  std::uint32_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 1 || value > max) return 0;
  return value;
}

}  // namespace

Result<std::unique_ptr<Frontend>> RespFrontend::open(const FrontendConfig& config, core::Shared& shared) {
  Result<int> fd = listen_tcp(config.endpoint.address, config.endpoint.port, "--resp-listen");
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<Frontend>(new RespFrontend(config, shared, fd.value()));
}

RespFrontend::RespFrontend(const FrontendConfig& config, core::Shared& shared, int listen_fd)
    : TcpDoor(listen_fd, "--resp-listen", door_, counters_, shared.stop),
      config_(config),
      shared_(shared),
      slice_(config.slice, shared),
      door_(config.door),
      auth_(config.auth, config.verify_password, shared, config.slice.core),
      ranges_(ranges_room(slice_, config.ids_per_call_max)) {}

RespFrontend::~RespFrontend() { stop(); }

Status RespFrontend::start() { return start_loop(); }

std::string RespFrontend::describe() const {
  return "Redis protocol on tcp " + config_.endpoint.text() + " (try: redis-cli -p " +
         std::to_string(config_.endpoint.port) + " FLURRY.ID 5)";
}

void RespFrontend::stop() { stop_loop(); }

void RespFrontend::visit_counters(const CounterVisitor& visit) const {
  counters_.visit("resp", config_.slice.core, door_, visit);
}

std::unique_ptr<TcpConnection> RespFrontend::make_connection() {
  auto connection = std::make_unique<Connection>();
  connection->id = next_connection_id_++;
  return connection;
}

void RespFrontend::before_wait() { auth_.quiesce(); }  // holds no key table between rounds (core/keys.h)

void RespFrontend::after_loop() { auth_.leave(); }

bool RespFrontend::process(TcpConnection& base) {
  auto& connection = static_cast<Connection&>(base);
  std::size_t at = 0;
  while (!connection.closing && connection.out.size() < output_max) {
    const resp::Parsed parsed = resp::parse(std::string_view(connection.in).substr(at), args_);
    if (parsed.result == resp::Parse::incomplete) {
      if (connection.in.size() - at >= input_max) {
        counters_.add(FrontendCount::protocol_error);
        resp::error(connection.out, "ERR Protocol error: command larger than 64 KiB");
        connection.closing = true;
      }
      break;
    }
    if (parsed.result == resp::Parse::error) {
      counters_.add(FrontendCount::protocol_error);
      resp::error(connection.out, "ERR Protocol error: " + std::string(parsed.error));
      connection.closing = true;
      break;
    }
    at += parsed.consumed;
    if (!args_.empty()) execute(connection, args_);
  }
  connection.in.erase(0, at);
  return at > 0;
}

void RespFrontend::execute(Connection& connection, const std::vector<std::string_view>& args) {
  const std::string_view command = args[0];
  std::string& out = connection.out;
  if (is(command, "auth")) return command_auth(connection, args);
  if (is(command, "hello")) return command_hello(connection, args);
  if (is(command, "quit")) {
    counters_.add(FrontendCount::requests_other);
    connection.closing = true;
    return resp::simple(out, "OK");
  }
  // --auth required: nothing else before a login (door_auth.h).
  if (auth_.required() && !connection.session.logged_in()) {
    counters_.add(FrontendCount::answered_login_needed);
    return resp::error(out,
                       "NOAUTH Authentication required: AUTH <key name> <door password> (or HELLO 3 AUTH "
                       "<key name> <door password>)");
  }
  if (is(command, "flurry.id")) return command_ids(connection, args);
  if (is(command, "incr") || is(command, "incrby") || is(command, "flurry.seq")) {
    return command_seq(connection, args);
  }
  if (is(command, "get") && args.size() == 2) return command_get(connection, args[1]);
  counters_.add(FrontendCount::requests_other);
  const core::Key* key = nullptr;
  if (!admitted(connection, is(command, "info") ? DoorUse::info : DoorUse::other, 1, {}, &key)) return;
  if (is(command, "ping")) {
    if (args.size() == 1) return resp::simple(out, "PONG");
    return resp::bulk(out, args[1]);
  }
  if (is(command, "echo") && args.size() == 2) return resp::bulk(out, args[1]);
  if (is(command, "info")) return resp::bulk(out, config_.info);
  if (is(command, "client") && args.size() >= 2 && (is(args[1], "setname") || is(args[1], "setinfo"))) {
    return resp::simple(out, "OK");
  }
  if (is(command, "select") && args.size() == 2 && args[1] == "0") return resp::simple(out, "OK");
  if (is(command, "command")) return resp::array_header(out, 0);
  counters_.add(FrontendCount::bad_request);
  if (is(command, "decr") || is(command, "decrby") || is(command, "set") || is(command, "del")) {
    return resp::error(out, "ERR " + std::string(command.substr(0, 16)) +
                                ": a named sequence only goes up (INCR, INCRBY, GET, FLURRY.SEQ); create and "
                                "delete it with flurryctl seq");
  }
  resp::error(out, "ERR unknown command '" + std::string(command.substr(0, 64)) +
                       "' (flurryd speaks PING, ECHO, FLURRY.ID [n], INCR name, INCRBY name n, GET name, "
                       "FLURRY.SEQ name [n], INFO, HELLO, AUTH, QUIT, CLIENT SETNAME, SELECT 0)");
}

// INCR name: the next number of the named sequence. INCRBY name n: n numbers in one run,
// answered with the last (the caller owns last-n+1 .. last, as a Redis counter's INCRBY).
// FLURRY.SEQ name [n]: one number as an integer, or an array of n.
void RespFrontend::command_seq(Connection& connection, const std::vector<std::string_view>& args) {
  std::string& out = connection.out;
  counters_.add(FrontendCount::requests_seq);
  const bool incr = is(args[0], "incr");
  const bool incrby = is(args[0], "incrby");
  const bool valid_arity = incr     ? args.size() == 2
                           : incrby ? args.size() == 3
                                    : args.size() == 2 || args.size() == 3;
  const std::uint32_t n = args.size() == 3 ? count_of(args[2], config_.ids_per_call_max) : 1;
  if (!valid_arity || n == 0) {
    counters_.add(FrontendCount::bad_request);
    return resp::error(out,
                       "ERR wrong arguments: INCR name, INCRBY name n, FLURRY.SEQ name [n] (n from 1 to " +
                           std::to_string(config_.ids_per_call_max) + ")");
  }
  const std::string_view name = args[1];
  if (!proto::valid_seq_name(name)) {
    counters_.add(FrontendCount::bad_request);
    return resp::error(out, "ERR '" + std::string(name.substr(0, 40)) +
                                "' is not a sequence name: 1 to 32 characters from A-Z a-z 0-9 _ . - :");
  }
  const core::Key* key = nullptr;
  if (!admitted(connection, DoorUse::seq, n, name, &key)) return;
  std::string refusal;  // --seq-auto-create refused the name: why
  const core::Issued issued =
      issue_seq_or_create(slice_, config_, name, n, ranges_,
                          key != nullptr ? core::Source::none() : connection.source, incrby, &refusal);
  counters_.add(FrontendCount::seq_issued, issued.ids);
  auth_.count_issued(key, issued.ids);
  if (incrby && issued.status == proto::Status::bad_request) {
    counters_.add(FrontendCount::bad_request);
    return resp::error(out, "ERR INCRBY " + std::string(name) + " " + std::to_string(n) + ": no run of " +
                                std::to_string(n) + " numbers came in one piece (the longest was " +
                                std::to_string(issued.detail) +
                                "); ask for fewer, or take them with FLURRY.SEQ name n");
  }
  if (issued.status != proto::Status::ok) {
    counters_.add(refusal_count(issued.status));
    const char* code = issued.status == proto::Status::retry       ? "TRYAGAIN "
                       : issued.status == proto::Status::fenced    ? "FENCED "
                       : issued.status == proto::Status::not_owner ? "NOTOWNER "
                       : issued.status == proto::Status::exhausted ? "EXHAUSTED "
                                                                   : "ERR ";
    return resp::error(out, code + (refusal.empty() ? refusal_text(issued, name) : refusal));
  }
  const proto::Range& last_range = ranges_[issued.range_count - 1];
  const std::uint64_t last = last_range.first + last_range.count - 1;
  connection.last[std::string(name)] = last;
  if (incr || incrby || args.size() == 2) return resp::integer(out, static_cast<std::int64_t>(last));
  resp::array_header(out, n);
  integers(out, issued.range_count);
}

void RespFrontend::integers(std::string& out, std::uint32_t count) {
  for (const proto::Range& range : std::span(ranges_.data(), count)) {
    for (std::uint64_t k = 0; k < range.count; ++k)
      resp::integer(out, static_cast<std::int64_t>(range.first + k));
  }
}

// GET name: the last number INCR, INCRBY or FLURRY.SEQ gave this connection of that sequence,
// or nil before the first. It issues nothing: a sequence's numbers are handed out, never read.
void RespFrontend::command_get(Connection& connection, std::string_view name) {
  counters_.add(FrontendCount::requests_other);
  const core::Key* key = nullptr;
  if (!admitted(connection, DoorUse::other, 1, {}, &key)) return;
  const auto found = connection.last.find(std::string(name));
  if (found == connection.last.end()) return resp::null_bulk(connection.out, connection.resp3);
  resp::bulk(connection.out, std::to_string(found->second));
}

void RespFrontend::command_ids(Connection& connection, const std::vector<std::string_view>& args) {
  std::string& out = connection.out;
  counters_.add(FrontendCount::requests_ids);
  const std::uint32_t n = args.size() == 2 ? count_of(args[1], config_.ids_per_call_max) : 1;
  if (args.size() > 2 || n == 0) {
    counters_.add(FrontendCount::bad_request);
    return resp::error(
        out, "ERR FLURRY.ID takes an optional count from 1 to " + std::to_string(config_.ids_per_call_max));
  }
  const core::Key* key = nullptr;
  if (!admitted(connection, DoorUse::ids, n, {}, &key)) return;
  const core::Issued issued = slice_.issue(n, ranges_, config_.clock->wall_ms(),
                                           key != nullptr ? core::Source::none() : connection.source);
  counters_.add(FrontendCount::ids_issued, issued.ids);
  auth_.count_issued(key, issued.ids);
  if (issued.status != proto::Status::ok) {
    counters_.add(refusal_count(issued.status));
    const char* code = issued.status == proto::Status::retry    ? "TRYAGAIN "
                       : issued.status == proto::Status::fenced ? "FENCED "
                                                                : "ERR ";
    return resp::error(out, code + refusal_text(issued, {}));
  }
  if (args.size() == 1) return resp::integer(out, static_cast<std::int64_t>(ranges_[0].first));
  resp::array_header(out, n);
  integers(out, issued.range_count);
}

// HELLO [2|3 [AUTH name password] [SETNAME client-name]]: the protocol, and a login in the
// same command (RESP3 clients log in this way). Under --auth required a HELLO without AUTH
// before a login is refused, as Redis does.
void RespFrontend::command_hello(Connection& connection, const std::vector<std::string_view>& args) {
  std::string& out = connection.out;
  counters_.add(FrontendCount::requests_other);
  bool resp3 = connection.resp3;
  if (args.size() >= 2) {
    if (args[1] == "3") {
      resp3 = true;
    } else if (args[1] == "2") {
      resp3 = false;
    } else {
      counters_.add(FrontendCount::bad_request);
      return resp::error(out, "NOPROTO unsupported protocol version");
    }
  }
  std::optional<std::pair<std::string_view, std::string_view>> credential;
  for (std::size_t i = 2; i < args.size(); i += is(args[i], "auth") ? 3 : 2) {
    if (is(args[i], "auth") && i + 2 < args.size()) {
      credential.emplace(args[i + 1], args[i + 2]);
    } else if (!is(args[i], "setname") || i + 1 >= args.size()) {
      counters_.add(FrontendCount::bad_request);
      return resp::error(out, "ERR syntax error: HELLO [2|3 [AUTH name password] [SETNAME client-name]]");
    }
  }
  if (credential) {
    if (!logged_in(connection, credential->first, credential->second)) return;
  } else if (auth_.required() && !connection.session.logged_in()) {
    counters_.add(FrontendCount::answered_login_needed);
    return resp::error(out,
                       "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                       "HELLO <proto> AUTH <key name> <door password> option can be used");
  }
  connection.resp3 = resp3;
  resp::map_header(out, 6, connection.resp3);
  resp::bulk(out, "server");
  resp::bulk(out, "flurry");
  resp::bulk(out, "proto");
  resp::integer(out, connection.resp3 ? 3 : 2);
  resp::bulk(out, "id");
  resp::integer(out, static_cast<std::int64_t>(connection.id));
  resp::bulk(out, "mode");
  resp::bulk(out, "standalone");
  resp::bulk(out, "role");
  resp::bulk(out, "master");
  resp::bulk(out, "modules");
  resp::array_header(out, 0);
}

// AUTH name password (Redis 6's form; redis-cli --user/--pass, redis-py username=) or AUTH
// name:password (the one-argument form of RESP2 clients that know only a password).
void RespFrontend::command_auth(Connection& connection, const std::vector<std::string_view>& args) {
  counters_.add(FrontendCount::requests_other);
  std::string_view name, password;
  bool parsed = false;
  if (args.size() == 3) {
    name = args[1];
    password = args[2];
    parsed = true;
  } else if (args.size() == 2) {
    parsed = split_door_token(args[1], &name, &password);
  }
  if (!parsed) {
    counters_.add(FrontendCount::bad_request);
    return resp::error(connection.out,
                       "ERR AUTH <key name> <door password>, or AUTH <key name>:<door password>");
  }
  if (logged_in(connection, name, password)) resp::simple(connection.out, "OK");
}

// One login (one password hash verification). A failed one is answered -WRONGPASS and the
// connection closed: each guess costs the guesser a new connection, and the door's thread is
// never held by a pipeline of guesses.
bool RespFrontend::logged_in(Connection& connection, std::string_view name, std::string_view password) {
  const std::string refused = auth_.login(connection.session, name, password);
  if (refused.empty()) {
    counters_.add(FrontendCount::logins);
    return true;
  }
  counters_.add(FrontendCount::login_failed);
  if (auth_.mode() == core::AuthMode::off) {
    resp::error(connection.out, "ERR AUTH: " + refused);
    return false;
  }
  resp::error(connection.out, "WRONGPASS " + refused);
  connection.closing = true;
  return false;
}

// The session's key may do this now (door_auth.h admit); otherwise the refusal is answered.
bool RespFrontend::admitted(Connection& connection, DoorUse use, std::uint32_t count,
                            std::string_view sequence, const core::Key** key) {
  const DoorVerdict verdict =
      auth_.admit(connection.session, use, count, sequence, config_.clock->wall_ms(), key);
  std::string& out = connection.out;
  if (verdict == DoorVerdict::served) return true;
  if (verdict == DoorVerdict::login_needed) {
    counters_.add(FrontendCount::answered_login_needed);
    resp::error(out, "NOAUTH Authentication required: AUTH <key name> <door password>");
    return false;
  }
  const DoorRefusal refusal =
      door_refusal(verdict, auth_.key_name(connection.session), config_.slice.retry_hint_us);
  counters_.add(refusal.count);
  const char* code = verdict == DoorVerdict::session_ended   ? "NOAUTH "
                     : verdict == DoorVerdict::not_permitted ? "NOPERM "
                                                             : "TRYAGAIN ";
  resp::error(out, code + refusal.text);
  return false;
}

}  // namespace flurry::dataplane
