// control/private_file.cc — see private_file.h.
#include "control/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace flurry::control {

Result<std::string> read_private_file(const std::string& path, const PrivateFile& what) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int saved = errno;
    if (saved == ELOOP) {
      return Error{
          fmt::format("{} {} is a symlink: flurryd opens {}s only directly; point {} at the file itself",
                      what.noun, path, what.noun, what.flag)};
    }
    return Error{fmt::format("{} {}: {}", what.noun, path, std::strerror(saved))};
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat info {};
  if (fstat(fd, &info) != 0) return Error{fmt::format("{} {}: {}", what.noun, path, std::strerror(errno))};
  if (!S_ISREG(info.st_mode)) return Error{fmt::format("{} {} is not a regular file", what.noun, path)};
  if (info.st_uid != geteuid() && info.st_uid != 0) {
    return Error{
        fmt::format("{} {} belongs to uid {}, not to flurryd's uid {} or root: another user could change {}; "
                    "run chown {} "
                    "{}",
                    what.noun, path, info.st_uid, geteuid(), what.contents, geteuid(), path)};
  }
  if ((info.st_mode & 077) != 0) {
    return Error{fmt::format("{} {} has mode {:04o}: group or others may read its secrets; run chmod 600 {}",
                             what.noun, path, info.st_mode & 07777, path)};
  }
  std::string text;
  char chunk[16 * 1024];
  for (;;) {
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error{fmt::format("{} {}: {}", what.noun, path, std::strerror(errno))};
    if (n == 0) break;
    text.append(chunk, static_cast<std::size_t>(n));
    if (text.size() > what.size_max) {
      return Error{fmt::format("{} {} is larger than {} bytes", what.noun, path, what.size_max)};
    }
  }
  return text;
}

}  // namespace flurry::control
