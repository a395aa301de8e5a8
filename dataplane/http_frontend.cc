// dataplane/http_frontend.cc — see http_frontend.h.
#include "dataplane/http_frontend.h"

#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <exception>
#include <optional>
#include <span>
#include <vector>

namespace flurry::dataplane {

namespace {

// libmicrohttpd's own limit sits above the door's: a new connection is accepted while the
// door closes the one it sheds (the door's count is the bound).
constexpr unsigned connection_headroom = 8;
constexpr int poll_timeout_ms = 100;  // how soon stop() and the door's deadlines are seen
constexpr const char* json_type = "application/json";

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

MHD_Result respond(MHD_Connection* connection, const HttpFrontend::Answer& answer) {
  MHD_Response* response = MHD_create_response_from_buffer(
      answer.body.size(), const_cast<char*>(answer.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, answer.content_type);
  if (answer.status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  if (answer.retry_after_s != 0) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_RETRY_AFTER,
                            std::to_string(answer.retry_after_s).c_str());
  }
  if (answer.www_authenticate != nullptr)
    MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, answer.www_authenticate);
  if (answer.close) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
  const MHD_Result queued = MHD_queue_response(connection, answer.status, response);
  MHD_destroy_response(response);
  return queued;
}

// The connection's descriptor (the door's handle for it), or -1.
int fd_of(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  return info == nullptr ? -1 : info->connect_fd;
}

// IPv4 source address of the connection (0 when unknown).
std::uint64_t peer_of(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == nullptr || info->client_addr == nullptr || info->client_addr->sa_family != AF_INET) return 0;
  return reinterpret_cast<const sockaddr_in*>(info->client_addr)->sin_addr.s_addr;
}

}  // namespace

// Every callback runs on the serving thread (inside MHD_run). Nothing may throw through
// libmicrohttpd's C frames.
struct HttpFrontend::Callbacks {
  // libmicrohttpd's first call comes with the headers only: answering there makes it close
  // the connection (it cannot know the request is complete). The answer goes on the next
  // call, once the request is whole (keep-alive); a body (none is expected) is read and ignored.
  static MHD_Result access(void* cls, MHD_Connection* connection, const char* url, const char* method,
                           const char*, const char*, std::size_t* upload_size, void** request_state) {
    auto* self = static_cast<HttpFrontend*>(cls);
    static int headers_seen = 0;
    if (*request_state == nullptr) {
      *request_state = &headers_seen;
      return MHD_YES;
    }
    if (*upload_size != 0) {
      *upload_size = 0;
      return MHD_YES;
    }
    try {
      const char* n = MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "n");
      const char* format = MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "format");
      const char* accept = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
      const char* authorization =
          MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
      const MHD_ConnectionInfo* info =
          MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
      auto* session = info == nullptr ? nullptr : static_cast<Session*>(info->socket_context);
      if (session == nullptr) return MHD_NO;  // notify() could not make one: the connection ends
      // The per-source bound keys a request by its connection's peer (core/source_limit.h).
      self->source_ = core::Source::ipv4(ntohl(static_cast<std::uint32_t>(peer_of(connection))));
      return respond(connection, self->answer(method, url, n, format, accept, authorization, *session));
    } catch (...) {
      return MHD_NO;
    }
  }

  // A connection opened or closed: the door admits it (and names one to close for it, if
  // full) and forgets it. Closing is a shutdown(): libmicrohttpd sees the end and closes it.
  // Each connection's Session (its login) lives in libmicrohttpd's socket context.
  static void notify(void* cls, MHD_Connection* connection, void** socket_context,
                     MHD_ConnectionNotificationCode code) {
    auto* self = static_cast<HttpFrontend*>(cls);
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
      delete static_cast<Session*>(*socket_context);
      *socket_context = nullptr;
    }
    const int fd = fd_of(connection);
    if (fd < 0) return;
    try {
      if (code == MHD_CONNECTION_NOTIFY_CLOSED) return self->door_.remove(static_cast<std::uint64_t>(fd));
      *socket_context = new Session;
      const std::optional<std::uint64_t> shed =
          self->door_.admit(static_cast<std::uint64_t>(fd), peer_of(connection), door_now_ms());
      self->counters_.add(FrontendCount::connections_accepted);
      if (shed) shutdown(static_cast<int>(*shed), SHUT_RDWR);
    } catch (...) {
      shutdown(fd, SHUT_RDWR);  // out of memory: the door cannot keep it
    }
  }

  // The request line arrived: the request's clock starts (door.request_timeout_ms).
  static void* uri_seen(void* cls, const char*, MHD_Connection* connection) {
    const int fd = fd_of(connection);
    if (fd >= 0) static_cast<HttpFrontend*>(cls)->door_.begun(static_cast<std::uint64_t>(fd), door_now_ms());
    return nullptr;
  }

  // The answer is sent (or the request ended otherwise): idle from now.
  static void completed(void* cls, MHD_Connection* connection, void**, MHD_RequestTerminationCode) {
    const int fd = fd_of(connection);
    if (fd >= 0) {
      static_cast<HttpFrontend*>(cls)->door_.answered(static_cast<std::uint64_t>(fd), door_now_ms());
    }
  }
};

