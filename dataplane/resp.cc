// dataplane/resp.cc — see resp.h.
#include "dataplane/resp.h"

#include <array>
#include <charconv>

namespace flurry::dataplane::resp {

namespace {

// The line at `from` up to CRLF: its end (the CR), or npos when no CRLF is there yet.
std::size_t line_end(std::string_view input, std::size_t from) { return input.find("\r\n", from); }

// A decimal length after a type byte: `*12\r\n`. -1 when malformed.
std::int64_t length_at(std::string_view input, std::size_t from, std::size_t end) {
  std::int64_t value = -1;
  const char* first = input.data() + from;
  const char* last = input.data() + end;
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last || first == last) return -1;
  return value;
}

Parsed parse_inline(std::string_view input, std::vector<std::string_view>& args) {
  const std::size_t newline = input.find('\n');
  if (newline == std::string_view::npos) {
    if (input.size() > inline_size_max) return {Parse::error, 0, "inline command too long"};
    return {};
  }
  if (newline > inline_size_max) return {Parse::error, 0, "inline command too long"};
  std::string_view line = input.substr(0, newline);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
    std::size_t end = at;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
    if (end > at) {
      if (args.size() == args_max) return {Parse::error, 0, "too many arguments"};
      if (end - at > arg_size_max) return {Parse::error, 0, "argument too long"};
      args.push_back(line.substr(at, end - at));
    }
    at = end;
  }
  return {Parse::command, newline + 1, {}};
}

}  // namespace

Parsed parse(std::string_view input, std::vector<std::string_view>& args) {
  args.clear();
  if (input.empty()) return {};
  if (input[0] != '*') return parse_inline(input, args);
  std::size_t end = line_end(input, 1);
  if (end == std::string_view::npos) {
    return input.size() > 32 ? Parsed{Parse::error, 0, "bad array header"} : Parsed{};
  }
  const std::int64_t count = length_at(input, 1, end);
  if (count < 1 || static_cast<std::size_t>(count) > args_max) {
    return {Parse::error, 0, count < 1 ? "bad array length" : "too many arguments"};
  }
  std::size_t at = end + 2;
  for (std::int64_t i = 0; i < count; ++i) {
    if (at >= input.size()) return {};
    if (input[at] != '$') return {Parse::error, 0, "expected '$' (a bulk string)"};
    end = line_end(input, at + 1);
    if (end == std::string_view::npos) {
      return input.size() - at > 32 ? Parsed{Parse::error, 0, "bad bulk length"} : Parsed{};
    }
    const std::int64_t size = length_at(input, at + 1, end);
    if (size < 0 || static_cast<std::size_t>(size) > arg_size_max) {
      return {Parse::error, 0, size < 0 ? "bad bulk length" : "argument too long"};
    }
    const std::size_t data = end + 2;
    const auto bytes = static_cast<std::size_t>(size);
    if (input.size() < data + bytes + 2) return {};
    if (input[data + bytes] != '\r' || input[data + bytes + 1] != '\n') {
      return {Parse::error, 0, "bulk string not followed by CRLF"};
    }
    args.push_back(input.substr(data, bytes));
    at = data + bytes + 2;
  }
  return {Parse::command, at, {}};
}

void simple(std::string& out, std::string_view text) {
  out += '+';
  out += text;
  out += "\r\n";
}

void error(std::string& out, std::string_view text) {
  out += '-';
  for (char c : text) out += (c == '\r' || c == '\n') ? ' ' : c;
  out += "\r\n";
}

void integer(std::string& out, std::int64_t value) {
  // to_chars, not to_string: an ID has 19 digits, past the short-string buffer, and a
  // FLURRY.ID n answer writes n of them.
  std::array<char, 24> text;
  text[0] = ':';
  const auto [end, ec] = std::to_chars(text.data() + 1, text.data() + text.size() - 2, value);
  end[0] = '\r';
  end[1] = '\n';
  out.append(text.data(), end + 2);
}

void bulk(std::string& out, std::string_view bytes) {
  out += '$';
  out += std::to_string(bytes.size());
  out += "\r\n";
  out += bytes;
  out += "\r\n";
}

void null_bulk(std::string& out, bool resp3) { out += resp3 ? "_\r\n" : "$-1\r\n"; }

void array_header(std::string& out, std::size_t elements) {
  out += '*';
  out += std::to_string(elements);
  out += "\r\n";
}

void map_header(std::string& out, std::size_t pairs, bool resp3) {
  out += resp3 ? '%' : '*';
  out += std::to_string(resp3 ? pairs : 2 * pairs);
  out += "\r\n";
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace flurry::dataplane::resp
