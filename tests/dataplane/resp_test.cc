// tests/dataplane/resp_test.cc — the RESP parser and encoders of the Redis-protocol front end
// (dataplane/resp.h): whole commands, every split point of a pipelined stream, every
// truncation, malformed headers and the bounds (CONTRIBUTING.md, untrusted input).
#include "dataplane/resp.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/seed.h"

namespace flurry::dataplane::resp {
namespace {

std::vector<std::string> strings(const std::vector<std::string_view>& views) {
  return {views.begin(), views.end()};
}

// Parses every command of `stream`, feeding it in pieces of `piece` bytes as a socket would:
// a command is parsed only once all of it has arrived, and never changes with the split.
std::vector<std::vector<std::string>> parse_stream(const std::string& stream, std::size_t piece) {
  std::vector<std::vector<std::string>> commands;
  std::string buffer;
  std::vector<std::string_view> args;
  for (std::size_t at = 0; at < stream.size(); at += piece) {
    buffer += stream.substr(at, piece);
    for (;;) {
      const Parsed parsed = parse(buffer, args);
      EXPECT_NE(parsed.result, Parse::error) << parsed.error << " at piece size " << piece;
      if (parsed.result != Parse::command) break;
      commands.push_back(strings(args));
      buffer.erase(0, parsed.consumed);
    }
  }
  EXPECT_TRUE(buffer.empty()) << "left unparsed: " << buffer.size() << " bytes";
  return commands;
}

TEST(Resp, ArrayOfBulkStrings) {
  std::vector<std::string_view> args;
  const std::string input = "*3\r\n$6\r\nINCRBY\r\n$1\r\nx\r\n$3\r\n100\r\nPING\r\n";
  const Parsed parsed = parse(input, args);
  ASSERT_EQ(parsed.result, Parse::command);
  EXPECT_EQ(parsed.consumed, input.size() - 6);
  EXPECT_EQ(strings(args), (std::vector<std::string>{"INCRBY", "x", "100"}));
}

TEST(Resp, InlineCommands) {
  std::vector<std::string_view> args;
  Parsed parsed = parse("FLURRY.ID   5\r\n", args);
  ASSERT_EQ(parsed.result, Parse::command);
  EXPECT_EQ(strings(args), (std::vector<std::string>{"FLURRY.ID", "5"}));
  parsed = parse("ping\n", args);  // a bare LF, as netcat sends
  ASSERT_EQ(parsed.result, Parse::command);
  EXPECT_EQ(parsed.consumed, 5U);
  EXPECT_EQ(strings(args), (std::vector<std::string>{"ping"}));
  parsed = parse("\r\n", args);  // an empty line: a command with no arguments, skipped by the caller
  ASSERT_EQ(parsed.result, Parse::command);
  EXPECT_TRUE(args.empty());
}

TEST(Resp, BinarySafeBulkStrings) {
  std::vector<std::string_view> args;
  static constexpr char bytes[] = "*2\r\n$4\r\nECHO\r\n$4\r\na\r\n\0\r\n";
  const std::string input(bytes, sizeof bytes - 1);  // the NUL inside is part of the command
  const Parsed parsed = parse(input, args);
  ASSERT_EQ(parsed.result, Parse::command);
  ASSERT_EQ(args.size(), 2U);
  EXPECT_EQ(args[1], std::string_view("a\r\n\0", 4));
}

TEST(Resp, EverySplitOfAPipelineGivesTheSameCommands) {
  const std::string stream =
      "*1\r\n$4\r\nPING\r\n*2\r\n$9\r\nFLURRY.ID\r\n$3\r\n100\r\nINFO server\r\n"
      "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*1\r\n$0\r\n\r\nQUIT\r\n";
  const std::vector<std::vector<std::string>> expected = {
      {"PING"}, {"FLURRY.ID", "100"}, {"INFO", "server"}, {"HELLO", "3"}, {""}, {"QUIT"}};
  for (std::size_t piece = 1; piece <= stream.size(); ++piece) {
    ASSERT_EQ(parse_stream(stream, piece), expected) << "piece size " << piece;
  }
}

TEST(Resp, EveryTruncationIsIncompleteNeverAnError) {
  const std::string command = "*3\r\n$3\r\nSET\r\n$10\r\nabcdefghij\r\n$2\r\nxy\r\n";
  std::vector<std::string_view> args;
  for (std::size_t size = 0; size < command.size(); ++size) {
    const Parsed parsed = parse(std::string_view(command).substr(0, size), args);
    EXPECT_EQ(parsed.result, Parse::incomplete) << "size " << size << ": " << parsed.error;
  }
  EXPECT_EQ(parse(command, args).result, Parse::command);
}

TEST(Resp, MalformedInputIsAnErrorWithAReason) {
  const std::vector<std::string> bad = {
      "*0\r\n",                    // an empty array
      "*-1\r\n",                   // a null array is not a command
      "*x\r\n",                    // not a number
      "*2\r\n+PING\r\n",           // a simple string where a bulk string belongs
      "*1\r\n$-1\r\n",             // a null bulk string
      "*1\r\n$4\r\nPINGxx",        // no CRLF after the bulk string
      "*17\r\n",                   // more arguments than args_max
      "*1\r\n$513\r\n",            // an argument over arg_size_max
      "*" + std::string(40, '1'),  // a header that never ends
  };
  std::vector<std::string_view> args;
  for (const std::string& input : bad) {
    const Parsed parsed = parse(input, args);
    EXPECT_EQ(parsed.result, Parse::error) << "input: " << input;
    EXPECT_FALSE(parsed.error.empty()) << "input: " << input;
  }
  std::string inline_too_long(inline_size_max + 1, 'a');
  EXPECT_EQ(parse(inline_too_long, args).result, Parse::error);
  std::string many = "x";
  for (std::size_t i = 0; i < args_max; ++i) many += " x";
  EXPECT_EQ(parse(many + "\r\n", args).result, Parse::error);
}

TEST(Resp, RandomBytesNeverCrashOrOverrun) {
  std::mt19937_64 rng(testing::test_seed());
  std::vector<std::string_view> args;
  for (int round = 0; round < 20'000; ++round) {
    std::string input(rng() % 64, '\0');
    for (auto& c : input) c = "*$\r\n0123456789abc -"[rng() % 19];
    const Parsed parsed = parse(input, args);
    if (parsed.result == Parse::command) {
      ASSERT_LE(parsed.consumed, input.size());
      for (std::string_view arg : args) {
        ASSERT_GE(arg.data(), input.data());
        ASSERT_LE(arg.data() + arg.size(), input.data() + input.size());
      }
    }
  }
}

TEST(Resp, Encoders) {
  std::string out;
  simple(out, "OK");
  error(out, "ERR bad\r\nthing");
  integer(out, -42);
  bulk(out, "hi");
  array_header(out, 2);
  map_header(out, 3, true);
  map_header(out, 3, false);
  EXPECT_EQ(out, "+OK\r\n-ERR bad  thing\r\n:-42\r\n$2\r\nhi\r\n*2\r\n%3\r\n*6\r\n");
  EXPECT_TRUE(equals_ignoring_case("flurry.ID", "FLURRY.id"));
  EXPECT_FALSE(equals_ignoring_case("PING", "PINGS"));
}

}  // namespace
}  // namespace flurry::dataplane::resp
