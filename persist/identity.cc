// persist/identity.cc — see identity.h.
#include "persist/identity.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <optional>
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

Status random_bytes(std::span<std::uint8_t> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      return Error{"cannot create an instance id: getrandom failed: " + detail::errno_text(saved) +
                   ": the kernel must provide getrandom (Linux >= 3.17)"};
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

// Reads and checks an open identity file.
Result<std::string> read_identity(int fd, const std::string& path) {
  std::array<std::uint8_t, identity_file_bytes_max + 1> bytes{};
  Result<std::size_t> n = detail::read_at(fd, bytes, 0, "identity file " + path);
  if (!n.ok()) return n.status();
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), *n);
  std::optional<std::string> id = parse_identity(text);
  if (!id) {
    return Error{"identity file " + path + " is corrupt (" + std::to_string(*n) +
                 (*n > identity_file_bytes_max ? "+" : "") +
                 " bytes; expected 32 hex characters): remove it and flurryd creates a new "
                 "instance id (in cluster mode it then waits for its old lease to expire "
                 "before it can re-own its node id)"};
  }
  return std::move(*id);
}

// A new random id, created as <dir>/identity unless another caller got there first (nullopt).
Result<std::optional<std::string>> create_identity(Io& disk, int dir_fd, const std::string& dir) {
  std::array<std::uint8_t, instance_id_hex_chars / 2> random{};
  if (Status made = random_bytes(random); !made.ok()) return made;
  std::string id;
  for (const std::uint8_t b : random) {
    id.push_back("0123456789abcdef"[b >> 4]);
    id.push_back("0123456789abcdef"[b & 0xF]);
  }
  const std::string content = id + "\n";
  Result<detail::Created> created = detail::create_file_exclusive(
      disk, dir_fd, dir, identity_file_name,
      std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(content.data()), content.size()));
  if (!created.ok()) return created.status();
  if (*created == detail::Created::already_exists) return std::optional<std::string>{};
  return std::optional<std::string>{std::move(id)};
}

}  // namespace

Result<std::string> load_or_create_instance_id(const std::string& dir, Io* io) {
  Io& disk = io != nullptr ? *io : system_io();
  if (Status made = detail::make_directories(disk, dir); !made.ok()) return made;
  Result<detail::UniqueFd> dir_fd = detail::open_directory(dir);
  if (!dir_fd.ok()) return dir_fd.status();
  const std::string path = dir + "/" + identity_file_name;

  // Two rounds: if a concurrent caller creates the file between our open and our create,
  // the second round reads theirs.
  for (int round = 0; round < 2; ++round) {
    int fd = -1;
    do {
      fd = ::openat(dir_fd->get(), identity_file_name, O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd >= 0) {
      const detail::UniqueFd file(fd);
      return read_identity(file.get(), path);
    }
    if (errno != ENOENT) {
      const int saved = errno;
      return Error{"cannot open identity file " + path + ": " + detail::errno_text(saved) +
                   ": check its permissions and those of --state-dir " + dir};
    }
    Result<std::optional<std::string>> created = create_identity(disk, dir_fd->get(), dir);
    if (!created.ok()) return created.status();
    if (created->has_value()) return std::move(**created);
  }
  return Error{"identity file " + path +
               " keeps appearing and disappearing: make sure no other "
               "program writes to --state-dir " +
               dir};
}

Result<std::string> replace_instance_id(const std::string& dir, Io* io) {
  Io& disk = io != nullptr ? *io : system_io();
  Result<detail::UniqueFd> dir_fd = detail::open_directory(dir);
  if (!dir_fd.ok()) return dir_fd.status();
  const int removed = disk.unlink(dir_fd->get(), identity_file_name);
  if (removed < 0 && removed != -ENOENT) {
    return Error{"cannot remove identity file " + dir + "/" + identity_file_name + ": " +
                 detail::errno_text(-removed) + ": check the permissions of --state-dir " + dir};
  }
  // No fsync of the removal by itself: creating the new file fsyncs the directory, which makes
  // the removal and the new name durable together; a crash before that leaves either id.
  return load_or_create_instance_id(dir, &disk);
}

}  // namespace flurry::persist
