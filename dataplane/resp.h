// dataplane/resp.h — the Redis protocol (RESP2, and RESP3's HELLO map) as the RESP front end
// speaks it: a parser for one command at a time out of a connection's input, and reply
// encoders. Pure: no I/O, no allocation beyond the caller's containers.
//
// A command is an array of bulk strings (`*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n`, what every
// client library sends) or an inline line (`PING hi\r\n`, what a person types into a telnet).
// parse() never reads past `input` and answers with one of three results: a whole command
// (its arguments view `input`, `consumed` bytes long), `incomplete` (read more, call again
// with the same bytes plus the new ones), or `error` (a protocol error: the connection is
// answered -ERR and closed, as Redis does). Bounds: resp_args_max arguments, resp_arg_size_max
// bytes an argument, resp_inline_size_max bytes an inline line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flurry::dataplane::resp {

inline constexpr std::size_t args_max = 16;
inline constexpr std::size_t arg_size_max = 512;
inline constexpr std::size_t inline_size_max = 4096;

enum class Parse : std::uint8_t { command, incomplete, error };

struct Parsed {
  Parse result = Parse::incomplete;
  std::size_t consumed = 0;  // with `command`: bytes of input the command took
  std::string_view error;    // with `error`: what was wrong, for the -ERR line
};

// Parses the first command of `input` into `args` (cleared first).
Parsed parse(std::string_view input, std::vector<std::string_view>& args);

// Reply encoders: append one reply to `out`.
void simple(std::string& out, std::string_view text);  // +text (no CR or LF in text)
void error(std::string& out, std::string_view text);   // -text, CR and LF replaced by spaces
void integer(std::string& out, std::int64_t value);
void bulk(std::string& out, std::string_view bytes);
void null_bulk(std::string& out, bool resp3);  // nil: RESP2 $-1, RESP3 _
void array_header(std::string& out, std::size_t elements);
// A map of `pairs` key/value pairs: RESP3 `%`, RESP2 a flat array of 2 x pairs.
void map_header(std::string& out, std::size_t pairs, bool resp3);

// ASCII case-insensitive comparison, for command names.
bool equals_ignoring_case(std::string_view a, std::string_view b);

}  // namespace flurry::dataplane::resp
