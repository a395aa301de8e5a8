// dataplane/memcache.h — the memcached text protocol as the memcached front end speaks it
// (what katsubushi's users send): a parser for one command at a time out of a connection's
// input, and the answer encoders. Pure: no I/O, no allocation beyond the caller's containers.
//
// A command is one line, `verb arg...` ending in LF (CRLF, or a bare LF as netcat sends);
// tokens are split on spaces and tabs, verbs are case-insensitive (katsubushi's README types
// `GET new`; memcached itself knows lower case only), keys are not. The storage commands
// (set, add, replace, append, prepend, cas) are followed by a data block of the length their
// line gives: parse() takes it too, so a refused `set` is one answer, not two. parse() never
// reads past `input` and answers with one of five results:
//   * command: a whole command, `consumed` bytes long (its tokens view `input`);
//   * incomplete: read more and call again with the same bytes plus the new ones;
//   * error: memcached's `ERROR` (an unknown verb, an empty line, the wrong number of tokens),
//     `consumed` bytes are skipped and the connection goes on;
//   * client_error: `CLIENT_ERROR <error>` (a key longer than key_size_max, a delta that is not
//     a number), `consumed` bytes skipped, the connection goes on;
//   * fatal: `CLIENT_ERROR <error>` and the connection is closed, for input that cannot be
//     resynchronised: a line longer than line_size_max (a get or gets line: keys_line_size_max),
//     a storage command whose length is not a number or above data_size_max, a data block not
//     followed by CRLF. (memcached closes a too-long line without a word; flurry says why.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flurry::dataplane::memcache {

inline constexpr std::size_t key_size_max = 250;  // memcached's KEY_MAX_LENGTH
// A line's bytes before its CRLF: memcached's limit (a longer line is closed), and a get or
// gets line's (many keys on one line, as memcached too lets a multi-get past its limit).
inline constexpr std::size_t line_size_max = 2048;
inline constexpr std::size_t keys_line_size_max = 48 * 1024;
inline constexpr std::size_t data_size_max = 8 * 1024;  // a storage command's data (skipped, or a login)

enum class Verb : std::uint8_t {
  get,      // get key... : one fresh ID a key
  gets,     // gets key... : the same with a cas field
  incr,     // incr name n [noreply] : n numbers of the named sequence, the last answered
  decr,     // decr name n [noreply] : refused (a sequence only goes up)
  version,  // version
  stats,    // stats (with an argument: memcached's sub-statistics, answered ERROR)
  quit,     // quit : close, no answer
  store,    // set/add/replace/append/prepend/cas key flags exptime bytes [cas] [noreply] + data
  remove,   // delete key [noreply]
  touch,    // touch key exptime [noreply]
  unknown,
};

enum class Parse : std::uint8_t { command, incomplete, error, client_error, fatal };

struct Parsed {
  Parse result = Parse::incomplete;
  Verb verb = Verb::unknown;
  std::size_t consumed = 0;  // command, error, client_error: bytes of input taken
  bool noreply = false;      // the last token was `noreply` (removed from the tokens)
  std::uint64_t delta = 0;   // incr and decr: the number
  std::string_view error;    // client_error, fatal: the words after CLIENT_ERROR
  std::string_view data;     // store: the data block, without its CRLF (memcached's ASCII login)
  bool set = false;          // store: the verb was `set` (the one memcached's ASCII login uses)
};

// Parses the first command of `input` into `tokens` (cleared first): tokens[0] is the verb as
// sent, then the arguments (for get and gets, the keys; at least one).
Parsed parse(std::string_view input, std::vector<std::string_view>& tokens);

// Answer encoders: append one line (or one VALUE item) to `out`.
void line(std::string& out, std::string_view text);  // text CRLF, CR and LF in text made spaces
// VALUE key 0 bytes [cas] CRLF number CRLF: an ID (or number) as a value; `cas`: with the gets
// form's cas field (the number itself: unique, as memcached's are).
void value(std::string& out, std::string_view key, std::uint64_t number, bool cas);
void number(std::string& out, std::uint64_t value);  // incr's answer: the number CRLF
void stat(std::string& out, std::string_view name, std::uint64_t value);
void stat(std::string& out, std::string_view name, std::string_view value);

}  // namespace flurry::dataplane::memcache
