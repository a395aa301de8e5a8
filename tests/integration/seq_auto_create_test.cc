// tests/integration/seq_auto_create_test.cc — `--seq-auto-create MODE` (issue 27) against a real
// flurryd, with the clients Redis users have (redis-cli, Python's redis package):
//
//   * without the flag, INCR of an unknown name is an error that says how to create it (and
//     names the flag), and nothing is created;
//   * with --seq-auto-create monotonic, INCR of a new name answers 1, 2, 3 as Redis does; the
//     sequence is durable like `flurryctl seq create` (flurryctl seq show sees it, and after a
//     restart INCR keeps going up: no number twice, every one above those before); the
//     creation is logged and counted (flurryctl stats, /metrics);
//   * --seq-auto-create-max bounds it: once the node holds that many sequences, a new name is
//     refused with a sentence that names the cap and how to create it, and counted;
//   * with --seq-auto-create segment over HTTP, /v1/seq/NAME creates the name too.
// Waits are bounded polls; every number is checked for duplicates.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "serving.h"
#include "tests/support/child_process.h"
#include "tests/support/http_get.h"
#include "tests/support/ports.h"
#include "tests/support/wait.h"

namespace flurry {
namespace {

const std::string cli = "/usr/bin/redis-cli";

struct Node : testing::LocalFlurryd {
  explicit Node(std::vector<std::string> more) : LocalFlurryd("flurry-autoseq-", std::move(more)) {
    flags.insert(flags.end(), {"--resp-listen", "127.0.0.1:" + std::to_string(resp_port), "--http-listen",
                               "127.0.0.1:" + std::to_string(http_port)});
  }
  std::uint16_t resp_port = testing::free_tcp_port();
  std::uint16_t http_port = testing::free_tcp_port();

