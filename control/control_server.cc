// control/control_server.cc — see control_server.h.
#include "control/control_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "base/log.h"

namespace flurry::control {
namespace {

Result<sockaddr_un> address_of(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return Error{"control socket path '" + path + "' is longer than " +
                 std::to_string(sizeof(address.sun_path) - 1) + " bytes; pick a shorter --control-socket"};
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// Reads up to the first newline; fails when the peer closes or times out (SO_RCVTIMEO,
// `timeout_ms`) before one.
Result<std::string> read_line(int fd, const std::string& path, int timeout_ms) {
  std::string buffer;
  char chunk[4096];
  while (buffer.find('\n') == std::string::npos) {
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return Error{"no answer from " + path + " within " + std::to_string(timeout_ms) + " ms"};
    }
    if (n <= 0)
      return Error{"no answer from " + path + (n < 0 ? std::string(": ") + std::strerror(errno) : "")};
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
  return buffer.substr(0, buffer.find('\n'));
}

bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

ControlServer::~ControlServer() {
  for (auto& client : clients_) close(client.fd);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
  }
}

Status ControlServer::open(const std::string& path, Handler handler, const DoorLimits& limits) {
  door_.set_limits(limits);
  Result<sockaddr_un> addressed = address_of(path);
  if (!addressed.ok()) return addressed.status();
  sockaddr_un address = *addressed;
  // A socket file left by a crashed flurryd is replaced; one that answers is another
  // flurryd on the same state directory.
  const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe >= 0) {
    const bool live = connect(probe, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    close(probe);
    if (live) {
      return Error{"control socket " + path +
                   " is answered by a running flurryd; stop it or pick another "
                   "--control-socket"};
    }
  }
  unlink(path.c_str());
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  // The socket file is made 0600 by bind() itself, whatever the operator's umask: there is
  // no moment at which another user may connect. (umask is per process; nothing else of
  // flurryd creates files while the control socket opens, and a stricter mask is harmless.)
  const mode_t umask_before = umask(0177);
  const bool bound =
      listen_fd_ >= 0 && bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  const int bind_errno = errno;
  umask(umask_before);
  if (!bound || listen(listen_fd_, 16) != 0) {
    const int saved = bound ? errno : bind_errno;
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    return Error{"cannot listen on control socket " + path + ": " + std::strerror(saved)};
  }
  // Also when the path's file system ignored the mask: mode 0600, or refuse to serve.
  struct stat info {};
  if (fstatat(AT_FDCWD, path.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 || (info.st_mode & 077) != 0) {
    if (chmod(path.c_str(), 0600) != 0) {
      const int saved = errno;
      close(listen_fd_);
      listen_fd_ = -1;
      unlink(path.c_str());
      return Error{"control socket " + path + ": cannot make it mode 0600: " + std::strerror(saved)};
    }
  }
  path_ = path;
  handler_ = std::move(handler);
  return {};
}

void ControlServer::poll_fds(std::vector<pollfd>* fds) const {
  if (listen_fd_ >= 0) fds->push_back({listen_fd_, POLLIN, 0});
  for (const auto& client : clients_) fds->push_back({client.fd, POLLIN, 0});
}

void ControlServer::answer(Client& client, const std::string& line) {
  nlohmann::json reply = nlohmann::json::object();
  std::string cmd;
  nlohmann::json request = nlohmann::json::object();
  std::string error;
  if (!line.empty() && line.front() == '{') {
    request = nlohmann::json::parse(line, nullptr, false);
    if (request.is_discarded() || !request.is_object() || !request.contains("cmd") ||
        !request["cmd"].is_string()) {
      error = "request must be a JSON object with a string \"cmd\", e.g. {\"cmd\":\"status\"}";
    } else {
      cmd = request["cmd"].get<std::string>();
    }
  } else {
    cmd = line;
  }
  if (error.empty()) {
    try {
      error = handler_(cmd, request, &reply).message();
    } catch (const std::exception& caught) {
      error = std::string("request failed: ") + caught.what();
    }
  }
  if (!error.empty()) {
    ++bad_requests_;
    reply = {{"ok", false}, {"error", error}};
  } else {
    reply["ok"] = true;
  }
  // Untrusted bytes may be echoed in an error: replace invalid UTF-8 rather than throw.
  write_all(client.fd, reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

// Only flurryd's own uid and root; the first refusal is logged, every one counted.
bool ControlServer::peer_allowed(int fd) {
  ucred peer{};
  socklen_t size = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0 &&
      (peer.uid == geteuid() || peer.uid == 0)) {
    return true;
  }
  if (refused_peers_++ == 0) {
    log_warn(
        "control socket {}: refused a client of uid {} (pid {}): only uid {} and root may use it (later "
        "refusals are counted in flurry_control_refused_peers_total, not logged)",
        path_, peer.uid, peer.pid, geteuid());
  }
  return false;
}

void ControlServer::drop(int fd) {
  door_.remove(static_cast<std::uint64_t>(fd));
  close(fd);
  std::erase_if(clients_, [fd](const Client& client) { return client.fd == fd; });
}

void ControlServer::accept_all() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    if (!peer_allowed(fd)) {
      write_all(
          fd,
          R"({"ok":false,"error":"permission denied: only flurryd's own user and root may use its control socket"})"
          "\n");
      // What it sent already is read (never answered), so that the refusal line reaches it
      // rather than a reset for unread data.
      char discard[4096];
      [[maybe_unused]] const ssize_t unread = recv(fd, discard, sizeof discard, MSG_DONTWAIT);
      close(fd);
      continue;
    }
    ucred peer{};
    socklen_t size = sizeof peer;
    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size);
    if (const auto shed = door_.admit(static_cast<std::uint64_t>(fd), peer.uid, door_now_ms())) {
      drop(static_cast<int>(*shed));
    }
    clients_.push_back({fd, {}});
  }
}

void ControlServer::serve() {
  if (listen_fd_ < 0) return;
  accept_all();
  const std::uint64_t now_ms = door_now_ms();
  for (std::size_t i = 0; i < clients_.size();) {
    Client& client = clients_[i];
    bool closed = false;
    bool got = false;
    char chunk[1024];
    for (;;) {
      const ssize_t n = read(client.fd, chunk, sizeof chunk);
      if (n > 0) {
        got = true;
        client.buffer.append(chunk, static_cast<std::size_t>(n));
        if (client.buffer.size() > line_size_max * 2) break;
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) closed = true;
      break;
    }
    std::size_t newline;
    while ((newline = client.buffer.find('\n')) != std::string::npos) {
      std::string line = client.buffer.substr(0, newline);
      client.buffer.erase(0, newline + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.size() > line_size_max) {
        ++bad_requests_;
        write_all(client.fd, R"({"ok":false,"error":"request line too long"})"
                             "\n");
        continue;
      }
      if (!line.empty()) answer(client, line);
    }
    if (client.buffer.size() > line_size_max) {
      ++bad_requests_;
      write_all(client.fd, R"({"ok":false,"error":"request line too long"})"
                           "\n");
      closed = true;
    }
    if (closed) {
      door_.remove(static_cast<std::uint64_t>(client.fd));
      close(client.fd);
      clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      // A partial line left in the buffer is a request under way: its clock runs.
      if (got) door_.input(static_cast<std::uint64_t>(client.fd), now_ms, !client.buffer.empty());
      ++i;
    }
  }
  std::vector<std::uint64_t> expired;
  door_.expired(now_ms, &expired);
  for (const std::uint64_t fd : expired) drop(static_cast<int>(fd));
}

Result<nlohmann::json> control_request(const std::string& path, const std::string& cmd, int timeout_ms) {
  return control_request_object(path, nlohmann::json{{"cmd", cmd}}, timeout_ms);
}

Result<nlohmann::json> control_request_object(const std::string& path, const nlohmann::json& request,
                                              int timeout_ms) {
  Result<sockaddr_un> address = address_of(path);
  if (!address.ok()) return address.status();
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error{std::string("socket: ") + std::strerror(errno)};
  timeval timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  Result<std::string> line = Error{""};
  if (connect(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof(sockaddr_un)) != 0) {
    line = Error{"cannot connect to " + path + ": " + std::strerror(errno) +
                 " (is flurryd running? pass --control-socket or --state-dir)"};
  } else if (!write_all(fd, request.dump() + "\n")) {
    line = Error{"cannot send to " + path + ": " + std::strerror(errno)};
  } else {
    line = read_line(fd, path, timeout_ms);
  }
  close(fd);
  if (!line.ok()) return line.status();
  nlohmann::json reply = nlohmann::json::parse(*line, nullptr, false);
  if (reply.is_discarded()) return Error{"malformed answer from " + path};
  return reply;
}

}  // namespace flurry::control
