// client/key_file.cc — read_key_file (client.h): a client's signing key, `id` and `secret`,
// from a TOML file (toml++), refused unless mode 0600 or stricter; the secret is decoded by
// libsodium's hex decoder. Top-level `name` is allowed (for people); anything else is refused
// so a misspelt field does not go unnoticed.
#include <sodium.h>
#include <sys/stat.h>

#include <toml++/toml.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "client/client.h"
#include "client/errors.h"

namespace flurry::client {
namespace {

bool refuse(Error* error, const std::string& path, const std::string& why) {
  set_error(error, ErrorCode::invalid_argument, "key file " + path + ": " + why);
  return false;
}

bool read_secret(std::string_view hex, std::array<std::uint8_t, 16>* secret) {
  std::size_t size = 0;
  const char* hex_end = nullptr;
  return hex.size() == 2 * secret->size() &&
         sodium_hex2bin(secret->data(), secret->size(), hex.data(), hex.size(), nullptr, &size, &hex_end) ==
             0 &&
         size == secret->size() && hex_end == hex.data() + hex.size();
}

}  // namespace

bool read_key_file(const std::string& path, Key* key, Error* error) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) return refuse(error, path, std::strerror(errno));
  if (!S_ISREG(info.st_mode)) return refuse(error, path, "not a regular file");
  if ((info.st_mode & 077) != 0) {
    return refuse(error, path, "may be read by group or others; run chmod 600 " + path);
  }
  if (info.st_size > 64 * 1024) return refuse(error, path, "larger than 64 KiB: not a key file");
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& parse) {
    return refuse(
        error, path,
        "line " + std::to_string(parse.source().begin.line) + ": " + std::string(parse.description()));
  }
  for (const auto& [name, value] : table) {
    if (name != "id" && name != "secret" && name != "name") {
      return refuse(error, path, "unknown key '" + std::string(name.str()) + "' (expected id, secret, name)");
    }
  }
  const std::optional<std::int64_t> id = table["id"].value<std::int64_t>();
  const std::optional<std::string_view> secret = table["secret"].value<std::string_view>();
  if (!id || !secret) return refuse(error, path, "needs id = N and secret = \"32 hex digits\"");
  if (*id < 1 || *id > 0xffffffffLL) return refuse(error, path, "id must be a whole number in 1..4294967295");
  if (!read_secret(*secret, &key->secret))
    return refuse(error, path, "secret must be \"32 hex digits\" (16 bytes)");
  key->id = static_cast<std::uint32_t>(*id);
  return true;
}

}  // namespace flurry::client
