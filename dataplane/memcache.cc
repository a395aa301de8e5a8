// dataplane/memcache.cc — see memcache.h.
#include "dataplane/memcache.h"

#include <array>
#include <charconv>

namespace flurry::dataplane::memcache {

namespace {

bool blank(char c) { return c == ' ' || c == '\t'; }

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// Whether the line under way is a get or gets, whose many keys may make it longer than other
// lines (memcached too lets multi-gets past its line limit). Known once the verb and the blank
// after it have arrived; leading blanks are skipped (within line_size_max).
bool keys_line(std::string_view input) {
  std::size_t at = 0;
  while (at < input.size() && at < line_size_max && blank(input[at])) ++at;
  std::size_t end = at;
  while (end < input.size() && end - at < 5 && !blank(input[end]) && input[end] != '\r' &&
         input[end] != '\n') {
    ++end;
  }
  if (end == input.size() || !blank(input[end])) return false;
  const std::string_view verb = input.substr(at, end - at);
  return equals_ignoring_case(verb, "get") || equals_ignoring_case(verb, "gets");
}

Verb verb_of(std::string_view word) {
  static constexpr struct {
    std::string_view name;
    Verb verb;
  } verbs[] = {{"get", Verb::get},       {"gets", Verb::gets},       {"incr", Verb::incr},
               {"decr", Verb::decr},     {"version", Verb::version}, {"stats", Verb::stats},
               {"quit", Verb::quit},     {"set", Verb::store},       {"add", Verb::store},
               {"replace", Verb::store}, {"append", Verb::store},    {"prepend", Verb::store},
               {"cas", Verb::store},     {"delete", Verb::remove},   {"touch", Verb::touch}};
  for (const auto& known : verbs) {
    if (equals_ignoring_case(word, known.name)) return known.verb;
  }
  return Verb::unknown;
}

// A whole-token unsigned decimal (memcached's safe_strtoull: no sign, no blanks).
bool unsigned_of(std::string_view text, std::uint64_t* value) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

constexpr std::string_view bad_format = "bad command line format (a key is longer than 250 bytes)";

}  // namespace

Parsed parse(std::string_view input, std::vector<std::string_view>& tokens) {
  tokens.clear();
  Parsed parsed;
  if (input.empty()) return parsed;
  const std::size_t limit = keys_line(input) ? keys_line_size_max : line_size_max;
  // At most `limit` bytes before the line's CRLF (or bare LF), whether it has come or not (a
  // last CR may be the start of a CRLF).
  const std::size_t newline = input.find('\n');
  std::string_view text = input.substr(0, newline);
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.size() > limit) {
    parsed.result = Parse::fatal;
    parsed.error = "line too long: a command line is at most 2048 bytes, a get or gets line 49152";
    return parsed;
  }
  if (newline == std::string_view::npos) return parsed;  // incomplete
  for (std::size_t at = 0; at < text.size();) {
    while (at < text.size() && blank(text[at])) ++at;
    std::size_t end = at;
    while (end < text.size() && !blank(text[end])) ++end;
    if (end > at) tokens.push_back(text.substr(at, end - at));
    at = end;
  }
  parsed.consumed = newline + 1;
  parsed.result = Parse::error;  // until the verb and its tokens are known
  if (tokens.empty()) return parsed;
  parsed.verb = verb_of(tokens[0]);
  const Verb verb = parsed.verb;
  if ((verb == Verb::incr || verb == Verb::decr || verb == Verb::store || verb == Verb::remove ||
       verb == Verb::touch) &&
      tokens.size() >= 2 && tokens.back() == "noreply") {
    parsed.noreply = true;
    tokens.pop_back();
  }
  const std::size_t n = tokens.size();
  bool arity = false;
  switch (verb) {
    case Verb::get:
    case Verb::gets:
      arity = n >= 2;
      break;
    case Verb::incr:
    case Verb::decr:
    case Verb::touch:
      arity = n == 3;
      break;
    case Verb::version:
    case Verb::quit:
      arity = n == 1;
      break;
    case Verb::stats:
      arity = true;
      break;
    case Verb::store:
      arity = n == (equals_ignoring_case(tokens[0], "cas") ? 6U : 5U);
      break;
    case Verb::remove:
      arity = n == 2;
      break;
    case Verb::unknown:
      break;
  }
  if (!arity) return parsed;

  if (verb == Verb::store) {
    // The data block follows the line: take it (bounded) so the connection stays in step.
    std::uint64_t bytes = 0;
    if (!unsigned_of(tokens[4], &bytes)) {
      parsed.result = Parse::fatal;
      parsed.error = "bad data chunk length: the data that follows cannot be skipped";
      return parsed;
    }
    if (bytes > data_size_max) {
      parsed.result = Parse::fatal;
      parsed.error = "object too large: flurry stores nothing, and skips at most 8192 bytes of data";
      return parsed;
    }
    const std::size_t end = newline + 1 + static_cast<std::size_t>(bytes);
    if (input.size() < end + 2) {
      tokens.clear();
      parsed = Parsed{};  // incomplete: the data is on its way
      return parsed;
    }
    if (input[end] != '\r' || input[end + 1] != '\n') {
      parsed.result = Parse::fatal;
      parsed.error = "bad data chunk: the data is not followed by CRLF";
      return parsed;
    }
    parsed.consumed = end + 2;
    parsed.data = input.substr(newline + 1, static_cast<std::size_t>(bytes));
    parsed.set = equals_ignoring_case(tokens[0], "set");
  }
  for (std::size_t i = 1; i < n; ++i) {
    const bool key = verb == Verb::get || verb == Verb::gets || i == 1;
    if (key && tokens[i].size() > key_size_max) {
      parsed.result = Parse::client_error;
      parsed.error = bad_format;
      return parsed;
    }
  }
  if ((verb == Verb::incr || verb == Verb::decr) && !unsigned_of(tokens[2], &parsed.delta)) {
    parsed.result = Parse::client_error;
    parsed.error = "invalid numeric delta argument";
    return parsed;
  }
  parsed.result = Parse::command;
  return parsed;
}

void line(std::string& out, std::string_view text) {
  for (char c : text) out += (c == '\r' || c == '\n') ? ' ' : c;
  out += "\r\n";
}

void value(std::string& out, std::string_view key, std::uint64_t number, bool cas) {
  // to_chars, not to_string: an ID has 19 digits, past the short-string buffer, and a get of
  // many keys writes one line each.
  std::array<char, 24> digits;
  const auto [end, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), number);
  const auto size = static_cast<std::size_t>(end - digits.data());
  std::array<char, 8> length;
  const auto [length_end, length_ec] = std::to_chars(length.data(), length.data() + length.size(), size);
  out += "VALUE ";
  out += key;
  out += " 0 ";
  out.append(length.data(), length_end);
  if (cas) {
    out += ' ';
    out.append(digits.data(), end);
  }
  out += "\r\n";
  out.append(digits.data(), end);
  out += "\r\n";
}

void number(std::string& out, std::uint64_t value) {
  std::array<char, 24> digits;
  const auto [end, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), value);
  out.append(digits.data(), end);
  out += "\r\n";
}

void stat(std::string& out, std::string_view name, std::uint64_t value) {
  out += "STAT ";
  out += name;
  out += ' ';
  number(out, value);
}

void stat(std::string& out, std::string_view name, std::string_view value) {
  out += "STAT ";
  out += name;
  out += ' ';
  line(out, value);
}

}  // namespace flurry::dataplane::memcache
