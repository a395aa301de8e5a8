// client/form_keys.cc — loading an opaque-form key file (form_keys.h) with toml++ and
// libsodium's hex decoder.
#include "client/form_keys.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>

#include "client/errors.h"

namespace flurry::client::forms {
namespace {

// Reads the whole file into `text` after checking what it is and who may read it.
Status read_key_file(const std::string& path, std::string& text) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{"key file " + path + ": " + errno_text(errno)};
  struct stat st {};
  Status checked;
  if (::fstat(fd, &st) != 0) {
    checked = Error{"key file " + path + ": " + errno_text(errno)};
  } else if (!S_ISREG(st.st_mode)) {
    checked = Error{"key file " + path + " is not a regular file"};
  } else if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    checked = Error{"key file " + path + " has mode " + mode +
                        ": group or others may read or write it; a key file must be mode 0600 or stricter "
                        "(chmod 600 " +
                        path + ")",
                    StatusCode::refused};
  } else if (static_cast<std::uint64_t>(st.st_size) > key_file_size_max) {
    checked = Error{"key file " + path + " is larger than " + std::to_string(key_file_size_max) + " bytes"};
  }
  if (checked.ok()) {
    text.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < text.size()) {  // a short read (a signal) reads on; 0 means the file shrank
      const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) checked = Error{"key file " + path + ": " + errno_text(errno)};
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    text.resize(done);
  }
  ::close(fd);
  return checked;
}

// One [[key]] table into an OpaqueKey.
Result<OpaqueKey> read_key(const toml::node& node, std::string_view source, std::size_t index) {
  const std::string where = std::string(source) + ": key " + std::to_string(index + 1);
  const toml::table* table = node.as_table();
  if (table == nullptr) return Error{where + " is not a table; write [[key]] with id and secret"};
  for (const auto& [name, value] : *table) {
    if (name != "id" && name != "secret") {
      return Error{where + " has an unknown setting '" + std::string(name.str()) + "' (only id and secret)"};
    }
  }
  const std::optional<std::string_view> id = (*table)["id"].value<std::string_view>();
  const std::optional<std::string_view> secret_hex = (*table)["secret"].value<std::string_view>();
  if (!id || !secret_hex) return Error{where + " needs both id = \"...\" and secret = \"...\""};
  std::array<std::uint8_t, opaque_secret_size> secret{};
  std::size_t secret_size = 0;
  const char* hex_end = nullptr;
  const bool hex_ok = secret_hex->size() == 2 * opaque_secret_size &&
                      sodium_hex2bin(secret.data(), secret.size(), secret_hex->data(), secret_hex->size(),
                                     nullptr, &secret_size, &hex_end) == 0 &&
                      secret_size == secret.size() && hex_end == secret_hex->data() + secret_hex->size();
  if (!hex_ok) {
    sodium_memzero(secret.data(), secret.size());
    return Error{where + " (" + std::string(*id) + "): secret must be 32 hex digits (16 bytes)"};
  }
  Result<OpaqueKey> key = OpaqueKey::create(*id, secret);
  sodium_memzero(secret.data(), secret.size());
  if (!key.ok()) return Error{where + ": " + key.message()};
  return key;
}

}  // namespace

Result<KeyRing> KeyRing::parse(std::string_view toml_text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& error) {
    return Error{std::string(source) + ": not TOML: " + std::string(error.description()) + " at line " +
                 std::to_string(error.source().begin.line)};
  }
  for (const auto& [name, value] : root) {
    if (name != "key" && name != "current") {
      return Error{std::string(source) + ": unknown setting '" + std::string(name.str()) +
                   "' (current and [[key]])"};
    }
  }
  const toml::array* entries = root["key"].as_array();
  if ((root.contains("key") && entries == nullptr) ||
      (root.contains("current") && !root["current"].is_string())) {
    return Error{std::string(source) + ": key must be [[key]] tables and current a string such as \"k1\""};
  }
  if (entries == nullptr || entries->empty()) {
    return Error{std::string(source) + ": no key; add [[key]] with id = \"k1\" and secret = 32 hex digits"};
  }
  if (entries->size() > key_count_max) {
    return Error{std::string(source) + ": more than " + std::to_string(key_count_max) + " keys"};
  }
  KeyRing ring;
  for (std::size_t i = 0; i < entries->size(); ++i) {
    Result<OpaqueKey> key = read_key((*entries)[i], source, i);
    if (!key.ok()) return key.status();
    if (ring.find(key->id()) != nullptr) {
      return Error{std::string(source) + ": key id '" + std::string(key->id()) + "' appears twice"};
    }
    ring.keys_.push_back(*key);
  }
  const std::optional<std::string_view> current = root["current"].value<std::string_view>();
  if (!current && ring.keys_.size() > 1) {
    return Error{std::string(source) + ": " + std::to_string(ring.keys_.size()) +
                 " keys and no current = \"ID\" saying which one encodes new IDs"};
  }
  if (current) {
    const OpaqueKey* chosen = ring.find(*current);
    if (chosen == nullptr)
      return Error{std::string(source) + ": current = \"" + std::string(*current) + "\" names no key"};
    ring.current_ = static_cast<std::size_t>(chosen - ring.keys_.data());
  }
  return ring;
}

