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

Result<TlsFiles> read_tls_files(const std::string& cert_path, const char* cert_flag,
                                const std::string& key_path, const char* key_flag) {
  constexpr std::size_t pem_size_max = 1U << 20;
  TlsFiles files;
  {
    const int fd = open(cert_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return Error{fmt::format("{} {}: {}", cert_flag, cert_path, std::strerror(errno))};
    struct stat info {};
    const bool regular = fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
    char chunk[16 * 1024];
    ssize_t n = 0;
    while (regular && files.cert_pem.size() <= pem_size_max && (n = read(fd, chunk, sizeof chunk)) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      files.cert_pem.append(chunk, static_cast<std::size_t>(n));
    }
    close(fd);
    if (!regular) return Error{fmt::format("{} {} is not a regular file", cert_flag, cert_path)};
    if (n < 0) return Error{fmt::format("{} {}: {}", cert_flag, cert_path, std::strerror(errno))};
    if (files.cert_pem.size() > pem_size_max)
      return Error{fmt::format("{} {} is larger than {} bytes", cert_flag, cert_path, pem_size_max)};
  }
  if (files.cert_pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return Error{
        fmt::format("{} {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", cert_flag, cert_path)};
  }
  Result<std::string> key =
      read_private_file(key_path, PrivateFile{"TLS key", key_flag, "the key", pem_size_max});
  if (!key.ok()) return key.status();
  files.key_pem = std::move(key).value();
  if (files.key_pem.find("PRIVATE KEY-----") == std::string::npos) {
    return Error{
        fmt::format("{} {} holds no PEM private key (-----BEGIN ... PRIVATE KEY-----)", key_flag, key_path)};
  }
  return files;
}

}  // namespace flurry::control
