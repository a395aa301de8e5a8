// client/forms.cc — dec, hex, base32, readable and opaque forms of an ID (forms.h).
#include "client/forms.h"

#include <sodium.h>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <string>

namespace flurry::client::forms {
namespace {

// Crockford's alphabet: digits, then letters without I, L, O, U; in ASCII order.
constexpr std::string_view base32_alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

Error too_small(std::size_t needed, std::size_t given) {
  return Error{"the output buffer holds " + std::to_string(given) + " chars; this form needs " +
               std::to_string(needed)};
}

// Quotes untrusted text for a message, cut to a readable length.
std::string quoted(std::string_view text) {
  constexpr std::size_t shown_max = 48;
  return "'" + std::string(text.substr(0, shown_max)) + (text.size() > shown_max ? "...'" : "'");
}

unsigned decimal_digits(std::uint64_t value) {
  unsigned digits = 1;
  while (value >= 10) {
    value /= 10;
    ++digits;
  }
  return digits;
}

// Writes `value` as exactly `width` digits, zero-padded (the value must fit).
void write_digits(char* out, std::uint64_t value, unsigned width) {
  for (unsigned i = width; i > 0; --i) {
    out[i - 1] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
}

// 1..19 decimal digits and nothing else.
std::optional<std::uint64_t> read_digits(std::string_view text) {
  if (text.empty() || text.size() > dec_size_max) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return value;
}

std::uint64_t pow10(unsigned exponent) {
  std::uint64_t value = 1;
  while (exponent-- > 0) value *= 10;
  return value;
}

int year_of(std::uint64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return tm.tm_year + 1900;
}

// The value of a Crockford symbol, with lower case and the aliases I, L -> 1 and O -> 0; -1
// for anything else.
int base32_symbol(char c) {
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  if (c == 'I' || c == 'L') c = '1';
  if (c == 'O') c = '0';
  const std::size_t symbol = base32_alphabet.find(c);  // U is not in it
  return symbol == std::string_view::npos ? -1 : static_cast<int>(symbol);
}

Status check_tag(std::string_view tag) {
  if (tag.size() > tag_size_max) {
    return Error{"tag " + quoted(tag) + " is longer than 4 chars"};
  }
  for (char c : tag) {
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
      return Error{"tag " + quoted(tag) + " may hold only A-Z and 0-9"};
    }
  }
  return {};
}

}  // namespace

std::string_view to_string(Form form) {
  switch (form) {
    case Form::dec:
      return "dec";
    case Form::hex:
      return "hex";
    case Form::readable:
      return "readable";
    case Form::base32:
      return "base32";
    case Form::opaque:
      return "opaque";
    case Form::uuid:
      return "uuid";
  }
  return "unknown";
}

std::optional<Form> parse_form(std::string_view name) {
  for (Form form : {Form::dec, Form::hex, Form::readable, Form::base32, Form::opaque, Form::uuid}) {
    if (to_string(form) == name) return form;
  }
  return std::nullopt;
}

// ---- dec, hex, base32 ----

Result<std::size_t> format_dec(std::uint64_t id, std::span<char> out) {
  const unsigned digits = decimal_digits(id);
  if (out.size() < digits) return too_small(digits, out.size());
  write_digits(out.data(), id, digits);
  return std::size_t{digits};
}

Result<std::size_t> format_hex(std::uint64_t id, std::span<char> out) {
  if (out.size() < hex_size) return too_small(hex_size, out.size());
  constexpr std::string_view hex_digits = "0123456789abcdef";
  out[0] = '0';
  out[1] = 'x';
  for (std::size_t i = 0; i < 16; ++i) out[2 + i] = hex_digits[(id >> (60 - 4 * i)) & 0xf];
  return hex_size;
}

Result<std::size_t> format_base32(std::uint64_t value, std::span<char> out) {
  if (out.size() < base32_size) return too_small(base32_size, out.size());
  for (std::size_t i = 0; i < base32_size; ++i) {
    const unsigned shift = static_cast<unsigned>(5 * (base32_size - 1 - i));
    out[i] = base32_alphabet[(value >> shift) & 31];  // shift 60: the top 4 bits
  }
  return base32_size;
}

Result<std::uint64_t> parse_dec(std::string_view text) {
  const std::optional<std::uint64_t> value = read_digits(text);
  if (!value || *value > id_max) {
    return Error{quoted(text) + " is not a decimal ID (1 to 19 digits, below 2^63)"};
  }
  return *value;
}

Result<std::uint64_t> parse_hex(std::string_view text) {
  const bool prefixed = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  std::uint64_t value = 0;
  const char* first = text.data() + 2;
  const char* last = text.data() + text.size();
  const auto [end, ec] = prefixed ? std::from_chars(first, last, value, 16)
                                  : std::from_chars_result{first, std::errc::invalid_argument};
  if (!prefixed || text.size() > hex_size || ec != std::errc{} || end != last || value > id_max) {
    return Error{quoted(text) + " is not a hexadecimal ID (0x and 1 to 16 hex digits, below 2^63)"};
  }
  return value;
}

Result<std::uint64_t> parse_base32(std::string_view text) {
  if (text.size() != base32_size) {
    return Error{quoted(text) + " is not base32: it has " + std::to_string(text.size()) +
                 " chars, a base32 ID has 13"};
  }
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int symbol = base32_symbol(text[i]);
    if (symbol < 0) {
      return Error{quoted(text) + " is not base32: '" + std::string(1, text[i]) + "' at position " +
                   std::to_string(i + 1) + " is not a Crockford symbol (0-9, A-Z but U)"};
    }
    // 13 symbols carry 65 bits; an ID's 63 leave the first symbol 0..7.
    if (i == 0 && symbol > 7) {
      return Error{quoted(text) +
                   " is not base32 of an ID: it is 2^63 or more (the first symbol must be 0-7)"};
    }
    value = (value << 5) | static_cast<unsigned>(symbol);
  }
  return value;
}

