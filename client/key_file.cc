// client/key_file.cc — read_key_file (client.h): a client's key, `id` and `secret`, from a
// small TOML file of top-level `key = value` lines. The client library depends on proto/ and
// libsodium only, so this reads the few lines it needs itself; anything else is refused.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "client/client.h"
#include "client/errors.h"

namespace flurry::client {
namespace {

std::string trim(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t\r") - begin + 1);
}

bool parse_hex(const std::string& hex, std::array<std::uint8_t, 16>* secret) {
  if (hex.size() != 32) return false;
  for (std::size_t i = 0; i < 16; ++i) {
    unsigned byte = 0;
    for (char c : hex.substr(2 * i, 2)) {
      const int digit = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
      if (digit < 0) return false;
      byte = byte * 16 + static_cast<unsigned>(digit);
    }
    (*secret)[i] = static_cast<std::uint8_t>(byte);
  }
  return true;
}

// One `key = value` line into *key; false with *why set when the line is not acceptable.
bool read_line(const std::string& name, const std::string& value, Key* key, bool* has_id, bool* has_secret,
               std::string* why) {
  if (name == "name") return true;
  if (name == "id") {
    try {
      std::size_t used = 0;
      const unsigned long long id = std::stoull(value, &used);
      if (used != value.size() || id == 0 || id > 0xffffffffULL) throw std::out_of_range("id");
      key->id = static_cast<std::uint32_t>(id);
      *has_id = true;
      return true;
    } catch (const std::exception&) {
      *why = "id must be a whole number in 1..4294967295";
      return false;
    }
  }
  if (name == "secret") {
    const bool quoted = value.size() >= 2 && value.front() == '"' && value.back() == '"';
    *has_secret = quoted && parse_hex(value.substr(1, value.size() - 2), &key->secret);
    if (!*has_secret) *why = "secret must be \"32 hex digits\" (16 bytes)";
    return *has_secret;
  }
  *why = "unknown key '" + name + "' (expected id, secret, name)";
  return false;
}

}  // namespace

bool read_key_file(const std::string& path, Key* key, Error* error) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    set_error(error, ErrorCode::invalid_argument, "key file " + path + ": " + std::strerror(errno));
    return false;
  }
  if ((info.st_mode & 077) != 0) {
    set_error(error, ErrorCode::invalid_argument,
              "key file " + path + " may be read by group or others; run chmod 600 " + path);
    return false;
  }
  std::ifstream file(path);
  std::string line;
  bool has_id = false, has_secret = false;
  for (int number = 1; std::getline(file, line) && number <= 1000; ++number) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const auto equals = line.find('=');
    std::string why = "not a `key = value` line";
    if (equals == std::string::npos || !read_line(trim(line.substr(0, equals)), trim(line.substr(equals + 1)),
                                                  key, &has_id, &has_secret, &why)) {
      set_error(error, ErrorCode::invalid_argument,
                "key file " + path + " line " + std::to_string(number) + ": " + why);
      return false;
    }
  }
  if (!has_id || !has_secret) {
    set_error(error, ErrorCode::invalid_argument,
              "key file " + path + " needs id = N and secret = \"32 hex digits\"");
    return false;
  }
  return true;
}

}  // namespace flurry::client
