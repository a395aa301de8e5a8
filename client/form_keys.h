// client/form_keys.h — the key file of the opaque form (forms.h OpaqueKey): load, pick a key.
//
// A key file is TOML, mode 0600 or stricter (a file that group or others may read or write is
// refused: a leaked key reveals every ID's time and volume):
//
//   current = "k2"        # the key that encodes new IDs; may be left out when there is one key
//   [[key]]
//   id = "k1"             # 1..8 chars of a-z and 0-9; the opaque string starts with it
//   secret = "000102030405060708090a0b0c0d0e0f"   # 16 bytes, 32 hex digits
//   [[key]]
//   id = "k2"
//   secret = "..."
//
// Every key decodes (an opaque string names its key id), only `current` encodes: to rotate,
// add a key and point `current` at it; drop the old key once no stored ID uses it. Limits:
// the file at most key_file_size_max bytes, at most key_count_max keys, ids unique. Loading
// reads the file once; the KeyRing is immutable afterwards and safe to share between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "client/forms.h"

namespace flurry::client::forms {

inline constexpr std::size_t key_file_size_max = 64 * 1024;
inline constexpr std::size_t key_count_max = 64;

class KeyRing {
 public:
  // Errors, each naming the file: it cannot be opened or read (errno text); it is not a
  // regular file; its mode lets group or others in (with the chmod that fixes it); it is too
  // large; it is not TOML (with the line); a key without id or secret, an id or secret
  // malformed or duplicated, an unknown setting; no key; several keys and no `current`, or a
  // `current` that names no key.
  static Result<KeyRing> load(const std::string& path);
  // The same from TOML text (no file, no mode check); `source` names it in messages.
  static Result<KeyRing> parse(std::string_view toml_text, std::string_view source);

  // The key new IDs are encoded with.
  const OpaqueKey& current() const { return keys_[current_]; }
  // The key with this id (ignoring case), or null.
  const OpaqueKey* find(std::string_view id) const;
  // Decodes an opaque string with the key it names. Fails when it is malformed or names a
  // key this ring lacks.
  Result<std::uint64_t> decode(std::string_view text) const;
  std::size_t size() const { return keys_.size(); }

 private:
  std::vector<OpaqueKey> keys_;
  std::size_t current_ = 0;
};

}  // namespace flurry::client::forms

namespace flurry::client::forms {

// ---- any form ----

// What a form needs beyond the ID: the layout's ReadableForm (readable; uuid uses its
// layout), a tag (readable, formatting only) and a key ring (opaque: its current key encodes;
// decoding picks the key the text names). Not owned.
struct FormOptions {
  const ReadableForm* readable = nullptr;
  std::string_view tag;
  const KeyRing* keys = nullptr;
};

struct Parsed {
  Form form = Form::dec;
  Readable value;           // the ID, and the tag of a readable form (empty otherwise)
  std::string_view key_id;  // opaque: the key id as written, a view into the parsed text
};

// `form` of `id` into `out`. Fails as the form's own function does, or when `options` lacks
// what the form needs (a tag with any form but readable is refused too).
Result<std::size_t> format_as(Form form, std::uint64_t id, const FormOptions& options, std::span<char> out);
// Text in `form`; fails as the form's own parser does, or when `options` lacks what it needs.
Result<Parsed> parse_as(Form form, std::string_view text, const FormOptions& options);
// Text in whichever form reads it: hex (0x...), dec, base32, readable and uuid (with
// options.readable) or opaque (KEYID_..., with options.keys). Fails when no form reads it (naming the
// likeliest form's reason) or when two do (a 13-digit number is both dec and base32): pass the form.
Result<Parsed> parse_any(std::string_view text, const FormOptions& options);

}  // namespace flurry::client::forms
