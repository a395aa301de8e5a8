// persist/file_util.cc — see file_util.h.
#include "persist/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

#include "persist/io.h"

namespace flurry::persist::detail {

namespace {

// Closes a descriptor on scope exit unless released.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void set_error(std::string* error, std::string text) {
  if (error != nullptr) *error = std::move(text);
}

}  // namespace

std::string errno_text(int error_number) {
  return std::system_category().message(error_number);
}

bool make_directories(Io& io, const std::string& dir, std::string* error) {
  if (dir.empty()) {
    set_error(error, "state directory path is empty: pass a directory with --state-dir");
    return false;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return true;
    set_error(error, "state directory " + dir +
                         " exists but is not a directory: pass a directory with --state-dir");
    return false;
  }
  if (errno != ENOENT) {
    const int saved = errno;
    set_error(error, "cannot access state directory " + dir + ": " + errno_text(saved) +
                         ": check the path and its permissions (--state-dir)");
    return false;
  }
  const std::string parent = parent_of(dir);
  if (parent != dir && !make_directories(io, parent, error)) return false;
  const int made = io.make_directory(dir, 0700);
  // EEXIST: a concurrent creator made it; its entry may not be durable yet, so sync anyway.
  if (made < 0 && made != -EEXIST) {
    const int saved = -made;
    set_error(error, "cannot create state directory " + dir + ": " + errno_text(saved) +
                         ": create it or fix the permissions of " + parent + " (--state-dir)");
    return false;
  }
  // Make the new directory entry durable in its parent.
  const int parent_fd = open_directory(parent, error);
  if (parent_fd < 0) return false;
  FdGuard guard(parent_fd);
  return sync_fd(io, parent_fd, "directory " + parent, error);
}

int open_directory(const std::string& dir, std::string* error) {
  for (;;) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno == EINTR) continue;
    const int saved = errno;
    set_error(error, "cannot open state directory " + dir + ": " + errno_text(saved) +
                         ": check the path and its permissions (--state-dir)");
    return -1;
  }
}

bool sync_fd(Io& io, int fd, const std::string& what, std::string* error) {
  const int synced = io.fsync(fd);
  if (synced == 0) return true;
  set_error(error, "cannot fsync " + what + ": " + errno_text(-synced) +
                       ": check the disk's health and free space");
  return false;
}

long read_at(int fd, std::span<std::uint8_t> out, std::uint64_t offset, const std::string& what,
             std::string* error) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done,
                              static_cast<off_t>(offset + done));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      set_error(error, "cannot read " + what + ": " + errno_text(saved) +
                           ": check the disk's health and the file's permissions");
      return -1;
    }
    done += static_cast<std::size_t>(n);
  }
  return static_cast<long>(done);
}

bool write_all_at(Io& io, int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset,
                  const std::string& what, std::string* error) {
  const long n = io.write_at(fd, bytes, offset);
  if (n < 0) {
    set_error(error, "cannot write " + what + ": " + errno_text(static_cast<int>(-n)) +
                         ": check free space and the disk's health");
    return false;
  }
  if (static_cast<std::size_t>(n) != bytes.size()) {
    set_error(error, "short write to " + what + " (" + std::to_string(n) + " of " +
                         std::to_string(bytes.size()) +
                         " bytes): check free space and the disk's health");
    return false;
  }
  return true;
}

CreateResult create_file_exclusive(Io& io, int dir_fd, const std::string& dir,
                                   const std::string& name, std::span<const std::uint8_t> bytes,
                                   std::string* error) {
  static std::atomic<unsigned> temp_counter{0};
  const std::string path = dir + "/" + name;
  // Unique per process and call, so concurrent creators never share a temporary file.
  const std::string temp_name = name + ".tmp-" + std::to_string(::getpid()) + "-" +
                                std::to_string(temp_counter.fetch_add(1));
  // Messages name the file being created; the temporary name is only a detail.
  const std::string temp_what = path + " (temporary " + temp_name + ")";
  int fd = io.create_file(dir_fd, temp_name, 0600);
  if (fd == -EEXIST) {
    // A leftover of a crashed process that had our pid: it was never moved into place.
    io.unlink(dir_fd, temp_name);
    fd = io.create_file(dir_fd, temp_name, 0600);
  }
  if (fd < 0) {
    const int saved = -fd;
    set_error(error, "cannot create " + temp_what + ": " + errno_text(saved) +
                         ": check free space and the permissions of " + dir);
    return CreateResult::failed;
  }
  bool ok = false;
  {
    FdGuard guard(fd);
    ok = write_all_at(io, fd, bytes, 0, temp_what, error) && sync_fd(io, fd, temp_what, error);
  }
  if (ok) {
    int moved = io.rename_no_replace(dir_fd, temp_name, name);
    if (moved == -EINVAL || moved == -ENOSYS) {
      // File system without RENAME_NOREPLACE: link() fails with EEXIST as well.
      moved = io.link(dir_fd, temp_name, name);
      if (moved == 0) io.unlink(dir_fd, temp_name);
    }
    if (moved != 0) {
      const int saved = -moved;
      io.unlink(dir_fd, temp_name);
      if (saved == EEXIST) return CreateResult::already_exists;
      set_error(error, "cannot move " + temp_what + " into place: " + errno_text(saved) +
                           ": check the permissions of " + dir);
      return CreateResult::failed;
    }
    if (!sync_fd(io, dir_fd, "directory " + dir, error)) return CreateResult::failed;
    return CreateResult::created;
  }
  io.unlink(dir_fd, temp_name);
  return CreateResult::failed;
}

}  // namespace flurry::persist::detail
