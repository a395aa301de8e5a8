// persist/identity.cc — see identity.h.
#include "persist/identity.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <span>
#include <string_view>

#include "persist/file_util.h"
#include "persist/io.h"

namespace flurry::persist {

namespace {

constexpr const char* identity_file_name = "identity";
// Anything longer is not an identity file; read one byte more than allowed to notice.
constexpr std::size_t identity_file_bytes_max = 64;

bool is_space(char c) { return c == '\n' || c == '\r' || c == ' ' || c == '\t'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// 32 hex characters and optional trailing whitespace; returns the id in lowercase.
std::optional<std::string> parse_identity(std::string_view text) {
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  if (text.size() != instance_id_hex_chars) return std::nullopt;
  std::string id;
  id.reserve(instance_id_hex_chars);
  for (const char c : text) {
    const int value = hex_value(c);
    if (value < 0) return std::nullopt;
    id.push_back("0123456789abcdef"[value]);
  }
  return id;
}

bool random_bytes(std::span<std::uint8_t> out, std::string* error) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      *error = "cannot create an instance id: getrandom failed: " + detail::errno_text(saved) +
               ": the kernel must provide getrandom (Linux >= 3.17)";
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

std::optional<std::string> load_or_create_instance_id(const std::string& dir, std::string* error,
                                                      Io* io) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  Io& disk = io != nullptr ? *io : system_io();
  if (!detail::make_directories(disk, dir, error)) return std::nullopt;
  const int dir_fd = detail::open_directory(dir, error);
  if (dir_fd < 0) return std::nullopt;
  struct DirCloser {
    int fd;
    ~DirCloser() { ::close(fd); }
  } dir_closer{dir_fd};
  const std::string path = dir + "/" + identity_file_name;

  // Two rounds: if a concurrent caller creates the file between our open and our create,
  // the second round reads theirs.
  for (int round = 0; round < 2; ++round) {
    int fd = -1;
    do {
      fd = ::openat(dir_fd, identity_file_name, O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd >= 0) {
      std::array<std::uint8_t, identity_file_bytes_max + 1> bytes{};
      const long n = detail::read_at(fd, bytes, 0, "identity file " + path, error);
      ::close(fd);
      if (n < 0) return std::nullopt;
      const std::string_view text(reinterpret_cast<const char*>(bytes.data()),
                                  static_cast<std::size_t>(n));
      auto id = parse_identity(text);
      if (!id) {
        *error = "identity file " + path + " is corrupt (" + std::to_string(n) +
                 (static_cast<std::size_t>(n) > identity_file_bytes_max ? "+" : "") +
                 " bytes; expected 32 hex characters): remove it and flurryd creates a new "
                 "instance id (in cluster mode it then waits for its old lease to expire "
                 "before it can re-own its node id)";
        return std::nullopt;
      }
      return id;
    }
    if (errno != ENOENT) {
      const int saved = errno;
      *error = "cannot open identity file " + path + ": " + detail::errno_text(saved) +
               ": check its permissions and those of --state-dir " + dir;
      return std::nullopt;
    }
    std::array<std::uint8_t, instance_id_hex_chars / 2> random{};
    if (!random_bytes(random, error)) return std::nullopt;
    std::string id;
    for (const std::uint8_t b : random) {
      id.push_back("0123456789abcdef"[b >> 4]);
      id.push_back("0123456789abcdef"[b & 0xF]);
    }
    const std::string content = id + "\n";
    const auto created = detail::create_file_exclusive(
        disk, dir_fd, dir, identity_file_name,
        std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(content.data()),
                                      content.size()),
        error);
    if (created == detail::CreateResult::created) return id;
    if (created == detail::CreateResult::failed) return std::nullopt;
  }
  *error = "identity file " + path + " keeps appearing and disappearing: make sure no other "
           "program writes to --state-dir " + dir;
  return std::nullopt;
}

std::optional<std::string> replace_instance_id(const std::string& dir, std::string* error, Io* io) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  Io& disk = io != nullptr ? *io : system_io();
  const int dir_fd = detail::open_directory(dir, error);
  if (dir_fd < 0) return std::nullopt;
  struct DirCloser {
    int fd;
    ~DirCloser() { ::close(fd); }
  } dir_closer{dir_fd};
  const int removed = disk.unlink(dir_fd, identity_file_name);
  if (removed < 0 && removed != -ENOENT) {
    *error = "cannot remove identity file " + dir + "/" + identity_file_name + ": " + detail::errno_text(-removed) +
             ": check the permissions of --state-dir " + dir;
    return std::nullopt;
  }
  // No fsync of the removal by itself: creating the new file fsyncs the directory, which makes
  // the removal and the new name durable together; a crash before that leaves either id.
  return load_or_create_instance_id(dir, error, &disk);
}

}  // namespace flurry::persist
