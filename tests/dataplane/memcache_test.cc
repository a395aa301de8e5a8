// tests/dataplane/memcache_test.cc — the memcached text-protocol parser and encoders of the
// memcached front end (dataplane/memcache.h): katsubushi's session, every command form, every
// split point of a pipelined stream, every truncation, malformed lines and the bounds
// (CONTRIBUTING.md, untrusted input).
#include "dataplane/memcache.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/seed.h"

namespace flurry::dataplane::memcache {
namespace {

std::vector<std::string> strings(const std::vector<std::string_view>& views) {
  return {views.begin(), views.end()};
}

// What one parse() gave, in a form that compares and prints.
struct Step {
  Parse result;
  Verb verb;
  std::vector<std::string> tokens;
  bool noreply;
  bool operator==(const Step&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Step& step) {
  out << "{result " << static_cast<int>(step.result) << ", verb " << static_cast<int>(step.verb) << ",";
  for (const std::string& token : step.tokens) out << " '" << token << "'";
  return out << (step.noreply ? ", noreply}" : "}");
}

// Parses every command of `stream`, feeding it in pieces of `piece` bytes as a socket would:
// each command (or ERROR / CLIENT_ERROR line) comes once all of it has arrived, and never
// changes with the split.
std::vector<Step> parse_stream(const std::string& stream, std::size_t piece) {
  std::vector<Step> steps;
  std::string buffer;
  std::vector<std::string_view> tokens;
  for (std::size_t at = 0; at < stream.size(); at += piece) {
    buffer += stream.substr(at, piece);
    for (;;) {
      const Parsed parsed = parse(buffer, tokens);
      EXPECT_NE(parsed.result, Parse::fatal) << parsed.error << " at piece size " << piece;
      if (parsed.result == Parse::incomplete || parsed.result == Parse::fatal) break;
      steps.push_back({parsed.result, parsed.verb, strings(tokens), parsed.noreply});
      buffer.erase(0, parsed.consumed);
    }
  }
  EXPECT_TRUE(buffer.empty()) << "left unparsed: " << buffer.size() << " bytes";
  return steps;
}

// Parses `input`, kept until the next call: the tokens point into it (a temporary argument
// would leave them dangling, as ASan found).
Parsed parse_one(std::string input, std::vector<std::string_view>& tokens) {
  static std::string kept;
  kept = std::move(input);
  return parse(kept, tokens);
}

TEST(Memcache, KatsubushiSession) {
  // katsubushi's README: `GET new` in upper case, and `GET id1 id2` answering both keys.
  std::vector<std::string_view> tokens;
  Parsed parsed = parse_one("GET new\r\n", tokens);
  ASSERT_EQ(parsed.result, Parse::command);
  EXPECT_EQ(parsed.verb, Verb::get);
  EXPECT_EQ(parsed.consumed, 9U);
  EXPECT_EQ(strings(tokens), (std::vector<std::string>{"GET", "new"}));
  parsed = parse_one("GET id1 id2\r\n", tokens);
  ASSERT_EQ(parsed.result, Parse::command);
  EXPECT_EQ(strings(tokens), (std::vector<std::string>{"GET", "id1", "id2"}));
  for (const char* line : {"STATS\r\n", "VERSION\r\n", "QUIT\r\n"}) {
    EXPECT_EQ(parse_one(line, tokens).result, Parse::command) << line;
  }
}

TEST(Memcache, EveryCommandForm) {
  std::vector<std::string_view> tokens;
  const struct {
    std::string line;
    Verb verb;
    std::vector<std::string> tokens;
    bool noreply;
  } cases[] = {
      {"get id\r\n", Verb::get, {"get", "id"}, false},
      {"get id id id\n", Verb::get, {"get", "id", "id", "id"}, false},  // a bare LF, as netcat sends
      {"gets a\tb \r\n", Verb::gets, {"gets", "a", "b"}, false},
      {"  incr tickets 10\r\n", Verb::incr, {"incr", "tickets", "10"}, false},
      {"incr tickets 1 noreply\r\n", Verb::incr, {"incr", "tickets", "1"}, true},
      {"decr tickets 1\r\n", Verb::decr, {"decr", "tickets", "1"}, false},
      {"version\r\n", Verb::version, {"version"}, false},
      {"stats\r\n", Verb::stats, {"stats"}, false},
      {"stats items\r\n", Verb::stats, {"stats", "items"}, false},
      {"quit\r\n", Verb::quit, {"quit"}, false},
      {"delete k noreply\r\n", Verb::remove, {"delete", "k"}, true},
      {"touch k 10\r\n", Verb::touch, {"touch", "k", "10"}, false},
  };
  for (const auto& c : cases) {
    const Parsed parsed = parse_one(c.line, tokens);
    ASSERT_EQ(parsed.result, Parse::command) << c.line;
    EXPECT_EQ(parsed.verb, c.verb) << c.line;
    EXPECT_EQ(parsed.consumed, c.line.size()) << c.line;
    EXPECT_EQ(strings(tokens), c.tokens) << c.line;
    EXPECT_EQ(parsed.noreply, c.noreply) << c.line;
  }
  Parsed parsed = parse_one("incr tickets 18446744073709551615\r\n", tokens);
  ASSERT_EQ(parsed.result, Parse::command);
  EXPECT_EQ(parsed.delta, 18446744073709551615ULL);  // in range for the parser; the door bounds it
}

TEST(Memcache, StorageCommandsTakeTheirDataBlock) {
  std::vector<std::string_view> tokens;
  const std::string set = "set k 0 0 5\r\nhello\r\nget id\r\n";
  Parsed parsed = parse_one(set, tokens);
  ASSERT_EQ(parsed.result, Parse::command);
  EXPECT_EQ(parsed.verb, Verb::store);
  EXPECT_EQ(parsed.consumed, set.size() - 8);  // the line and its data, not the get after it
  EXPECT_EQ(parsed.data, "hello") << "the data, without its CRLF (a login's name and password)";
  EXPECT_TRUE(parsed.set);
  parsed = parse_one("set auth 0 0 0\r\n\r\n", tokens);
  ASSERT_EQ(parsed.result, Parse::command);
  EXPECT_EQ(parsed.data, "");
  parsed = parse_one("cas k 0 0 2 77 noreply\r\nab\r\n", tokens);
  ASSERT_EQ(parsed.result, Parse::command);
  EXPECT_TRUE(parsed.noreply);
  EXPECT_FALSE(parsed.set) << "cas is not the login's verb";
  // The data is not all there yet: incomplete, at every length.
  const std::string whole = "append k 0 0 3\r\nxyz\r\n";
  for (std::size_t size = 0; size < whole.size(); ++size) {
    EXPECT_EQ(parse_one(whole.substr(0, size), tokens).result, Parse::incomplete) << size;
  }
  // A length that is not a number, too much data, data without its CRLF: the connection cannot
  // stay in step, and is closed.
  for (const std::string bad :
       {"set k 0 0 x\r\n", "set k 0 0 -1\r\n", "set k 0 0 9000\r\n", "set k 0 0 2\r\nabc\r\n"}) {
    parsed = parse_one(bad, tokens);
    EXPECT_EQ(parsed.result, Parse::fatal) << bad;
    EXPECT_FALSE(parsed.error.empty()) << bad;
  }
}

TEST(Memcache, WhatMemcachedAnswersErrorOrClientError) {
  std::vector<std::string_view> tokens;
  // ERROR, as memcached 1.6 answers them: nothing, an unknown verb, the wrong count of tokens.
  for (const std::string line : {"\r\n", "   \r\n", "bogus\r\n", "get\r\n", "gets\r\n", "incr x\r\n",
                                 "incr x 1 2 3\r\n", "version 2\r\n", "set k 0 0\r\n", "flush_all\r\n"}) {
    const Parsed parsed = parse_one(line, tokens);
    EXPECT_EQ(parsed.result, Parse::error) << line;
    EXPECT_EQ(parsed.consumed, line.size()) << line;
  }
  // CLIENT_ERROR, the connection going on: a key over 250 bytes, a delta that is not a number.
  const std::string long_key(key_size_max + 1, 'k');
  const std::vector<std::string> client_errors = {"get " + long_key + "\r\n",
                                                  "get a " + long_key + "\r\n",
                                                  "incr " + long_key + " 1\r\n",
                                                  "incr x -1\r\n",
                                                  "incr x 1x\r\n",
                                                  "incr x 18446744073709551616\r\n",
                                                  "set " + long_key + " 0 0 1\r\nz\r\n"};
  for (const std::string& line : client_errors) {
    const Parsed parsed = parse_one(line, tokens);
    EXPECT_EQ(parsed.result, Parse::client_error) << line;
    EXPECT_EQ(parsed.consumed, line.size()) << line;
    EXPECT_FALSE(parsed.error.empty()) << line;
  }
  EXPECT_EQ(parse_one("get " + std::string(key_size_max, 'k') + "\r\n", tokens).result, Parse::command);
}

TEST(Memcache, LinesPastTheLimitsAreFatal) {
  std::vector<std::string_view> tokens;
  // Any line: line_size_max bytes before its LF, with or without the LF yet.
  const std::string long_line(line_size_max + 1, 'x');
  EXPECT_EQ(parse_one(long_line, tokens).result, Parse::fatal);
  EXPECT_EQ(parse_one(long_line + "\r\n", tokens).result, Parse::fatal);
  EXPECT_EQ(parse_one(std::string(line_size_max, 'x') + "\r", tokens).result, Parse::incomplete);
  EXPECT_EQ(parse_one(std::string(line_size_max, 'x') + "\r\n", tokens).result, Parse::error);
  EXPECT_EQ(parse_one(std::string(line_size_max + 1, 'x') + "\n", tokens).result, Parse::fatal);
  // A get line may hold many keys, up to keys_line_size_max.
  std::string keys = "get";
  while (keys.size() + 3 <= keys_line_size_max) keys += " id";
  EXPECT_EQ(parse_one(keys, tokens).result, Parse::incomplete);
  const Parsed parsed = parse_one(keys + "\r\n", tokens);
  ASSERT_EQ(parsed.result, Parse::command);
  EXPECT_EQ(tokens.size(), (keys.size() - 3) / 3 + 1);
  keys += std::string(keys_line_size_max, 'x');
  EXPECT_EQ(parse_one(keys, tokens).result, Parse::fatal);
  // ... but not a line that only starts like one.
  EXPECT_EQ(parse_one("getx " + std::string(line_size_max, 'a'), tokens).result, Parse::fatal);
  EXPECT_EQ(parse_one("incr " + std::string(line_size_max, 'a'), tokens).result, Parse::fatal);
}

TEST(Memcache, EverySplitOfAPipelineGivesTheSameCommands) {
  const std::string stream =
      "get id\r\nGETS a b c\r\nincr tickets 5\r\nbogus\r\nset k 0 0 4\r\n\r\nab\r\nincr t x\r\n"
      "version\nstats\r\nincr tickets 1 noreply\r\nquit\r\n";
  const std::vector<Step> expected = {
      {Parse::command, Verb::get, {"get", "id"}, false},
      {Parse::command, Verb::gets, {"GETS", "a", "b", "c"}, false},
      {Parse::command, Verb::incr, {"incr", "tickets", "5"}, false},
      {Parse::error, Verb::unknown, {"bogus"}, false},
      {Parse::command, Verb::store, {"set", "k", "0", "0", "4"}, false},  // its data holds a CRLF
      {Parse::client_error, Verb::incr, {"incr", "t", "x"}, false},
      {Parse::command, Verb::version, {"version"}, false},
      {Parse::command, Verb::stats, {"stats"}, false},
      {Parse::command, Verb::incr, {"incr", "tickets", "1"}, true},
      {Parse::command, Verb::quit, {"quit"}, false},
  };
  for (std::size_t piece = 1; piece <= stream.size(); ++piece) {
    ASSERT_EQ(parse_stream(stream, piece), expected) << "piece size " << piece;
  }
}

TEST(Memcache, EveryTruncationIsIncomplete) {
  std::vector<std::string_view> tokens;
  for (const std::string command : {"get id id id\r\n", "incr tickets 100 noreply\r\n", "stats\r\n"}) {
    for (std::size_t size = 0; size < command.size(); ++size) {
      const Parsed parsed = parse(std::string_view(command).substr(0, size), tokens);
      EXPECT_EQ(parsed.result, Parse::incomplete) << "'" << command.substr(0, size) << "': " << parsed.error;
    }
    EXPECT_EQ(parse(command, tokens).result, Parse::command) << command;
  }
}

TEST(Memcache, RandomBytesNeverCrashOrOverrun) {
  std::mt19937_64 rng(testing::test_seed());
  std::vector<std::string_view> tokens;
  static constexpr std::string_view alphabet = "getsincrvaluestqoy 0123456789\r\n\t-";
  for (int round = 0; round < 20'000; ++round) {
    std::string input(rng() % 80, '\0');
    for (auto& c : input) c = alphabet[rng() % alphabet.size()];
    const Parsed parsed = parse(input, tokens);
    if (parsed.result == Parse::incomplete || parsed.result == Parse::fatal) continue;
    ASSERT_GT(parsed.consumed, 0U);
    ASSERT_LE(parsed.consumed, input.size());
    for (std::string_view token : tokens) {
      ASSERT_GE(token.data(), input.data());
      ASSERT_LE(token.data() + token.size(), input.data() + parsed.consumed);
    }
  }
}

TEST(Memcache, Encoders) {
  std::string out;
  value(out, "id", 383966956933349376ULL, false);
  value(out, "id", 7, true);
  number(out, 42);
  stat(out, "pid", 12);
  stat(out, "version", std::string_view("1.2.3"));
  line(out, "CLIENT_ERROR bad\r\nthing");
  EXPECT_EQ(out,
            "VALUE id 0 18\r\n383966956933349376\r\nVALUE id 0 1 7\r\n7\r\n42\r\nSTAT pid 12\r\n"
            "STAT version 1.2.3\r\nCLIENT_ERROR bad  thing\r\n");
}

}  // namespace
}  // namespace flurry::dataplane::memcache