Status check_fits(const proto::Layout& layout, std::uint64_t id) {
  const unsigned id_bits = layout.time_bits + layout.node_bits + layout.sequence_bits;
  if (id_bits < 64 && (id >> id_bits) != 0) {
    return Error{"ID " + std::to_string(id) + " has bits above the layout's " + std::to_string(id_bits) +
                 " bits; is it from another layout?"};
  }
  return {};
}

// ---- uuid ----

namespace {

constexpr std::uint64_t uuid_version = 7;
constexpr std::uint64_t uuid_variant = 0b10;
constexpr std::size_t uuid_dashes[] = {8, 13, 18, 23};

bool uuid_dash_at(std::size_t i) {
  return i == uuid_dashes[0] || i == uuid_dashes[1] || i == uuid_dashes[2] || i == uuid_dashes[3];
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<std::size_t> format_uuid(const proto::Layout& layout, std::uint64_t id, std::span<char> out) {
  if (out.size() < uuid_size) return too_small(uuid_size, out.size());
  if (id > id_max) return Error{"ID " + std::to_string(id) + " is 2^63 or more"};
  if (Status fits = check_fits(layout, id); !fits.ok()) return fits;
  const std::uint64_t unix_ms = layout.decode(id).unix_ms;
  if (unix_ms >> 48 != 0) {
    return Error{"ID " + std::to_string(id) + " is of " + proto::format_unix_ms(unix_ms) +
                 ", past what a UUID's 48 bits of milliseconds hold (the year 10889)"};
  }
  // hi: unix_ts_ms (48) | ver (4) | rand_a (12); lo: var (2) | rand_b (62). rand_a:rand_b = id.
  const std::uint64_t hi = (unix_ms << 16) | (uuid_version << 12) | (id >> 62);
  const std::uint64_t lo = (uuid_variant << 62) | (id & ((std::uint64_t{1} << 62) - 1));
  constexpr std::string_view hex_digits = "0123456789abcdef";
  std::size_t nibble = 0;
  for (std::size_t i = 0; i < uuid_size; ++i) {
    if (uuid_dash_at(i)) {
      out[i] = '-';
      continue;
    }
    const std::uint64_t word = nibble < 16 ? hi : lo;
    const unsigned shift = static_cast<unsigned>(60 - 4 * (nibble % 16));
    out[i] = hex_digits[(word >> shift) & 0xf];
    ++nibble;
  }
  return uuid_size;
}

Result<std::uint64_t> parse_uuid(const proto::Layout& layout, std::string_view text) {
  if (text.size() != uuid_size) {
    return Error{quoted(text) + " is not a UUID: it has " + std::to_string(text.size()) +
                 " chars, a UUID has 36 (8-4-4-4-12 hex digits)"};
  }
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;
  std::size_t nibble = 0;
  for (std::size_t i = 0; i < uuid_size; ++i) {
    if (uuid_dash_at(i)) {
      if (text[i] != '-') {
        return Error{quoted(text) + " is not a UUID: position " + std::to_string(i + 1) + " must be '-'"};
      }
      continue;
    }
    const int value = hex_value(text[i]);
    if (value < 0) {
      return Error{quoted(text) + " is not a UUID: '" + std::string(1, text[i]) + "' at position " +
                   std::to_string(i + 1) + " is not a hex digit"};
    }
    std::uint64_t& word = nibble < 16 ? hi : lo;
    word = (word << 4) | static_cast<unsigned>(value);
    ++nibble;
  }
  if (((hi >> 12) & 0xf) != uuid_version) {
    return Error{quoted(text) + " is not a flurry UUID: its version is " + std::to_string((hi >> 12) & 0xf) +
                 ", flurry writes version 7"};
  }
  if ((lo >> 62) != uuid_variant) {
    return Error{quoted(text) + " is not a flurry UUID: its variant is not RFC 9562's (10 in binary)"};
  }
  if (((hi >> 1) & 0x7ff) != 0) {
    return Error{quoted(text) + " is not a flurry UUID: the 11 bits above the ID are not 0"};
  }
  const std::uint64_t id = ((hi & 1) << 62) | (lo & ((std::uint64_t{1} << 62) - 1));
  if (Status fits = check_fits(layout, id); !fits.ok()) {
    return Error{quoted(text) + " is not a UUID of this layout: " + fits.message()};
  }
  const std::uint64_t unix_ms = hi >> 16;
  const std::uint64_t expected_ms = layout.decode(id).unix_ms;
  if (unix_ms != expected_ms) {
    return Error{quoted(text) + " is not a UUID of this layout: its time is " +
                 proto::format_unix_ms(unix_ms) + ", the ID inside it is of " +
                 proto::format_unix_ms(expected_ms) + " (another epoch or layout?)"};
  }
  return id;
}

}  // namespace flurry::client::forms

// ---- readable ----

namespace flurry::client::forms {

ReadableForm::ReadableForm(const proto::Layout& layout) : layout_(layout) {
  const int first_year = year_of(layout.epoch_ms);
  const int last_year = year_of(proto::layout_end_unix_ms(layout));
  year_digits_ = first_year >= 2000 && last_year <= 2099
                     ? 2
                     : std::max(4U, decimal_digits(static_cast<std::uint64_t>(last_year)));
  fraction_digits_ = layout.time_unit_ms == 1 ? 3 : layout.time_unit_ms == 10 ? 2 : 0;
  rest_bits_ = layout.node_bits + layout.sequence_bits;
  rest_digits_ = decimal_digits((std::uint64_t{1} << rest_bits_) - 1);
}

Result<ReadableForm> ReadableForm::create(const proto::Layout& layout) {
  // "now" at the epoch: the clock checks (epoch in the future, run out) do not matter here.
  if (Status valid = proto::validate(layout, 0, layout.epoch_ms); !valid.ok()) {
    return std::move(valid).context("readable form");
  }
  return ReadableForm(layout);
}

Result<std::size_t> ReadableForm::format(std::uint64_t id, std::string_view tag, std::span<char> out) const {
  if (Status fits = check_fits(layout_, id); !fits.ok()) return fits;
  if (Status tag_ok = check_tag(tag); !tag_ok.ok()) return tag_ok;
  const std::size_t needed = size(tag.size());
  if (out.size() < needed) return too_small(needed, out.size());
  const std::uint64_t unix_ms = layout_.decode(id).unix_ms;
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char* p = out.data();
  const auto put = [&p](std::uint64_t value, unsigned width) {
    write_digits(p, value, width);
    p += width;
  };
  const auto year = static_cast<std::uint64_t>(tm.tm_year + 1900);
  put(year_digits_ == 2 ? year - 2000 : year, year_digits_);
  put(static_cast<std::uint64_t>(tm.tm_mon + 1), 2);
  put(static_cast<std::uint64_t>(tm.tm_mday), 2);
  put(static_cast<std::uint64_t>(tm.tm_hour), 2);
  put(static_cast<std::uint64_t>(tm.tm_min), 2);
  put(static_cast<std::uint64_t>(tm.tm_sec), 2);
  // Truncated to the unit: 3 digits of ms, 2 of hundredths, or none.
  put((unix_ms % 1000) / pow10(3 - fraction_digits_), fraction_digits_);
  p = std::copy(tag.begin(), tag.end(), p);
  put(id & ((std::uint64_t{1} << rest_bits_) - 1), rest_digits_);
  return needed;
}

// The time field of TIME digits (length already checked).
Result<std::uint64_t> ReadableForm::parse_time(std::string_view digits) const {
  std::size_t at = 0;
  const auto take = [&](unsigned width) {
    const std::optional<std::uint64_t> value = read_digits(digits.substr(at, width));
    at += width;
    return value;
  };
  const std::optional<std::uint64_t> year = take(year_digits_);
  const std::optional<std::uint64_t> fields[] = {take(2), take(2), take(2), take(2), take(2)};
  const std::optional<std::uint64_t> fraction =
      fraction_digits_ == 0 ? std::optional<std::uint64_t>{0} : take(fraction_digits_);
  const bool all_digits =
      year && fraction &&
      std::all_of(std::begin(fields), std::end(fields), [](const auto& field) { return field.has_value(); });
  if (!all_digits)
    return Error{"its first " + std::to_string(time_digits()) + " chars (the time) must be digits"};
  std::tm tm{};
  tm.tm_year = static_cast<int>((year_digits_ == 2 ? 2000 + *year : *year) - 1900);
  tm.tm_mon = static_cast<int>(*fields[0]) - 1;
  tm.tm_mday = static_cast<int>(*fields[1]);
  tm.tm_hour = static_cast<int>(*fields[2]);
  tm.tm_min = static_cast<int>(*fields[3]);
  tm.tm_sec = static_cast<int>(*fields[4]);
  const std::tm asked = tm;
  const std::time_t seconds = timegm(&tm);  // normalizes tm: a changed field was out of range
  if (seconds < 0 || tm.tm_year != asked.tm_year || tm.tm_mon != asked.tm_mon ||
      tm.tm_mday != asked.tm_mday || tm.tm_hour != asked.tm_hour || tm.tm_min != asked.tm_min ||
      tm.tm_sec != asked.tm_sec) {
    return Error{"its time " + std::string(digits) + " is not a real UTC date and time"};
  }
  const std::uint64_t unit = layout_.time_unit_ms;
  const std::uint64_t unix_ms =
      static_cast<std::uint64_t>(seconds) * 1000 + *fraction * pow10(3 - fraction_digits_);
  const std::uint64_t first_unit = layout_.epoch_ms / unit;
  if (unix_ms / unit < first_unit || unix_ms / unit - first_unit > layout_.time_max()) {
    return Error{"its time " + proto::format_unix_ms(unix_ms) + " is outside the layout (" +
                 proto::format_unix_ms(layout_.epoch_ms) + " to " +
                 proto::format_unix_ms(proto::layout_end_unix_ms(layout_)) + ")"};
  }
  return unix_ms / unit - first_unit;
}

Result<Readable> ReadableForm::parse(std::string_view text) const {
  const std::size_t bare = size(0);
  if (text.size() < bare || text.size() > bare + tag_size_max) {
    return Error{quoted(text) + " is not a readable ID of this layout: it has " +
                 std::to_string(text.size()) + " chars, not " + std::to_string(bare) + " to " +
                 std::to_string(bare + tag_size_max)};
  }
  Readable readable;
  readable.tag_size = text.size() - bare;
  const std::string_view tag = text.substr(time_digits(), readable.tag_size);
  const std::string_view rest_digits = text.substr(time_digits() + readable.tag_size);
  Result<std::uint64_t> time = parse_time(text.substr(0, time_digits()));
  if (!time.ok()) return Error{quoted(text) + " is not a readable ID: " + time.message()};
  if (Status tag_ok = check_tag(tag); !tag_ok.ok()) {
    return Error{quoted(text) + " is not a readable ID: " + tag_ok.message()};
  }
  const std::optional<std::uint64_t> rest = read_digits(rest_digits);
  if (!rest || (*rest >> rest_bits_) != 0) {
    return Error{quoted(text) + " is not a readable ID: its last " + std::to_string(rest_digits_) +
                 " chars must be a number below 2^" + std::to_string(rest_bits_)};
  }
  std::copy(tag.begin(), tag.end(), readable.tag.begin());
  readable.id = (*time << rest_bits_) | *rest;
  return readable;
}

}  // namespace flurry::client::forms

// ---- opaque ----

namespace flurry::client::forms {
namespace {

constexpr unsigned half_right_bits = 32;  // R: bits 31..0; L: bits 62..32 (31 bits)
constexpr std::uint64_t domain_byte = 0x66;

std::uint64_t low_bits(std::uint64_t value, unsigned bits) {
  return value & ((std::uint64_t{1} << bits) - 1);
}

// F_i(half) = SipHash-2-4(key, LE64(half | i << 32 | 0x66 << 56)), forms.h.
std::uint64_t round_function(const std::array<std::uint8_t, opaque_secret_size>& key, unsigned round,
                             std::uint64_t half) {
  const std::uint64_t message = half | (std::uint64_t{round} << 32) | (domain_byte << 56);
  std::array<unsigned char, 8> in{};
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(message >> (8 * i));
  std::array<unsigned char, crypto_shorthash_BYTES> out{};
  crypto_shorthash(out.data(), in.data(), in.size(), key.data());
  std::uint64_t hash = 0;
  for (std::size_t i = 0; i < out.size(); ++i) hash |= std::uint64_t{out[i]} << (8 * i);
  return hash;
}

// Width of the left half before round i: 31 before even rounds, 32 before odd ones.
constexpr unsigned left_bits_before(unsigned round) {
  return round % 2 == 0 ? proto::id_bits_max - half_right_bits : half_right_bits;
}

static_assert(opaque_rounds % 2 == 0, "the halves end as (31, 32) only after an even number of rounds");
static_assert(opaque_rounds >= 8);
static_assert(opaque_secret_size == crypto_shorthash_KEYBYTES);
static_assert(crypto_shorthash_BYTES == 8);

bool valid_key_id(std::string_view id) {
  return !id.empty() && id.size() <= key_id_size_max && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  });
}

}  // namespace