Result<std::unique_ptr<Frontend>> HttpFrontend::open(const FrontendConfig& config, core::Shared& shared) {
  Result<int> fd = listen_tcp(config.endpoint.address, config.endpoint.port, "--http-listen");
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<Frontend>(new HttpFrontend(config, shared, fd.value()));
}

HttpFrontend::HttpFrontend(const FrontendConfig& config, core::Shared& shared, int listen_fd)
    : config_(config),
      slice_(config.slice, shared),
      door_(config.door),
      auth_(config.auth, config.verify_password, shared, config.slice.core),
      listen_fd_(listen_fd),
      ranges_(ranges_room(slice_, config.ids_per_call_max)) {}

std::string HttpFrontend::describe() const {
  if (!config_.tls_cert_pem.empty()) {
    return "HTTPS on tcp " + config_.endpoint.text() + " (try: curl --cacert CERT 'https://" +
           config_.endpoint.text() + "/v1/ids?n=5')";
  }
  return "HTTP on tcp " + config_.endpoint.text() + " (try: curl 'http://" + config_.endpoint.text() +
         "/v1/ids?n=5')";
}

HttpFrontend::~HttpFrontend() {
  stop();
  if (listen_fd_ >= 0) close(listen_fd_);
  explicit_bzero(config_.tls_key_pem.data(), config_.tls_key_pem.size());
}

Status HttpFrontend::start() {
  // No internal thread: run() serves every connection on this class's one thread, so the slice
  // and the door are never touched by two threads, and the door may close connections between
  // MHD_run calls. libmicrohttpd's idle timeout backs the door's.
  const auto idle_s =
      static_cast<unsigned>(std::max<std::uint64_t>(1, (config_.door.idle_timeout_ms + 999) / 1000));
  // HTTPS (--http-tls-cert/--http-tls-key): libmicrohttpd's TLS (GnuTLS) over the same loop; the
  // door's timeouts count from the TCP connection, so a handshake that never ends is closed too.
  const bool tls = !config_.tls_cert_pem.empty();
  const unsigned flags = MHD_USE_EPOLL | (tls ? MHD_USE_TLS : 0);
  std::vector<MHD_OptionItem> options = {
      {MHD_OPTION_LISTEN_SOCKET, listen_fd_, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, config_.door.connections_max + connection_headroom, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, idle_s, nullptr},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&Callbacks::notify), this},
      {MHD_OPTION_URI_LOG_CALLBACK, reinterpret_cast<intptr_t>(&Callbacks::uri_seen), this},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&Callbacks::completed), this},
  };
  if (tls) {
    options.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(config_.tls_cert_pem.c_str())});
    options.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(config_.tls_key_pem.c_str())});
  }
  options.push_back({MHD_OPTION_END, 0, nullptr});
  daemon_ = MHD_start_daemon(flags, 0, nullptr, nullptr, &Callbacks::access, this, MHD_OPTION_ARRAY,
                             options.data(), MHD_OPTION_END);
  if (daemon_ == nullptr) {
    return Error{tls ? "--http-listen with --http-tls-cert/--http-tls-key: libmicrohttpd could not start "
                       "HTTPS: is the key the certificate's, both PEM (openssl x509 -noout -pubkey -in CERT "
                       "and openssl pkey -pubout -in KEY print the same key)?"
                     : "--http-listen: libmicrohttpd did not start"};
  }
  listen_fd_ = -1;  // libmicrohttpd closes it when stopped
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_EPOLL_FD);
  if (info == nullptr || info->epoll_fd < 0) {
    MHD_stop_daemon(daemon_);
    daemon_ = nullptr;
    return Error{"--http-listen: libmicrohttpd has no epoll descriptor"};
  }
  epoll_fd_ = info->epoll_fd;
  thread_ = std::thread([this] { run(); });
  return {};
}

