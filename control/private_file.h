// control/private_file.h — reading a file that holds a secret (the key file, the etcd
// password file) so that what is checked is what is read.
//
// The file is opened once, O_NOFOLLOW | O_CLOEXEC (a symlink is refused: whoever can change the
// link could point it elsewhere), checked on that descriptor (fstat: a regular file owned by
// flurryd's uid or root, mode 0600 or stricter: no group or other bits) and read from it. Every
// refusal names the file, what is wrong and the fix (chown, chmod, point the flag at the file).
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace flurry::control {

// How a refusal names the file: "key file /etc/flurry/keys.toml is a symlink: ... point
// --key-file at the file itself".
struct PrivateFile {
  const char* noun;          // "key file"
  const char* flag;          // "--key-file"
  const char* contents;      // what another owner could change: "its keys"
  std::size_t size_max = 0;  // larger files are refused
};

// The whole file, or an error naming what to fix.
Result<std::string> read_private_file(const std::string& path, const PrivateFile& what);

// A TLS certificate and its private key in PEM (the HTTP front end's --http-tls-cert and
// --http-tls-key): the certificate as any readable regular file (a symlink is fine: it is
// public, and certificate tools keep the current one behind a link), the key as a private
// file above. Each must hold a PEM block of its kind; whether they match is the TLS
// library's check when the door starts.
struct TlsFiles {
  std::string cert_pem;
  std::string key_pem;
};
Result<TlsFiles> read_tls_files(const std::string& cert_path, const char* cert_flag,
                                const std::string& key_path, const char* key_flag);

}  // namespace flurry::control
