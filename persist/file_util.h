// persist/file_util.h — small POSIX helpers shared by the watermark store and the identity
// file. Internal to persist/; not part of its public interface.
//
// Every helper retries EINTR, never throws, and on failure returns false (or -1) with *error
// set to one sentence that names the path and carries the errno text. Every change to the
// disk (mkdir, create, write, fsync, rename, link, unlink) goes through the given Io.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace flurry::persist {
class Io;
}

namespace flurry::persist::detail {

// strerror text for an errno value, thread-safe.
std::string errno_text(int error_number);

// mkdir -p with mode 0700 for every component it creates; fsyncs the parent of each created
// directory so the new entry survives a crash. An existing directory is left as it is.
bool make_directories(Io& io, const std::string& dir, std::string* error);

// open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), or -1 with *error set.
int open_directory(const std::string& dir, std::string* error);

// fsync of a file or directory descriptor; `what` names it in the error.
bool sync_fd(Io& io, int fd, const std::string& what, std::string* error);

// Reads up to `out.size()` bytes from `offset`, stopping early only at end of file. Returns
// the count read, or -1 with *error set.
long read_at(int fd, std::span<std::uint8_t> out, std::uint64_t offset, const std::string& what,
             std::string* error);

// Writes all of `bytes` at `offset`; a short write is an error.
bool write_all_at(Io& io, int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset,
                  const std::string& what, std::string* error);

enum class CreateResult { created, already_exists, failed };

// Crash-safe creation of <dir_fd>/<name> holding exactly `bytes`, mode 0600: writes a
// private temporary file, fsyncs it, moves it into place without replacing anything
// (renameat2 RENAME_NOREPLACE, or link() where the file system lacks it) and fsyncs the
// directory. The file therefore either does not exist or exists complete. If another
// process created <name> first, returns already_exists and leaves that file untouched.
// `dir` is only used in messages.
CreateResult create_file_exclusive(Io& io, int dir_fd, const std::string& dir,
                                   const std::string& name, std::span<const std::uint8_t> bytes,
                                   std::string* error);

}  // namespace flurry::persist::detail