void HttpFrontend::run() {
  std::vector<std::uint64_t> expired;
  while (!stop_.load(std::memory_order_relaxed)) {
    int timeout_ms = poll_timeout_ms;
    MHD_UNSIGNED_LONG_LONG pending_ms = 0;
    if (MHD_get_timeout(daemon_, &pending_ms) == MHD_YES)
      timeout_ms = static_cast<int>(std::min<MHD_UNSIGNED_LONG_LONG>(pending_ms, poll_timeout_ms));
    pollfd ready{epoll_fd_, POLLIN, 0};
    poll(&ready, 1, timeout_ms);
    auth_.quiesce();  // holds no key table between rounds (core/keys.h)
    MHD_run(daemon_);
    expired.clear();
    door_.expired(door_now_ms(), &expired);
    for (const std::uint64_t fd : expired) shutdown(static_cast<int>(fd), SHUT_RDWR);
  }
  auth_.leave();
}

void HttpFrontend::stop() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

void HttpFrontend::visit_counters(const CounterVisitor& visit) const {
  counters_.visit("http", config_.slice.core, door_, visit);
}

namespace {

// A decimal count in [1, max], or nullopt (absent: 1).
std::optional<std::uint32_t> count_param(const char* text, std::uint32_t max) {
  if (text == nullptr) return 1;
  const std::string_view value(text);
  std::uint32_t n = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || ptr != value.data() + value.size() || n < 1 || n > max) return std::nullopt;
  return n;
}

// JSON string contents: the INFO values are plain text, but never trust that.
std::string json_escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// A number in decimal, appended without a temporary string.
void append_number(std::string& out, std::uint64_t value) {
  std::array<char, 20> digits;
  const auto [end, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), value);
  out.append(digits.data(), end);
}

// Equal, in a time that depends on the lengths only (a cached token is compared, not hashed).
bool same_token(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  return differ == 0;
}

constexpr const char* bearer_challenge = "Bearer realm=\"flurry\"";
constexpr const char* bearer_invalid = "Bearer realm=\"flurry\", error=\"invalid_token\"";

}  // namespace

std::optional<HttpFrontend::Answer> HttpFrontend::caller(const char* authorization, Session& session,
                                                         DoorSession** door) {
  anonymous_.end();
  *door = &anonymous_;
  if (authorization == nullptr) return std::nullopt;  // admit() says whether that may be served
  if (auth_.mode() == core::AuthMode::off) {
    counters_.add(FrontendCount::login_failed);
    return Answer{MHD_HTTP_BAD_REQUEST,
                  "this flurryd runs --auth off: its doors take no credentials (send no Authorization)\n"};
  }
  const std::string_view token = bearer_token(authorization);
  std::string_view name, password;
  if (token.empty() || !split_door_token(token, &name, &password)) {
    counters_.add(FrontendCount::login_failed);
    Answer refused{MHD_HTTP_UNAUTHORIZED, "Authorization must be: Bearer <key name>:<door password>\n"};
    refused.www_authenticate = bearer_invalid;
    return refused;
  }
  // The connection's last verified token again (keep-alive): no second hash.
  if (session.door.logged_in() && same_token(token, session.token)) {
    *door = &session.door;
    return std::nullopt;
  }
  session.token.clear();
  const std::string refused_text = auth_.login(session.door, name, password);
  if (!refused_text.empty()) {
    counters_.add(FrontendCount::login_failed);
    Answer refused{MHD_HTTP_UNAUTHORIZED, refused_text + "\n"};
    refused.www_authenticate = bearer_invalid;
    refused.close = true;  // each guess costs a new connection
    return refused;
  }
  counters_.add(FrontendCount::logins);
  session.token.assign(token);
  *door = &session.door;
  return std::nullopt;
}