Result<OpaqueKey> OpaqueKey::create(std::string_view id,
                                    std::span<const std::uint8_t, opaque_secret_size> secret) {
  if (!valid_key_id(id)) return Error{"key id " + quoted(id) + " must be 1 to 8 chars of a-z and 0-9"};
  if (sodium_init() < 0) return Error{"libsodium failed to initialize"};
  if (sodium_is_zero(secret.data(), secret.size()) == 1) {
    return Error{"key " + std::string(id) +
                 ": the secret is all zero; generate one with: head -c 16 /dev/urandom | xxd -p"};
  }
  OpaqueKey key;
  std::copy(secret.begin(), secret.end(), key.secret_.begin());
  std::copy(id.begin(), id.end(), key.id_.begin());
  key.id_size_ = id.size();
  return key;
}

bool OpaqueKey::has_id(std::string_view id) const {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return id.size() == id_size_ &&
         std::equal(id.begin(), id.end(), id_.begin(), [&](char x, char y) { return lower(x) == y; });
}

OpaqueKey::~OpaqueKey() { sodium_memzero(secret_.data(), secret_.size()); }

std::uint64_t OpaqueKey::encrypt(std::uint64_t x) const {
  FLURRY_INVARIANT(x <= id_max, "opaque encrypt of a value of 2^63 or more");
  std::uint64_t left = x >> half_right_bits;
  std::uint64_t right = low_bits(x, half_right_bits);
  for (unsigned round = 0; round < opaque_rounds; ++round) {
    const std::uint64_t mixed =
        low_bits(left ^ round_function(secret_, round, right), left_bits_before(round));
    left = right;
    right = mixed;
  }
  return (left << half_right_bits) | right;
}

