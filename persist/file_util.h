// persist/file_util.h — small POSIX helpers shared by the watermark store and the identity
// file. Internal to persist/; not part of its public interface.
//
// Every helper retries EINTR, never throws, and on failure returns a failed Status (or
// Result) whose message names the path and carries the errno text. Every change to the
// disk (mkdir, create, write, fsync, rename, link, unlink) goes through the given Io.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"

namespace flurry::persist {
class Io;
}

namespace flurry::persist::detail {

// Owns a file descriptor: closes it on scope exit unless released.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// Little-endian integers of the on-disk records, written byte by byte (no struct is copied).
inline void put_u32(std::uint8_t* at, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<std::uint8_t>(value >> (8 * i));
}
inline void put_u64(std::uint8_t* at, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<std::uint8_t>(value >> (8 * i));
}
inline std::uint32_t get_u32(const std::uint8_t* at) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= std::uint32_t{at[i]} << (8 * i);
  return value;
}
inline std::uint64_t get_u64(const std::uint8_t* at) {
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= std::uint64_t{at[i]} << (8 * i);
  return value;
}

// CRC-32 (zlib, IEEE polynomial) of the `covered` bytes of a record before its CRC field.
std::uint32_t slot_crc(const std::uint8_t* slot, std::size_t covered);

// strerror text for an errno value, thread-safe.
std::string errno_text(int error_number);

// mkdir -p with mode 0700 for every component it creates; fsyncs the parent of each created
// directory so the new entry survives a crash. An existing directory is left as it is.
Status make_directories(Io& io, const std::string& dir);

// open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC).
Result<UniqueFd> open_directory(const std::string& dir);

// fsync of a file or directory descriptor; `what` names it in the error.
Status sync_fd(Io& io, int fd, const std::string& what);

// Reads up to `out.size()` bytes from `offset`, stopping early only at end of file. Returns
// the count read.
Result<std::size_t> read_at(int fd, std::span<std::uint8_t> out, std::uint64_t offset,
                            const std::string& what);

// Writes all of `bytes` at `offset`; a short write is an error.
Status write_all_at(Io& io, int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset,
                    const std::string& what);

enum class Created { created, already_exists };

// Crash-safe creation of <dir_fd>/<name> holding exactly `bytes`, mode 0600: writes a
// private temporary file, fsyncs it, moves it into place without replacing anything
// (renameat2 RENAME_NOREPLACE, or link() where the file system lacks it) and fsyncs the
// directory. The file therefore either does not exist or exists complete. If another
// process created <name> first, returns already_exists and leaves that file untouched.
// `dir` is only used in messages.
Result<Created> create_file_exclusive(Io& io, int dir_fd, const std::string& dir, const std::string& name,
                                      std::span<const std::uint8_t> bytes);

}  // namespace flurry::persist::detail
