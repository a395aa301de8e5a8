// control/metrics_http.cc — see metrics_http.h.
#include "control/metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>

#include "base/log.h"

namespace flurry::control {
namespace {

constexpr const char* metrics_path = "/metrics";
constexpr const char* metrics_content_type = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char* plain_content_type = "text/plain; charset=utf-8";
// libmicrohttpd's own connection limit sits above the door's: a new connection is accepted
// while the door closes the one it sheds for it.
constexpr unsigned connection_headroom = 8;

// Errors start with the flag and its value: "--metrics-listen 127.0.0.1:9100: ...".
std::string where(const std::string& address, std::uint16_t port) {
  return "--metrics-listen " + address + ":" + std::to_string(port);
}

MHD_Result respond(MHD_Connection* connection, unsigned status, const std::string& body,
                   const char* content_type, bool allow_header) {
  // MUST_COPY: the body is a temporary; libmicrohttpd keeps its own copy until sent.
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;  // out of memory: libmicrohttpd closes the connection
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (allow_header) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

int fd_of(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  return info == nullptr ? -1 : info->connect_fd;
}

std::uint64_t peer_of(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == nullptr || info->client_addr == nullptr || info->client_addr->sa_family != AF_INET) return 0;
  return reinterpret_cast<const sockaddr_in*>(info->client_addr)->sin_addr.s_addr;
}

}  // namespace

struct MetricsHttp::Callbacks {
  // Called once the request head is read; answers at once. A request body (never expected)
  // is not read: libmicrohttpd closes such a connection after the answer. Nothing may throw
  // through libmicrohttpd's C frames.
  static MHD_Result access(void* cls, MHD_Connection* connection, const char* url, const char* method,
                           const char* /*version*/, const char* /*upload_data*/,
                           std::size_t* /*upload_data_size*/, void** /*request_state*/) {
    auto* self = static_cast<MetricsHttp*>(cls);
    try {
      const bool livez = std::strcmp(url, "/livez") == 0;
      if (self->probe_ && (livez || std::strcmp(url, "/readyz") == 0))
        return probe(self, connection, method, livez);
      if (std::strcmp(url, metrics_path) != 0) {
        ++self->rejected_;
        return respond(connection, MHD_HTTP_NOT_FOUND, "not found: Prometheus metrics are at /metrics\n",
                       plain_content_type, false);
      }
      if (std::strcmp(method, MHD_HTTP_METHOD_GET) != 0 && std::strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        ++self->rejected_;
        return respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED,
                       "method not allowed: /metrics answers GET and HEAD\n", plain_content_type, true);
      }
      std::string text = self->render_();
      ++self->scrapes_;
      return respond(connection, MHD_HTTP_OK, text, metrics_content_type, false);
    } catch (const std::exception& exception) {
      ++self->rejected_;
      log_error("metrics http: rendering /metrics failed: {}", exception.what());
      return respond(connection, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal error\n", plain_content_type,
                     false);
    } catch (...) {
      ++self->rejected_;
      return MHD_NO;
    }
  }

  // The door (base/door.h), as in dataplane/http_frontend.cc: a connection opened (admitted,
  // another one shed for it when full) or closed; closing is a shutdown(), libmicrohttpd sees
  // the end and closes the connection in the same serve().
  static void notify(void* cls, MHD_Connection* connection, void**, MHD_ConnectionNotificationCode code) {
    auto* self = static_cast<MetricsHttp*>(cls);
    const int fd = fd_of(connection);
    if (fd < 0) return;
    try {
      if (code == MHD_CONNECTION_NOTIFY_CLOSED) return self->door_.remove(static_cast<std::uint64_t>(fd));
      const std::optional<std::uint64_t> shed =
          self->door_.admit(static_cast<std::uint64_t>(fd), peer_of(connection), door_now_ms());
      if (shed) shutdown(static_cast<int>(*shed), SHUT_RDWR);
    } catch (...) {
      shutdown(fd, SHUT_RDWR);
    }
  }

  static void* uri_seen(void* cls, const char*, MHD_Connection* connection) {
    const int fd = fd_of(connection);
    if (fd >= 0) static_cast<MetricsHttp*>(cls)->door_.begun(static_cast<std::uint64_t>(fd), door_now_ms());
    return nullptr;
  }

  static void completed(void* cls, MHD_Connection* connection, void**, MHD_RequestTerminationCode) {
    const int fd = fd_of(connection);
    if (fd >= 0)
      static_cast<MetricsHttp*>(cls)->door_.answered(static_cast<std::uint64_t>(fd), door_now_ms());
  }

  static MHD_Result probe(MetricsHttp* self, MHD_Connection* connection, const char* method, bool livez) {
    if (std::strcmp(method, MHD_HTTP_METHOD_GET) != 0 && std::strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
      ++self->rejected_;
      return respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: GET or HEAD\n",
                     plain_content_type, true);
    }
    // `?verbose` carries no value, so look for the key itself.
    bool verbose = false;
    MHD_get_connection_values(
        connection, MHD_GET_ARGUMENT_KIND,
        [](void* found, MHD_ValueKind, const char* key, const char*) {
          if (std::strcmp(key, "verbose") == 0) *static_cast<bool*>(found) = true;
          return MHD_YES;
        },
        &verbose);
    const Probed probed = self->probe_(livez ? ProbeKind::livez : ProbeKind::readyz, verbose);
    return respond(connection, probed.status, probed.body, plain_content_type, false);
  }

  // libmicrohttpd's error messages (accept failures, connection limit reached, malformed
  // requests): at most one line per log_interval_s, so a misbehaving client cannot flood the log.
  static void log(void* cls, const char* format, va_list arguments) {
    auto* self = static_cast<MetricsHttp*>(cls);
    const std::int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now().time_since_epoch())
                                    .count();
    if (self->log_last_ns_ != 0 &&
        now_ns - self->log_last_ns_ < std::int64_t{log_interval_s} * 1'000'000'000) {
      ++self->log_suppressed_;
      return;
    }
    char text[256];
    std::vsnprintf(text, sizeof text, format, arguments);
    std::string line(text);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    try {
      if (self->log_suppressed_ != 0) {
        log_warn("metrics http: {} ({} similar messages left out)", line, self->log_suppressed_);
      } else {
        log_warn("metrics http: {}", line);
      }
    } catch (...) {
      return;  // a log line is not worth unwinding through C frames
    }
    self->log_last_ns_ = now_ns;
    self->log_suppressed_ = 0;
  }
};

