// dataplane/tcp_door.cc — see tcp_door.h.
#include "dataplane/tcp_door.h"

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

namespace flurry::dataplane {

namespace {
constexpr int poll_timeout_ms = 100;  // how soon stop() and the door's deadlines are seen
// The door's timeouts are whole seconds: its connections are looked over for them this often,
// not after every event (a scan of every connection, with hundreds open, for each request).
constexpr std::uint64_t expiry_check_ms = 100;
}  // namespace

TcpDoor::TcpDoor(int listen_fd, std::string flag, Door& door, FrontendCounters& counters,
                 const std::atomic<bool>& stop_all)
    : listen_fd_(listen_fd), flag_(std::move(flag)), door_(door), counters_(counters), stop_all_(stop_all) {}

TcpDoor::~TcpDoor() { stop_loop(); }

Status TcpDoor::start_loop() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return Error{flag_ + ": epoll_create1: " + std::strerror(errno)};
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &event);
  thread_ = std::thread([this] { run(); });
  return {};
}

void TcpDoor::stop_loop() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  for (auto& [fd, connection] : connections_) close(fd);
  connections_.clear();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (listen_fd_ >= 0) close(listen_fd_);
  epoll_fd_ = listen_fd_ = -1;
}

void TcpDoor::run() {
  std::array<epoll_event, 64> events;
  while (!stop_.load(std::memory_order_relaxed) && !stop_all_.load(std::memory_order_relaxed)) {
    before_wait();
    const int ready = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), poll_timeout_ms);
    for (int i = 0; i < ready; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        accept_all();
        continue;
      }
      const auto found = connections_.find(fd);
      if (found != connections_.end()) on_event(*found->second, events[i].events);
    }
    const std::uint64_t now_ms = door_now_ms();
    if (now_ms >= next_expiry_check_ms_) {
      close_expired(now_ms);
      next_expiry_check_ms_ = now_ms + expiry_check_ms;
    }
  }
  after_loop();
}

void TcpDoor::close_expired(std::uint64_t now_ms) {
  std::vector<std::uint64_t> expired;
  door_.expired(now_ms, &expired);
  for (const std::uint64_t fd : expired) close_connection(static_cast<int>(fd));
}

void TcpDoor::accept_all() {
  for (;;) {
    sockaddr_in peer{};
    socklen_t peer_size = sizeof peer;
    const int fd =
        accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_size, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: all taken; anything else: try again on the next event
    // Admitted; a full door (or this address at its limit) names the connection to close for it.
    if (const auto shed = door_.admit(static_cast<std::uint64_t>(fd), peer.sin_addr.s_addr, door_now_ms())) {
      close_connection(static_cast<int>(*shed));
    }
    counters_.add(FrontendCount::connections_accepted);
    std::unique_ptr<TcpConnection> connection = make_connection();
    connection->fd = fd;
    connection->source = core::Source::ipv4(ntohl(peer.sin_addr.s_addr));
    connection->watching = EPOLLIN;
    connections_[fd] = std::move(connection);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
  }
}

void TcpDoor::on_event(TcpConnection& connection, std::uint32_t events) {
  const int fd = connection.fd;
  if ((events & (EPOLLERR | EPOLLHUP)) != 0 && (events & EPOLLIN) == 0) return close_connection(fd);
  bool alive = true;
  if ((events & EPOLLIN) != 0 && connection.out.size() < output_max && !connection.closing) {
    alive = read_input(connection);
  }
  // Answer what is parsed, send, and go on while the answers leave at once: a pipeline that
  // stopped at output_max resumes here when the socket takes the answers.
  bool progress = true;
  while (progress) {
    progress = process(connection);
    if (!flush(connection)) return close_connection(fd);
    progress = progress && connection.out.empty() && !connection.in.empty();
  }
  if (!alive || (connection.closing && connection.out.empty())) return close_connection(fd);
  // Input left unparsed is a command under way: its clock runs from its first byte.
  if ((events & EPOLLIN) != 0)
    door_.input(static_cast<std::uint64_t>(fd), door_now_ms(), !connection.in.empty());
  watch(connection);
}

// Reads until a read comes back short: the socket had no more (the epoll set is level-triggered,
// so more bytes, or the peer's close, wake the loop again). One recv a request, not two: the
// one that would answer EAGAIN is not made.
bool TcpDoor::read_input(TcpConnection& connection) {
  std::array<char, 16 * 1024> chunk;
  while (connection.in.size() < input_max) {
    const std::size_t room = std::min(chunk.size(), input_max - connection.in.size());
    const ssize_t got = recv(connection.fd, chunk.data(), room, 0);
    if (got > 0) {
      connection.in.append(chunk.data(), static_cast<std::size_t>(got));
      if (static_cast<std::size_t>(got) < room) return true;
      continue;
    }
    if (got == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
  return true;
}

bool TcpDoor::flush(TcpConnection& connection) {
  std::size_t sent = 0;
  while (sent < connection.out.size()) {
    const ssize_t n =
        send(connection.fd, connection.out.data() + sent, connection.out.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
    return false;
  }
  connection.out.erase(0, sent);
  return true;
}

void TcpDoor::watch(TcpConnection& connection) {
  // Not reading while the answers back up (or the connection is closing): level-triggered
  // input would otherwise wake this loop again and again with nothing it may do.
  std::uint32_t events = 0;
  if (connection.closing || connection.out.size() >= output_max) {
    events = EPOLLOUT;
  } else {
    events = connection.out.empty() ? EPOLLIN : EPOLLIN | EPOLLOUT;
  }
  if (events == connection.watching) return;  // a request answered at once changes nothing
  epoll_event event{};
  event.events = events;
  event.data.fd = connection.fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, connection.fd, &event);
  connection.watching = events;
}

void TcpDoor::close_connection(int fd) {
  door_.remove(static_cast<std::uint64_t>(fd));
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  connections_.erase(fd);
}

}  // namespace flurry::dataplane