  std::string redis(std::vector<std::string> args) {
    args.insert(args.begin(), {"-p", std::to_string(resp_port)});
    return testing::run_to_end(cli, args, 10'000).output;
  }
  // A command asked again while the answer is TRYAGAIN (a block on its way), bounded.
  std::string redis_retrying(const std::vector<std::string>& args) {
    std::string out;
    for (int attempt = 0; attempt < 200; ++attempt) {
      out = redis(args);
      if (out.find("TRYAGAIN") == std::string::npos) break;
      testing::sleep_ms(10);
    }
    return out;
  }
  nlohmann::json ask(const std::vector<std::string>& command) {
    std::vector<std::string> args = {"--control-socket", control_socket(), "--json"};
    args.insert(args.end(), command.begin(), command.end());
    const auto reply = testing::run_to_end(testing::env_or_die("FLURRYCTL"), args);
    return nlohmann::json::parse(reply.output, nullptr, false);
  }
  std::string log_text() { return daemon.log(); }
};

std::vector<std::uint64_t> numbers(const std::string& text) {
  std::vector<std::uint64_t> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) {
    if (!word.empty() && std::all_of(word.begin(), word.end(), ::isdigit)) out.push_back(std::stoull(word));
  }
  return out;
}

TEST(SeqAutoCreate, WithoutTheFlagAnUnknownNameSaysHowToCreateIt) {
  ASSERT_EQ(access(cli.c_str(), X_OK), 0)
      << "redis-cli missing: apt-get install -y redis-tools (scripts/setup)";
  Node node({"--init"});
  ASSERT_NO_FATAL_FAILURE(node.start());
  const std::string answer = node.redis({"INCR", "visits"});
  EXPECT_NE(answer.find("ERR no sequence 'visits': create it with `flurryctl seq create visits`"),
            std::string::npos)
      << answer;
  EXPECT_NE(answer.find("--seq-auto-create"), std::string::npos) << answer;
  EXPECT_TRUE(node.ask({"seq", "list"})["sequences"].empty());
  node.stop();
}

TEST(SeqAutoCreate, IncrCreatesAMonotonicSequenceThatKeepsGoingUpAcrossARestart) {
  ASSERT_EQ(access(cli.c_str(), X_OK), 0)
      << "redis-cli missing: apt-get install -y redis-tools (scripts/setup)";
  Node node({"--seq-auto-create", "monotonic", "--seq-auto-create-max", "2"});
  ASSERT_NO_FATAL_FAILURE(node.start({"--init"}));
  std::vector<std::uint64_t> all;
  // As Redis: a new key's INCR answers 1, then 2, 3.
  for (const std::uint64_t expected : {1, 2, 3}) {
    const std::vector<std::uint64_t> got = numbers(node.redis_retrying({"INCR", "visits"}));
    ASSERT_EQ(got.size(), 1U);
    EXPECT_EQ(got[0], expected);
    all.push_back(got[0]);
  }
  // Python's redis package, on one connection: incr and incrby.
  const std::string script =
      "import redis, sys\n"
      "r = redis.Redis(host='127.0.0.1', port=int(sys.argv[1]))\n"
      "out = []\n"
      "for _ in range(20):\n"
      "    for attempt in range(200):\n"
      "        try:\n"
      "            out.append(r.incr('visits')); break\n"
      "        except redis.ResponseError as e:\n"
      "            assert str(e).startswith('TRYAGAIN'), e\n"
      "print(' '.join(str(v) for v in out))\n";
  const testing::RunResult python =
      testing::run_to_end("/usr/bin/python3", {"-c", script, std::to_string(node.resp_port)}, 30'000);
  ASSERT_EQ(python.exit_code, 0) << "python3-redis (apt-get install -y python3-redis):\n" << python.output;
  const std::vector<std::uint64_t> twenty = numbers(python.output);
  ASSERT_EQ(twenty.size(), 20U);
  EXPECT_TRUE(std::is_sorted(twenty.begin(), twenty.end()));
  EXPECT_GT(twenty.front(), all.back());
  all.insert(all.end(), twenty.begin(), twenty.end());
  // Durable as flurryctl seq create made it, and said so in the log and the counters.
  const nlohmann::json shown = node.ask({"seq", "show", "visits"});
  EXPECT_EQ(shown["sequence"].value("mode", std::string()), "monotonic") << shown.dump();
  EXPECT_NE(node.log_text().find("sequence 'visits' created on first use"), std::string::npos);
  EXPECT_EQ(node.ask({"stats"})["sequences"].value("auto_created", 0ULL), 1U);

  // The cap: a second name is created (2 sequences now), a third refused with the reason.
  ASSERT_EQ(numbers(node.redis_retrying({"INCR", "carts"})).size(), 1U);
  const std::string refused = node.redis({"INCR", "random-key-3"});
  EXPECT_NE(refused.find("ERR no sequence 'random-key-3', and it was not created"), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("--seq-auto-create-max 2"), std::string::npos) << refused;
  EXPECT_NE(refused.find("flurryctl seq create random-key-3"), std::string::npos) << refused;
  EXPECT_EQ(node.ask({"seq", "list"})["sequences"].size(), 2U);
  EXPECT_GE(node.ask({"stats"})["sequences"].value("auto_create_refused", 0ULL), 1U);

  // A restart: the numbers keep going up, none twice.
  node.stop();
  ASSERT_NO_FATAL_FAILURE(node.start());
  for (int i = 0; i < 5; ++i) {
    const std::vector<std::uint64_t> got = numbers(node.redis_retrying({"INCR", "visits"}));
    ASSERT_EQ(got.size(), 1U);
    EXPECT_GT(got[0], all.back());
    all.push_back(got[0]);
  }
  std::vector<std::uint64_t> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a number twice";
  node.stop();
}

TEST(SeqAutoCreate, HttpCreatesASegmentSequence) {
  Node node({"--init", "--seq-auto-create", "segment"});
  ASSERT_NO_FATAL_FAILURE(node.start());
  // The door creates the name on the first GET.
  std::vector<std::uint64_t> all;
  for (int request = 0; request < 3; ++request) {
    std::string body;
    for (int attempt = 0; attempt < 200; ++attempt) {
      body = testing::http_get_body(node.http_port, "/v1/seq/orders?n=3&format=text");
      if (body.find("retry") == std::string::npos && body.find("Retry") == std::string::npos) break;
      testing::sleep_ms(10);
    }
    const std::vector<std::uint64_t> got = numbers(body);
    ASSERT_EQ(got.size(), 3U) << body;
    all.insert(all.end(), got.begin(), got.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  EXPECT_EQ(node.ask({"seq", "show", "orders"})["sequence"].value("mode", std::string()), "segment");
  node.stop();
}

}  // namespace
}  // namespace flurry
