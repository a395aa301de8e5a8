// persist/file_util.cc — see file_util.h.
#include "persist/file_util.h"

#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

#include "persist/io.h"

namespace flurry::persist::detail {

std::uint32_t slot_crc(const std::uint8_t* slot, std::size_t covered) {
  return static_cast<std::uint32_t>(::crc32(::crc32(0L, Z_NULL, 0), slot, static_cast<uInt>(covered)));
}

namespace {

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

std::string errno_text(int error_number) { return std::system_category().message(error_number); }

Status make_directories(Io& io, const std::string& dir) {
  if (dir.empty()) return Error{"state directory path is empty: pass a directory with --state-dir"};
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {};
    return Error{"state directory " + dir +
                 " exists but is not a directory: pass a directory with --state-dir"};
  }
  if (errno != ENOENT) {
    const int saved = errno;
    return Error{"cannot access state directory " + dir + ": " + errno_text(saved) +
                 ": check the path and its permissions (--state-dir)"};
  }
  const std::string parent = parent_of(dir);
  if (parent != dir) {
    if (Status made = make_directories(io, parent); !made.ok()) return made;
  }
  const int made = io.make_directory(dir, 0700);
  // EEXIST: a concurrent creator made it; its entry may not be durable yet, so sync anyway.
  if (made < 0 && made != -EEXIST) {
    const int saved = -made;
    return Error{"cannot create state directory " + dir + ": " + errno_text(saved) +
                 ": create it or fix the permissions of " + parent + " (--state-dir)"};
  }
  // Make the new directory entry durable in its parent.
  Result<UniqueFd> parent_fd = open_directory(parent);
  if (!parent_fd.ok()) return parent_fd.status();
  return sync_fd(io, parent_fd->get(), "directory " + parent);
}

Result<UniqueFd> open_directory(const std::string& dir) {
  for (;;) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) return UniqueFd(fd);
    if (errno == EINTR) continue;
    const int saved = errno;
    return Error{"cannot open state directory " + dir + ": " + errno_text(saved) +
                 ": check the path and its permissions (--state-dir)"};
  }
}

Status sync_fd(Io& io, int fd, const std::string& what) {
  const int synced = io.fsync(fd);
  if (synced == 0) return {};
  return Error{"cannot fsync " + what + ": " + errno_text(-synced) +
               ": check the disk's health and free space"};
}

Result<std::size_t> read_at(int fd, std::span<std::uint8_t> out, std::uint64_t offset,
                            const std::string& what) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      return Error{"cannot read " + what + ": " + errno_text(saved) +
                   ": check the disk's health and the file's permissions"};
    }
    done += static_cast<std::size_t>(n);
  }
  return done;
}

Status write_all_at(Io& io, int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset,
                    const std::string& what) {
  const long n = io.write_at(fd, bytes, offset);
  if (n < 0) {
    return Error{"cannot write " + what + ": " + errno_text(static_cast<int>(-n)) +
                 ": check free space and the disk's health"};
  }
  if (static_cast<std::size_t>(n) != bytes.size()) {
    return Error{"short write to " + what + " (" + std::to_string(n) + " of " + std::to_string(bytes.size()) +
                 " bytes): check free space and the disk's health"};
  }
  return {};
}

namespace {

// Moves the synced temporary file into place without replacing anything, then syncs the
// directory. Removes the temporary file whatever happens.
Result<Created> move_into_place(Io& io, int dir_fd, const std::string& dir, const std::string& temp_name,
                                const std::string& name, const std::string& temp_what) {
  int moved = io.rename_no_replace(dir_fd, temp_name, name);
  if (moved == -EINVAL || moved == -ENOSYS) {
    // File system without RENAME_NOREPLACE: link() fails with EEXIST as well.
    moved = io.link(dir_fd, temp_name, name);
    if (moved == 0) io.unlink(dir_fd, temp_name);
  }
  if (moved != 0) {
    const int saved = -moved;
    io.unlink(dir_fd, temp_name);
    if (saved == EEXIST) return Created::already_exists;
    return Error{"cannot move " + temp_what + " into place: " + errno_text(saved) +
                 ": check the permissions of " + dir};
  }
  if (Status synced = sync_fd(io, dir_fd, "directory " + dir); !synced.ok()) return synced;
  return Created::created;
}

}  // namespace

Result<Created> create_file_exclusive(Io& io, int dir_fd, const std::string& dir, const std::string& name,
                                      std::span<const std::uint8_t> bytes) {
  static std::atomic<unsigned> temp_counter{0};
  const std::string path = dir + "/" + name;
  // Unique per process and call, so concurrent creators never share a temporary file.
  const std::string temp_name =
      name + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(temp_counter.fetch_add(1));
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
    return Error{"cannot create " + temp_what + ": " + errno_text(saved) +
                 ": check free space and the permissions of " + dir};
  }
  Status written;
  {
    UniqueFd guard(fd);
    written = write_all_at(io, fd, bytes, 0, temp_what);
    if (written.ok()) written = sync_fd(io, fd, temp_what);
  }
  if (!written.ok()) {
    io.unlink(dir_fd, temp_name);
    return written;
  }
  return move_into_place(io, dir_fd, dir, temp_name, name, temp_what);
}

}  // namespace flurry::persist::detail
