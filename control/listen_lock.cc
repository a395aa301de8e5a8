// control/listen_lock.cc — see listen_lock.h.
#include "control/listen_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace flurry::control {
namespace {

// A directory only flurryd's uid (or root) can write to: made mode 0700 when missing.
Status check_or_make_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Error{"lock directory " + dir + ": cannot create it: " + std::strerror(errno)};
  }
  struct stat info {};
  if (lstat(dir.c_str(), &info) != 0) {
    return Error{"lock directory " + dir + ": " + std::strerror(errno)};
  }
  if (!S_ISDIR(info.st_mode)) return Error{"lock directory " + dir + " is not a directory (or is a symlink)"};
  if (info.st_uid != geteuid() && info.st_uid != 0) {
    return Error{"lock directory " + dir + " belongs to uid " + std::to_string(info.st_uid) +
                 ", not to flurryd's uid " + std::to_string(geteuid()) +
                 " or root: another user could take flurryd's locks; remove it or pick another --lock-dir"};
  }
  if ((info.st_mode & 022) != 0) {
    return Error{"lock directory " + dir + " is writable by group or others (mode " +
                 std::to_string((info.st_mode >> 6) & 7) + std::to_string((info.st_mode >> 3) & 7) +
                 std::to_string(info.st_mode & 7) + "): run chmod 700 " + dir +
                 " or pick another --lock-dir"};
  }
  return {};
}

// The holder's pid as it wrote it: digits only (never another process's text), or "".
std::string holder_pid(int fd) {
  char text[24] = {};
  const ssize_t n = pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return "";
  std::string pid;
  for (ssize_t i = 0; i < n && text[i] >= '0' && text[i] <= '9'; ++i) pid += text[i];
  return pid.empty() || pid.size() > 10 ? "" : pid;
}

}  // namespace

Result<std::string> lock_dir(const std::string& configured, const std::string& state_dir) {
  std::string dir = configured;
  if (dir.empty()) {
    const char* systemd = std::getenv("RUNTIME_DIRECTORY");  // a unit's RuntimeDirectory=
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    struct stat run {};
    if (geteuid() == 0 && stat("/run", &run) == 0 && S_ISDIR(run.st_mode)) {
      dir = "/run/flurry";
    } else if (systemd != nullptr && systemd[0] == '/') {
      dir = std::string(systemd).substr(0, std::string(systemd).find(':'));
    } else if (runtime != nullptr && runtime[0] == '/') {
      dir = std::string(runtime) + "/flurry";
    } else {
      const std::size_t slash = state_dir.find_last_of('/');
      dir = (slash == 0 || slash == std::string::npos ? std::string() : state_dir.substr(0, slash)) +
            "/.flurry-locks";
    }
  }
  if (Status checked = check_or_make_dir(dir); !checked.ok()) return checked;
  return dir;
}

ListenLock::~ListenLock() {
  for (const int fd : fds_) close(fd);  // releases the flocks
}

Status ListenLock::acquire_file(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int saved = errno;
    return Error{"lock file " + path + ": cannot open it: " + std::strerror(saved) +
                 (saved == ELOOP ? " (it is a symlink: remove it)" : "")};
  }
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != geteuid() ||
      (info.st_mode & 077) != 0) {
    close(fd);
    return Error{"lock file " + path + " is not a regular file of uid " + std::to_string(geteuid()) +
                 " with mode 0600: another user may have made it; remove it"};
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int saved = errno;
    const std::string pid = holder_pid(fd);
    close(fd);
    if (saved == EWOULDBLOCK) {
      return Error{
          (pid.empty() ? std::string("another process") : "flurryd pid " + pid) + " (lock file " + path + ")",
          StatusCode::refused};
    }
    return Error{"lock file " + path + ": flock: " + std::strerror(saved)};
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int saved = errno;
    close(fd);
    return Error{"lock file " + path + ": cannot write the pid: " + std::strerror(saved)};
  }
  fds_.push_back(fd);
  return {};
}

Status ListenLock::acquire(const std::string& dir, const std::string& address, std::uint16_t port) {
  Status taken = acquire_file(dir, "udp-" + address + "-" + std::to_string(port) + ".lock");
  if (taken.code() != StatusCode::refused) return taken;
  return Error{"udp " + address + ":" + std::to_string(port) + " is already served by " + taken.message() +
                   ": two flurryds on one address would both answer its clients (under one node id, the same "
                   "IDs); stop that one first, or give this one another --listen",
               StatusCode::refused};
}

Status ListenLock::acquire_node(const std::string& dir, std::uint32_t node_id) {
  Status taken = acquire_file(dir, "node-" + std::to_string(node_id) + ".lock");
  if (taken.code() != StatusCode::refused) return taken;
  return Error{
      "node id " + std::to_string(node_id) + " is already served on this host by " + taken.message() +
          ": two flurryds with one node id issue the same IDs to their clients; stop that one, or give "
          "this one another --node-id (and its own --state-dir)",
      StatusCode::refused};
}

Status ListenLock::acquire_state_dir(const std::string& state_dir) {
  Status taken = acquire_file(state_dir, "flurryd.lock");
  state_dir_held_ = taken.ok();
  if (taken.code() != StatusCode::refused) return taken;
  return Error{"state dir " + state_dir + " is already used by " + taken.message() +
                   ": one flurryd per state dir; stop that one, or give this one its own --state-dir",
               StatusCode::refused};
}

}  // namespace flurry::control