Result<KeyRing> KeyRing::load(const std::string& path) {
  std::string text;
  Status read = read_key_file(path, text);
  Result<KeyRing> ring = read.ok() ? parse(text, path) : Result<KeyRing>(std::move(read));
  sodium_memzero(text.data(), text.size());
  return ring;
}

const OpaqueKey* KeyRing::find(std::string_view id) const {
  const auto found =
      std::find_if(keys_.begin(), keys_.end(), [id](const OpaqueKey& key) { return key.has_id(id); });
  return found == keys_.end() ? nullptr : &*found;
}

Result<std::uint64_t> KeyRing::decode(std::string_view text) const {
  Result<std::string_view> id = opaque_key_id(text);
  if (!id.ok()) return id.status();
  const OpaqueKey* key = find(*id);
  if (key == nullptr) {
    return Error{"opaque ID '" + std::string(text) + "' names key '" + std::string(*id) +
                 "', which the key file lacks"};
  }
  return parse_opaque(*key, text);
}

}  // namespace flurry::client::forms

namespace flurry::client::forms {
namespace {

Status check_options(Form form, const FormOptions& options) {
  if ((form == Form::readable || form == Form::uuid) && options.readable == nullptr)
    return Error{"the " + std::string(to_string(form)) + " form needs the ID layout"};
  if (form == Form::opaque && options.keys == nullptr) return Error{"the opaque form needs a key file"};
  return {};
}

}  // namespace

Result<std::size_t> format_as(Form form, std::uint64_t id, const FormOptions& options, std::span<char> out) {
  if (Status usable = check_options(form, options); !usable.ok()) return usable;
  if (form != Form::readable && !options.tag.empty()) return Error{"a tag is part of the readable form only"};
  if (id > id_max) return Error{"ID " + std::to_string(id) + " is 2^63 or more"};
  switch (form) {
    case Form::dec:
      return format_dec(id, out);
    case Form::hex:
      return format_hex(id, out);
    case Form::base32:
      return format_base32(id, out);
    case Form::readable:
      return options.readable->format(id, options.tag, out);
    case Form::opaque:
      return options.keys->current().format(id, out);
    case Form::uuid:
      return format_uuid(options.readable->layout(), id, out);
  }
  return Error{"unknown form"};
}

Result<Parsed> parse_as(Form form, std::string_view text, const FormOptions& options) {
  if (Status usable = check_options(form, options); !usable.ok()) return usable;
  Parsed parsed;
  parsed.form = form;
  Result<std::uint64_t> id = Error{"unknown form"};
  switch (form) {
    case Form::dec:
      id = parse_dec(text);
      break;
    case Form::hex:
      id = parse_hex(text);
      break;
    case Form::base32:
      id = parse_base32(text);
      break;
    case Form::opaque:
      id = options.keys->decode(text);
      if (id.ok()) parsed.key_id = text.substr(0, text.find('_'));
      break;
    case Form::uuid:
      id = parse_uuid(options.readable->layout(), text);
      break;
    case Form::readable: {
      Result<Readable> readable = options.readable->parse(text);
      if (!readable.ok()) return readable.status();
      parsed.value = *readable;
      return parsed;
    }
  }
  if (!id.ok()) return id.status();
  parsed.value.id = *id;
  return parsed;
}

Result<Parsed> parse_any(std::string_view text, const FormOptions& options) {
  // The form whose reason to report when nothing reads the text.
  Form likeliest = Form::dec;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) likeliest = Form::hex;
  if (opaque_key_id(text).ok()) likeliest = Form::opaque;
  if (text.size() == base32_size) likeliest = Form::base32;
  if (options.readable != nullptr && text.size() > dec_size_max) likeliest = Form::readable;
  if (options.readable != nullptr && text.size() == uuid_size && text.find('-') != std::string_view::npos)
    likeliest = Form::uuid;
  std::optional<Parsed> found;
  for (Form form : {Form::hex, Form::dec, Form::base32, Form::readable, Form::opaque, Form::uuid}) {
    if (!check_options(form, options).ok()) continue;
    Result<Parsed> parsed = parse_as(form, text, options);
    if (!parsed.ok()) continue;
    if (found) {
      return Error{"'" + std::string(text) + "' reads as " + std::string(to_string(found->form)) + " (" +
                   std::to_string(found->value.id) + ") and as " + std::string(to_string(form)) + " (" +
                   std::to_string(parsed->value.id) + "); say which form it is"};
    }
    found = *parsed;
  }
  if (found) return *found;
  Result<Parsed> reason = parse_as(likeliest, text, options);
  FLURRY_INVARIANT(!reason.ok(), "a form that reads the text was found above");
  return std::move(reason).status();
}

}  // namespace flurry::client::forms