std::uint64_t OpaqueKey::decrypt(std::uint64_t y) const {
  FLURRY_INVARIANT(y <= id_max, "opaque decrypt of a value of 2^63 or more");
  std::uint64_t left = y >> half_right_bits;
  std::uint64_t right = low_bits(y, half_right_bits);
  for (unsigned round = opaque_rounds; round-- > 0;) {
    const std::uint64_t before =
        low_bits(right ^ round_function(secret_, round, left), left_bits_before(round));
    right = left;
    left = before;
  }
  return (left << half_right_bits) | right;
}

Result<std::size_t> OpaqueKey::format(std::uint64_t id, std::span<char> out) const {
  if (id > id_max) return Error{"ID " + std::to_string(id) + " is 2^63 or more"};
  const std::size_t needed = id_size_ + 1 + base32_size;
  if (out.size() < needed) return too_small(needed, out.size());
  std::copy(id_.begin(), id_.begin() + static_cast<std::ptrdiff_t>(id_size_), out.begin());
  out[id_size_] = '_';
  const Result<std::size_t> written = format_base32(encrypt(id), out.subspan(id_size_ + 1));
  FLURRY_INVARIANT(written.ok(), "the buffer was checked above");
  return needed;
}

Result<std::string_view> opaque_key_id(std::string_view text) {
  const std::size_t separator = text.find('_');
  const auto key_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (separator == std::string_view::npos || separator == 0 || separator > key_id_size_max ||
      text.size() != separator + 1 + base32_size ||
      !std::all_of(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(separator), key_char)) {
    return Error{quoted(text) + " is not an opaque ID (KEYID_ and 13 base32 chars, e.g. k1_2TJVZN1P765Y3)"};
  }
  return text.substr(0, separator);
}

Result<std::uint64_t> parse_opaque(const OpaqueKey& key, std::string_view text) {
  Result<std::string_view> key_id = opaque_key_id(text);
  if (!key_id.ok()) return key_id.status();
  if (!key.has_id(*key_id)) {
    return Error{quoted(text) + " was made with key '" + std::string(*key_id) + "', not '" +
                 std::string(key.id()) + "'"};
  }
  Result<std::uint64_t> value = parse_base32(text.substr(key_id->size() + 1));
  if (!value.ok()) return Error{"opaque ID " + value.message()};
  return key.decrypt(*value);
}

}  // namespace flurry::client::forms
