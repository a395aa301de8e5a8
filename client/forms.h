// client/forms.h — the text forms of a flurry ID, computed in the client (ranges stay ranges
// on the wire; docs/forms.md, docs/architecture.md).
//
// Contract: pure functions of the ID (and, where named, the layout or a key). Formatting
// writes into a caller's buffer and allocates nothing; parsing reads a string_view and
// allocates only to build the message of a failure. Every failure is a flurry::Error with
// one sentence saying what is wrong with the input; nothing throws. Thread-safe: nothing here
// has state beyond its arguments (a ReadableForm or OpaqueKey is immutable once made).
//
// The forms (docs/forms.md):
//   dec       decimal, no padding: "4194324487". Parsing accepts 1..19 digits (value < 2^63
//             and, with a layout, within its bits: see check_fits).
//   hex       "0x" + 16 lower-case hex digits: "0x00000000fa005007". Parsing accepts 1..16
//             digits after 0x/0X, either case.
//   base32    Crockford base32, 13 symbols, most significant first, upper case:
//             "0000003X00M07". Fixed width, and the alphabet is in ASCII order, so string
//             order == numeric order. Parsing accepts lower case and Crockford's aliases
//             (I, i, L, l -> 1; O, o -> 0) and refuses anything else (U included), a length
//             other than 13, and values of 2^63 or more.
//   readable  time first, then an optional tag, then the non-time bits (ReadableForm below):
//             "240101000001000" "ORD" "0020487" for the default layout.
//   opaque    a keyed permutation of [0, 2^63) (OpaqueKey below), written as the key id, '_'
//             and the permuted number in base32: "k1_2TJVZN1P765Y3".
//   uuid      an RFC 9562 version-7 UUID that carries the whole ID (format_uuid below):
//             "018cc251-f400-7000-8000-00000000fa00". Sorts by time, decodes back exactly.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "base/status.h"
#include "proto/layout.h"