std::optional<HttpFrontend::Answer> HttpFrontend::admit(DoorSession& door, DoorUse use, std::uint32_t count,
                                                        std::string_view sequence, const core::Key** key) {
  const DoorVerdict verdict = auth_.admit(door, use, count, sequence, config_.clock->wall_ms(), key);
  Answer refused{MHD_HTTP_UNAUTHORIZED, ""};
  switch (verdict) {
    case DoorVerdict::served:
      return std::nullopt;
    case DoorVerdict::login_needed:
      counters_.add(FrontendCount::answered_login_needed);
      refused.body = "authentication required: Authorization: Bearer <key name>:<door password>\n";
      refused.www_authenticate = bearer_challenge;
      return refused;
    case DoorVerdict::session_ended:
      counters_.add(FrontendCount::answered_login_needed);
      refused.body = "this token's key was removed or its door password changed\n";
      refused.www_authenticate = bearer_invalid;
      return refused;
    case DoorVerdict::not_permitted:
      counters_.add(FrontendCount::answered_not_permitted);
      return Answer{MHD_HTTP_FORBIDDEN,
                    "key '" + std::string(auth_.key_name(door)) +
                        "' may not: its opcodes, batch_max, seq_batch_max or sequences in "
                        "the key file do not allow this path with this n or name\n"};
    case DoorVerdict::rate_limited: {
      counters_.add(FrontendCount::answered_rate_limited);
      Answer limited{MHD_HTTP_TOO_MANY_REQUESTS,
                     "key '" + std::string(auth_.key_name(door)) + "' is over its rate_per_s on this door\n"};
      limited.retry_after_s = 1;
      return limited;
    }
  }
  return refused;
}

