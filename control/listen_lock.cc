// control/listen_lock.cc — see listen_lock.h.
#include "control/listen_lock.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace flurry::control {
namespace {

// The abstract socket's address for a lock name ("\0flurryd/udp/127.0.0.1:7420").
socklen_t lock_address(const std::string& name, sockaddr_un* out) {
  *out = {};
  out->sun_family = AF_UNIX;
  const std::string full = "flurryd/" + name;
  const std::size_t size = std::min(full.size(), sizeof out->sun_path - 1);
  std::memcpy(out->sun_path + 1, full.data(), size);  // sun_path[0] = 0: abstract
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + size);
}

// Asks the holder who it is; falls back to its pid (SO_PEERCRED) if it does not answer.
std::string ask_holder(const sockaddr_un& lock, socklen_t length) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "another process";
  timeval timeout{0, 500'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string who = "another process";
  if (connect(fd, reinterpret_cast<const sockaddr*>(&lock), length) == 0) {
    ucred peer{};
    socklen_t peer_length = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) == 0) {
      who = "flurryd pid " + std::to_string(peer.pid);
    }
    char line[512];
    const ssize_t n = recv(fd, line, sizeof line - 1, 0);
    if (n > 0) {
      std::string text(line, static_cast<std::size_t>(n));
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      if (!text.empty()) who = text;
    }
  }
  close(fd);
  return who;
}

}  // namespace

ListenLock::~ListenLock() {
  for (const int fd : fds_) close(fd);
}

// Binds the abstract socket `name`; on EADDRINUSE fails refused with who holds it.
Status ListenLock::acquire_name(const std::string& name, const std::string& about) {
  sockaddr_un lock{};
  const socklen_t length = lock_address(name, &lock);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Error{std::string("cannot create a lock socket: ") + std::strerror(errno)};
  if (bind(fd, reinterpret_cast<const sockaddr*>(&lock), length) != 0) {
    const int saved = errno;
    close(fd);
    if (saved == EADDRINUSE) return Error{ask_holder(lock, length), StatusCode::refused};
    return Error{"cannot take the lock " + name + ": " + std::strerror(saved)};
  }
  if (listen(fd, 8) != 0) {
    const int saved = errno;
    close(fd);
    return Error{"cannot listen on the lock socket " + name + ": " + std::strerror(saved)};
  }
  fds_.push_back(fd);
  about_ = about + "\n";
  return {};
}

Status ListenLock::acquire(const std::string& address, std::uint16_t port, const std::string& about) {
  Status taken = acquire_name("udp/" + address + ":" + std::to_string(port), about);
  if (taken.code() != StatusCode::refused) return taken;
  return Error{"udp " + address + ":" + std::to_string(port) + " is already served by " + taken.message() +
                   ": two flurryds on one address would both answer its clients (under one node id, the same "
                   "IDs); stop that one first, or give this one another --listen",
               StatusCode::refused};
}

Status ListenLock::acquire_node(std::uint32_t node_id, const std::string& about) {
  Status taken = acquire_name("local-node/" + std::to_string(node_id), about);
  if (taken.code() != StatusCode::refused) return taken;
  return Error{
      "node id " + std::to_string(node_id) + " is already served on this host by " + taken.message() +
          ": two flurryds with one node id issue the same IDs to their clients; stop that one, or give "
          "this one another --node-id (and its own --state-dir)",
      StatusCode::refused};
}

void ListenLock::poll_fds(std::vector<pollfd>* fds) const {
  for (const int fd : fds_) fds->push_back({fd, POLLIN, 0});
}

void ListenLock::serve() {
  for (const int fd : fds_) {
    for (;;) {
      const int client = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (client < 0) break;  // EAGAIN: nobody else is asking
      // One short line into an empty socket buffer: never blocks; a failure is the asker's loss.
      [[maybe_unused]] const ssize_t sent = send(client, about_.data(), about_.size(), MSG_NOSIGNAL);
      close(client);
    }
  }
}

}  // namespace flurry::control