namespace flurry::client::forms {

// flurry::Error (core/status.h), not client::Error (client.h): forms fail with Status/Result.
using Error = ::flurry::Error;

enum class Form : std::uint8_t { dec = 0, hex, readable, base32, opaque, uuid };

// "dec", "hex", "readable", "base32", "opaque", "uuid".
std::string_view to_string(Form form);
std::optional<Form> parse_form(std::string_view name);

// IDs are below 2^63 (the sign bit stays 0, proto::id_bits_max).
inline constexpr std::uint64_t id_max = (std::uint64_t{1} << proto::id_bits_max) - 1;

// Every form fits in this many chars: the longest, readable with a 4-char tag, is at most 32
// for a valid layout (an 8-digit year needs 1 s units, which leave at most 33 bits, 10
// digits, to REST); forms_test checks every layout of its grid. No terminating NUL is
// written by the C++ API.
inline constexpr std::size_t text_size_max = 64;
inline constexpr std::size_t dec_size_max = 19;
inline constexpr std::size_t hex_size = 18;
inline constexpr std::size_t base32_size = 13;

// Each format_* returns the number of chars written, or fails when `out` is too small (or,
// where noted, the input is out of range).
Result<std::size_t> format_dec(std::uint64_t id, std::span<char> out);
Result<std::size_t> format_hex(std::uint64_t id, std::span<char> out);
// Any 64-bit value (the opaque form uses it for the permuted number).
Result<std::size_t> format_base32(std::uint64_t value, std::span<char> out);

Result<std::uint64_t> parse_dec(std::string_view text);
Result<std::uint64_t> parse_hex(std::string_view text);
Result<std::uint64_t> parse_base32(std::string_view text);

// Fails unless `id` fits the layout's time + node + sequence bits.
Status check_fits(const proto::Layout& layout, std::uint64_t id);

// ---- uuid ----
//
// An RFC 9562 version-7 UUID (128 bits, most significant first):
//   unix_ts_ms  48 bits  the ID's instant in Unix milliseconds: the layout's epoch + the ID's
//                        time field x its unit (the instant the readable form writes)
//   ver          4 bits  7
//   rand_a      12 bits  } 74 bits that hold the 63-bit ID in their low 63 bits; the 11 bits
//   var          2 bits  } above it are 0 (var is 0b10, between rand_a and rand_b)
//   rand_b      62 bits  }
// written as 8-4-4-4-12 lower-case hex digits. 48 bits of milliseconds reach the year 10889:
// an ID of a later instant (only layouts of 1 s units and 41 or more time bits reach so far)
// has no uuid form.
//   * Unique whenever the IDs are: the ID is inside it, bit for bit.
//   * Sorts by time, and IDs of one layout in their numeric order: unix_ts_ms rises with the
//     time field (a unit is at least 1 ms), and for one instant the rest is the ID itself.
//   * Decodes back to the ID (parse_uuid); the layout only checks that unix_ts_ms is the ID's
//     own instant (a UUID of another layout, or not one of flurry's, is refused).
// A UUIDv7 of a random generator is unique with high probability; this one is unique by
// construction, and any UUIDv7 reader (PostgreSQL's uuid type, Python's uuid.UUID) reads it
// as version 7, variant RFC 9562.
inline constexpr std::size_t uuid_size = 36;

// Fails when `id` does not fit the layout, its instant is past 10889 (2^48 ms), or `out` is
// too small.
Result<std::size_t> format_uuid(const proto::Layout& layout, std::uint64_t id, std::span<char> out);
// Accepts either case. Fails naming the first thing wrong: length, a dash or hex digit out of
// place, the version or variant, the bits above the ID not 0, an ID that does not fit the
// layout, or a unix_ts_ms that is not the ID's instant in this layout.
Result<std::uint64_t> parse_uuid(const proto::Layout& layout, std::string_view text);

// ---- readable ----
//
// TIME TAG REST, no delimiters, every part fixed width for one layout:
//   TIME  the ID's instant in UTC, truncated to the layout's unit: YY MM DD HH mm ss and then
//         SSS (1 ms unit), SS (hundredths: 10 ms unit) or nothing (1 s unit). YY is two digits
//         when the whole layout (epoch to its last instant) lies in 2000..2099, as for the
//         snowflake and js-safe presets; otherwise the full year, zero-padded to the digits of
//         the layout's last year (at least 4), so every TIME of a layout has the same width.
//   TAG   0..4 chars of [A-Z0-9], given by the caller (a business tag such as "ORD").
//   REST  the bits below the time field (node, core, counter) as one decimal number,
//         zero-padded to the digits of its largest value (7 for the snowflake layout).
// The TAG's length is what is left between TIME and REST, so it may hold digits. For one
// tag, string order == numeric order of the IDs. The time field is recovered as
// floor(instant / unit) - floor(epoch / unit), exact for any epoch.
inline constexpr std::size_t tag_size_max = 4;

struct Readable {
  std::uint64_t id = 0;
  std::array<char, tag_size_max> tag{};
  std::size_t tag_size = 0;
  std::string_view tag_view() const { return {tag.data(), tag_size}; }
};

class ReadableForm {
 public:
  // Fails when the layout does not pass proto::validate (clock checks aside).
  static Result<ReadableForm> create(const proto::Layout& layout);

  // Fails when `tag` is not 0..4 chars of [A-Z0-9], `id` does not fit the layout, or `out`
  // is too small (size(tag.size()) chars are needed).
  Result<std::size_t> format(std::uint64_t id, std::string_view tag, std::span<char> out) const;
  // Fails naming the first thing wrong: length, a non-digit, a date field out of range, a
  // tag char, a REST above the layout's bits, an instant outside the layout.
  Result<Readable> parse(std::string_view text) const;

  std::size_t size(std::size_t tag_size) const { return time_digits() + tag_size + rest_digits_; }
  std::size_t time_digits() const { return year_digits_ + 10 + fraction_digits_; }
  const proto::Layout& layout() const { return layout_; }