HttpFrontend::Answer HttpFrontend::answer(std::string_view method, std::string_view url, const char* n,
                                          const char* format, const char* accept, const char* authorization,
                                          Session& session) {
  DoorSession* door = nullptr;
  if (std::optional<Answer> refused = caller(authorization, session, &door)) return std::move(*refused);
  // --auth required: nothing before a login, whatever the method or path (door_auth.h).
  if (auth_.required() && !door->logged_in()) {
    const core::Key* none = nullptr;
    if (std::optional<Answer> refused = admit(*door, DoorUse::other, 1, {}, &none))
      return std::move(*refused);
  }
  if (method != "GET" && method != "HEAD") {
    counters_.add(FrontendCount::bad_request);
    return {MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: GET or HEAD\n"};
  }
  const std::string_view format_text = format == nullptr ? "" : format;
  const bool text = format_text == "text" ||
                    (format == nullptr && accept != nullptr && std::strstr(accept, "text/plain") != nullptr &&
                     std::strstr(accept, json_type) == nullptr);
  const bool strings = format_text == "strings";
  if (url == "/v1/ids") return ids(*door, n, text, false, strings);
  if (starts_with(url, "/v1/seq/")) return seq(*door, url.substr(8), n, text, false, strings);
  if (starts_with(url, "/api/snowflake/get/")) return ids(*door, nullptr, true, true, false);
  if (starts_with(url, "/api/segment/get/")) return seq(*door, url.substr(17), nullptr, true, true, false);
  if (url == "/v1/info") {
    counters_.add(FrontendCount::requests_other);
    const core::Key* key = nullptr;
    if (std::optional<Answer> refused = admit(*door, DoorUse::info, 1, {}, &key)) return std::move(*refused);
    return info();
  }
  counters_.add(FrontendCount::bad_request);
  return {MHD_HTTP_NOT_FOUND,
          "not found: GET /v1/ids?n=N, /v1/seq/NAME?n=N, /v1/info, /api/snowflake/get/KEY, "
          "/api/segment/get/NAME\n"};
}

void HttpFrontend::text_lines(std::string& out, std::uint32_t count) const {
  for (const proto::Range& range : std::span(ranges_.data(), count)) {
    for (std::uint64_t k = 0; k < range.count; ++k) {
      append_number(out, range.first + k);
      out += '\n';
    }
  }
}

// Numbers, or strings for JavaScript (it cannot hold an ID above 2^53 as a number).
void HttpFrontend::json_array(std::string& out, std::uint32_t count, bool strings) const {
  out += '[';
  bool first = true;
  for (const proto::Range& range : std::span(ranges_.data(), count)) {
    for (std::uint64_t k = 0; k < range.count; ++k) {
      if (!first) out += ',';
      first = false;
      if (strings) out += '"';
      append_number(out, range.first + k);
      if (strings) out += '"';
    }
  }
  out += ']';
}

HttpFrontend::Answer HttpFrontend::refused(const core::Issued& issued, std::string_view name) {
  counters_.add(refusal_count(issued.status));
  Answer answer{MHD_HTTP_SERVICE_UNAVAILABLE, refusal_text(issued, name) + "\n"};
  switch (issued.status) {
    case proto::Status::retry:
      answer.retry_after_s = std::max(1U, (issued.detail + 999'999) / 1'000'000);
      break;
    case proto::Status::unknown_sequence:
      answer.status = MHD_HTTP_NOT_FOUND;
      break;
    case proto::Status::not_owner:
      answer.status = MHD_HTTP_CONFLICT;
      break;
    case proto::Status::exhausted:
      answer.status = name.empty() ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_GONE;
      break;
    default:
      break;
  }
  return answer;
}

HttpFrontend::Answer HttpFrontend::ids(DoorSession& door, const char* n_text, bool text, bool one_plain,
                                       bool strings) {
  counters_.add(FrontendCount::requests_ids);
  const std::optional<std::uint32_t> n = count_param(n_text, config_.ids_per_call_max);
  if (!n) {
    counters_.add(FrontendCount::bad_request);
    return {MHD_HTTP_BAD_REQUEST,
            "n must be a whole number from 1 to " + std::to_string(config_.ids_per_call_max) + "\n"};
  }
  const core::Key* key = nullptr;
  if (std::optional<Answer> refused = admit(door, DoorUse::ids, *n, {}, &key)) return std::move(*refused);
  const core::Issued issued =
      slice_.issue(*n, ranges_, config_.clock->wall_ms(), key != nullptr ? core::Source::none() : source_);
  counters_.add(FrontendCount::ids_issued, issued.ids);
  auth_.count_issued(key, issued.ids);
  if (issued.status != proto::Status::ok) return refused(issued, {});
  Answer answer;
  if (one_plain) {
    append_number(answer.body, ranges_[0].first);
  } else if (text) {
    text_lines(answer.body, issued.range_count);
  } else {
    answer.content_type = json_type;
    answer.body = "{\"ids\":";
    json_array(answer.body, issued.range_count, strings);
    answer.body += ",\"node\":";
    append_number(answer.body, slice_.node_id());
    answer.body += '}';
  }
  return answer;
}

HttpFrontend::Answer HttpFrontend::seq(DoorSession& door, std::string_view name, const char* n_text,
                                       bool text, bool one_plain, bool strings) {
  counters_.add(FrontendCount::requests_seq);
  if (!proto::valid_seq_name(name)) {
    counters_.add(FrontendCount::bad_request);
    return {MHD_HTTP_BAD_REQUEST, "a sequence name is 1 to 32 characters from A-Z a-z 0-9 _ . - :\n"};
  }
  const std::optional<std::uint32_t> n = count_param(n_text, config_.ids_per_call_max);
  if (!n) {
    counters_.add(FrontendCount::bad_request);
    return {MHD_HTTP_BAD_REQUEST,
            "n must be a whole number from 1 to " + std::to_string(config_.ids_per_call_max) + "\n"};
  }
  const core::Key* key = nullptr;
  if (std::optional<Answer> refused = admit(door, DoorUse::seq, *n, name, &key)) return std::move(*refused);
  std::string refusal;  // --seq-auto-create refused the name: why
  const core::Issued issued = issue_seq_or_create(
      slice_, config_, name, *n, ranges_, key != nullptr ? core::Source::none() : source_, false, &refusal);
  counters_.add(FrontendCount::seq_issued, issued.ids);
  auth_.count_issued(key, issued.ids);
  if (issued.status != proto::Status::ok) {
    Answer answer = refused(issued, name);
    if (!refusal.empty()) answer.body = refusal + "\n";
    return answer;
  }
  Answer answer;
  if (one_plain) {
    append_number(answer.body, ranges_[0].first);
  } else if (text) {
    text_lines(answer.body, issued.range_count);
  } else {
    answer.content_type = json_type;
    answer.body = "{\"name\":\"" + std::string(name) + "\",\"numbers\":";
    json_array(answer.body, issued.range_count, strings);
    answer.body += '}';
  }
  return answer;
}

// /v1/info: the INFO lines ("key:value", CRLF; "# Section" lines skipped) as one JSON object
// of strings.
HttpFrontend::Answer HttpFrontend::info() const {
  std::string body = "{";
  std::string_view rest = config_.info;
  bool first = true;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::size_t colon = line.find(':');
    if (line.empty() || line.front() == '#' || colon == std::string_view::npos) continue;
    body += (first ? "\"" : ",\"") + json_escaped(line.substr(0, colon)) + "\":\"" +
            json_escaped(line.substr(colon + 1)) + "\"";
    first = false;
  }
  return {MHD_HTTP_OK, body + "}", json_type};
}

}  // namespace flurry::dataplane