MetricsHttp::~MetricsHttp() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);  // closes the listen socket too
}

namespace {

// A listening TCP socket on address:port; bound here rather than by libmicrohttpd so that a
// failure carries its errno.
Result<int> listen_socket(const std::string& address, std::uint16_t port, unsigned backlog) {
  sockaddr_in socket_address{};
  socket_address.sin_family = AF_INET;
  socket_address.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &socket_address.sin_addr) != 1) {
    return Error{where(address, port) + ": '" + address + "' is not an IPv4 address"};
  }
  const int listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd < 0) return Error{where(address, port) + ": socket: " + std::strerror(errno)};
  const int one = 1;
  setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // restart over TIME_WAIT
  if (bind(listen_fd, reinterpret_cast<const sockaddr*>(&socket_address), sizeof socket_address) != 0 ||
      listen(listen_fd, static_cast<int>(backlog)) != 0) {
    const int bind_errno = errno;
    close(listen_fd);
    return Error{where(address, port) +
                 ": cannot listen for Prometheus scrapes: " + std::strerror(bind_errno) +
                 (bind_errno == EADDRINUSE ? " (another process holds the port; pick another)" : "")};
  }
  return listen_fd;
}

}  // namespace

Status MetricsHttp::open(const std::string& address, std::uint16_t port, Render render, Probe probe,
                         const DoorLimits& limits) {
  if (daemon_ != nullptr) return Error{"metrics endpoint already open"};
  door_.set_limits(limits);
  Result<int> listen_fd = listen_socket(address, port, std::max<unsigned>(limits.connections_max, 16));
  if (!listen_fd.ok()) return listen_fd.status();
  // No MHD_USE_INTERNAL_POLLING_THREAD: every callback runs inside serve(), on this thread.
  // libmicrohttpd's idle timeout backs the door's.
  const auto idle_s =
      static_cast<unsigned>(std::max<std::uint64_t>(1, (limits.idle_timeout_ms + 999) / 1000));
  render_ = std::move(render);
  probe_ = std::move(probe);
  daemon_ = MHD_start_daemon(
      MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, nullptr, nullptr, &Callbacks::access, this,
      MHD_OPTION_EXTERNAL_LOGGER, &Callbacks::log, this,  // first, so start-up errors use it
      MHD_OPTION_LISTEN_SOCKET, *listen_fd, MHD_OPTION_CONNECTION_LIMIT,
      limits.connections_max + connection_headroom, MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
      MHD_OPTION_NOTIFY_CONNECTION, &Callbacks::notify, this, MHD_OPTION_URI_LOG_CALLBACK,
      &Callbacks::uri_seen, this, MHD_OPTION_NOTIFY_COMPLETED, &Callbacks::completed, this, MHD_OPTION_END);
  if (daemon_ == nullptr) {
    // Whether libmicrohttpd closed the socket it was given depends on where it failed; close
    // it only if it is still open (nothing else opens descriptors at this point of start-up).
    if (fcntl(*listen_fd, F_GETFD) != -1) close(*listen_fd);
    render_ = nullptr;
    return Error{where(address, port) + ": libmicrohttpd did not start (is it built with epoll support?)"};
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_EPOLL_FD);
  if (info == nullptr || info->epoll_fd < 0) {
    MHD_stop_daemon(daemon_);
    daemon_ = nullptr;
    render_ = nullptr;
    return Error{where(address, port) + ": libmicrohttpd has no epoll descriptor"};
  }
  epoll_fd_ = info->epoll_fd;
  return {};
}

void MetricsHttp::poll_fds(std::vector<pollfd>* fds) const {
  if (daemon_ != nullptr) fds->push_back({epoll_fd_, POLLIN, 0});
}

int MetricsHttp::poll_timeout_ms(int limit_ms) const {
  if (daemon_ == nullptr) return limit_ms;
  MHD_UNSIGNED_LONG_LONG timeout_ms = 0;
  if (MHD_get_timeout(daemon_, &timeout_ms) != MHD_YES) return limit_ms;  // nothing pending
  if (limit_ms >= 0 && timeout_ms >= static_cast<MHD_UNSIGNED_LONG_LONG>(limit_ms)) return limit_ms;
  return static_cast<int>(std::min<MHD_UNSIGNED_LONG_LONG>(timeout_ms, 60'000));
}

void MetricsHttp::serve() {
  if (daemon_ == nullptr) return;
  MHD_run(daemon_);
  expired_.clear();
  door_.expired(door_now_ms(), &expired_);
  for (const std::uint64_t fd : expired_) shutdown(static_cast<int>(fd), SHUT_RDWR);
  if (!expired_.empty()) MHD_run(daemon_);  // closes them now
}

}  // namespace flurry::control