 private:
  explicit ReadableForm(const proto::Layout& layout);
  Result<std::uint64_t> parse_time(std::string_view digits) const;

  proto::Layout layout_;
  unsigned year_digits_ = 2;      // 2 (yy) or the full year's
  unsigned fraction_digits_ = 3;  // 3, 2 or 0 for 1 ms, 10 ms, 1 s
  unsigned rest_bits_ = 0;        // node + sequence bits
  unsigned rest_digits_ = 1;
};

// ---- opaque ----
//
// A keyed permutation of [0, 2^63): an unbalanced Feistel network of `opaque_rounds` rounds
// over a 31-bit left half L (bits 62..32) and a 32-bit right half R (bits 31..0). Round i
// (0-based) maps (L, R) of widths (a, b) to (R, L xor F_i(R) mod 2^a), so the widths swap
// every round and, the rounds being even, end as (31, 32) again. The round function is
// SipHash-2-4 (libsodium crypto_shorthash) keyed with the 16-byte secret:
//   F_i(R) = low 64 bits of SipHash-2-4(key, LE64(R | i << 32 | 0x66 << 56))
// (0x66 = 'f', a domain byte). Each round is invertible, so the whole is a permutation;
// decrypt runs the rounds backwards. Consecutive IDs map to unrelated numbers; without the
// key the number reveals neither time nor volume. Known answer (docs/forms.md, forms_test): key
// 000102030405060708090a0b0c0d0e0f, encrypt(0) = opaque_known_answer_of_0.
inline constexpr unsigned opaque_rounds = 10;
inline constexpr std::size_t opaque_secret_size = 16;  // crypto_shorthash_KEYBYTES
// Key ids are 1..8 chars of [a-z0-9]; parsing of an opaque string matches them ignoring case.
inline constexpr std::size_t key_id_size_max = 8;

class OpaqueKey {
 public:
  // Fails when `id` is not 1..8 chars of [a-z0-9] or the secret is all zero.
  static Result<OpaqueKey> create(std::string_view id,
                                  std::span<const std::uint8_t, opaque_secret_size> secret);
  OpaqueKey(const OpaqueKey&) = default;
  OpaqueKey& operator=(const OpaqueKey&) = default;
  ~OpaqueKey();  // wipes the secret (sodium_memzero)

  // For x <= id_max: a value <= id_max; decrypt(encrypt(x)) == x. Larger x: invariant abort.
  std::uint64_t encrypt(std::uint64_t x) const;
  std::uint64_t decrypt(std::uint64_t y) const;

  std::string_view id() const { return {id_.data(), id_size_}; }
  // Whether `id` is this key's id, ignoring case.
  bool has_id(std::string_view id) const;

  // "<id>_<13 base32 chars of encrypt(id)>". Fails when `out` is too small or the ID is
  // above id_max.
  Result<std::size_t> format(std::uint64_t id, std::span<char> out) const;

 private:
  OpaqueKey() = default;
  std::array<std::uint8_t, opaque_secret_size> secret_{};
  std::array<char, key_id_size_max> id_{};
  std::size_t id_size_ = 0;
};

// The key id of an opaque string ("k1" of "k1_2TJVZN1P765Y3"), or a failure saying why the
// text is not an opaque string.
Result<std::string_view> opaque_key_id(std::string_view text);
// Decrypts an opaque string with `key`; fails when the key id differs (ignoring case) or the
// base32 part is malformed.
Result<std::uint64_t> parse_opaque(const OpaqueKey& key, std::string_view text);

// Known answers with the key above (id "k1"); forms_test and the README check them.
inline constexpr std::uint64_t opaque_known_answer_of_0 = 7704551156889774887ULL;
inline constexpr std::uint64_t opaque_known_answer_of_1 = 7614573489595586949ULL;
inline constexpr std::uint64_t opaque_known_answer_of_known_id = 3263842716310771651ULL;  // of 4194324487
inline constexpr std::string_view opaque_known_text_of_known_id = "k1_2TJVZN1P765Y3";

}  // namespace flurry::client::forms
