// tests/integration/sequences_test.cc — named sequences (GET_SEQ) on real flurryd processes,
// through the real client library, the control socket and flurryctl:
//
//   * segment: numbers fetched by 4 client threads under load, kill -9 in the middle, restart
//     on the same state directory, more numbers: every number unique across the restart, and
//     every number after the restart above every number before it (the restart continues at
//     the durable upper bound);
//   * monotonic: strictly increasing for one client, across a kill -9 and restart too;
//   * an unknown name is refused (UNKNOWN_SEQUENCE) and never created; create/show/list/delete
//     through flurryctl, `flurry seq NAME -n N`, with clear errors and non-zero exits for bad
//     input.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <unordered_set>

#include "client/client.h"
#include "control/control_server.h"
#include "serving.h"
#include "tests/support/child_process.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;

struct Server : testing::LocalFlurryd {
  Server() : LocalFlurryd("flurry-seq-", {"--workers", "2", "--lead-ms", "1000"}) {}

  void start() {
    LocalFlurryd::start(starts == 0 ? std::vector<std::string>{"--init"} : std::vector<std::string>{});
  }

  nlohmann::json seq(const nlohmann::json& request) const {
    nlohmann::json full = request;
    full["cmd"] = "seq";
    Result<nlohmann::json> reply = control::control_request_object(control_socket(), full);
    EXPECT_TRUE(reply.ok()) << reply.message();
    return reply.ok() ? *reply : nlohmann::json::object();
  }
};

// Load loops want a short timeout (a killed server is asked again soon); a test whose every
// call must succeed asks for a generous one and more attempts.
std::unique_ptr<client::Client> make_client(const std::string& address,
                                            std::chrono::milliseconds timeout = 100ms,
                                            unsigned attempts = 2) {
  client::Options options;
  options.servers = {address};
  options.timeout = timeout;
  options.attempts = attempts;
  client::Error error;
  auto made = client::Client::create(options, &error);
  EXPECT_TRUE(made) << error.message;
  return made;
}

// Threads fetch numbers of `name` until `target` arrived or `stop` is set; failures (a
// killed server) are retried until the deadline.
std::vector<std::vector<std::uint64_t>> load(const std::string& address, const std::string& name, int threads,
                                             std::size_t target, std::atomic<bool>& stop,
                                             std::atomic<std::size_t>& received) {
  std::vector<std::vector<std::uint64_t>> per_thread(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto client = make_client(address);
      if (!client) return;
      auto& numbers = per_thread[static_cast<std::size_t>(t)];
      client::Error error;
      while (!stop.load() && received.load() < target && std::chrono::steady_clock::now() < deadline) {
        const std::size_t before = numbers.size();
        if (client->get_seq(name, 500, numbers, &error)) {
          received += numbers.size() - before;
        } else {
          std::this_thread::sleep_for(5ms);
        }
      }
    });
  }
  for (auto& worker : workers) worker.join();
  return per_thread;
}

// Starts a load, kills flurryd with SIGKILL once `kill_after` numbers arrived, restarts it and
// fetches `after_target` more. Returns the numbers of both runs.
std::pair<std::vector<std::uint64_t>, std::vector<std::uint64_t>> kill9_across(Server& server,
                                                                               const std::string& name,
                                                                               std::size_t kill_after,
                                                                               std::size_t after_target) {
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> received{0};
  std::thread killer([&] {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (received.load() < kill_after && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    server.daemon.signal(SIGKILL);
    EXPECT_TRUE(server.daemon.wait(testing::exit_timeout_ms));
    std::this_thread::sleep_for(200ms);
    stop = true;
  });
  auto before = load(server.address(), name, 4, 100'000'000, stop, received);
  killer.join();
  EXPECT_GE(received.load(), kill_after) << server.daemon.log();
  server.start();
  std::atomic<bool> never{false};
  std::atomic<std::size_t> received_after{0};
  auto after = load(server.address(), name, 4, after_target, never, received_after);
  EXPECT_GE(received_after.load(), after_target) << server.daemon.log();
  std::vector<std::uint64_t> all_before, all_after;
  for (auto& numbers : before) all_before.insert(all_before.end(), numbers.begin(), numbers.end());
  for (auto& numbers : after) all_after.insert(all_after.end(), numbers.begin(), numbers.end());
  return {all_before, all_after};
}

TEST(Sequences, SegmentKill9RestartEveryNumberUniqueAndAboveEverythingBefore) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  const nlohmann::json created = server.seq({{"op", "create"}, {"name", "orders"}, {"start", 1000}});
  ASSERT_TRUE(created.value("ok", false)) << created.dump();
  auto [before, after] = kill9_across(server, "orders", 200'000, 200'000);
  std::unordered_set<std::uint64_t> seen;
  for (std::uint64_t n : before) ASSERT_TRUE(seen.insert(n).second) << n << " twice before the restart";
  for (std::uint64_t n : after) ASSERT_TRUE(seen.insert(n).second) << n << " issued again after kill -9";
  ASSERT_FALSE(before.empty());
  ASSERT_FALSE(after.empty());
  EXPECT_GE(*std::min_element(before.begin(), before.end()), 1000u) << "below --start";
  EXPECT_GT(*std::min_element(after.begin(), after.end()), *std::max_element(before.begin(), before.end()))
      << "the restart must continue above the durable bound";
  std::printf("segment: %zu numbers before kill -9, %zu after, all unique\n", before.size(), after.size());
  server.stop();
}

TEST(Sequences, MonotonicStrictlyIncreasingAcrossKill9) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  ASSERT_TRUE(server.seq({{"op", "create"}, {"name", "ticks"}, {"mode", "monotonic"}}).value("ok", false));
  auto client = make_client(server.address(), 2000ms, 5);
  ASSERT_TRUE(client);
  client::Error error;
  std::vector<std::uint64_t> numbers;
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(client->get_seq("ticks", 7, numbers, &error)) << error.message;
  server.daemon.signal(SIGKILL);
  ASSERT_TRUE(server.daemon.wait(testing::exit_timeout_ms));
  ASSERT_NO_FATAL_FAILURE(server.start());
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(client->get_seq("ticks", 7, numbers, &error)) << error.message;
  for (std::size_t i = 1; i < numbers.size(); ++i) {
    ASSERT_LT(numbers[i - 1], numbers[i]) << "not strictly increasing at " << i;
  }
  server.stop();
}

// next_seq with prefetch on: a buffer per name, refilled in the background; every number once.
TEST(Sequences, NextSeqWithPrefetchPerNameIsUnique) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  ASSERT_TRUE(server.seq({{"op", "create"}, {"name", "a"}}).value("ok", false));
  ASSERT_TRUE(server.seq({{"op", "create"}, {"name", "b"}, {"mode", "monotonic"}}).value("ok", false));
  client::Options options;
  options.servers = {server.address()};
  options.prefetch = 2000;
  options.ids_per_request = 500;
  client::Error error;
  auto client = client::Client::create(options, &error);
  ASSERT_TRUE(client) << error.message;
  std::unordered_set<std::uint64_t> seen_a, seen_b;
  std::uint64_t last_b = 0;
  for (int i = 0; i < 20'000; ++i) {
    const auto a = client->next_seq("a", &error);
    ASSERT_TRUE(a) << error.message;
    ASSERT_TRUE(seen_a.insert(*a).second) << *a << " twice";
    const auto b = client->next_seq("b", &error);
    ASSERT_TRUE(b) << error.message;
    ASSERT_TRUE(seen_b.insert(*b).second) << *b << " twice";
    ASSERT_TRUE(i == 0 || *b > last_b) << "monotonic through one buffer must increase";
    last_b = *b;
  }
  EXPECT_GT(client->counters().prefetch_refills, 0u);
  EXPECT_FALSE(client->next_seq("nosuch", &error));
  EXPECT_EQ(error.code, client::ErrorCode::unknown_sequence) << error.message;
  server.stop();
}

TEST(Sequences, UnknownNamesAreRefusedNeverCreatedAndFlurryctlExplains) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  auto client = make_client(server.address());
  client::Error error;
  std::vector<std::uint64_t> numbers;
  EXPECT_FALSE(client->get_seq("nosuch", 5, numbers, &error));
  EXPECT_EQ(error.code, client::ErrorCode::unknown_sequence) << error.message;
  EXPECT_NE(error.message.find("flurryctl seq create nosuch"), std::string::npos) << error.message;
  EXPECT_FALSE(client->get_seq("bad/name", 5, numbers, &error));
  EXPECT_EQ(error.code, client::ErrorCode::invalid_argument);

  const std::string flurryctl = testing::env_or_die("FLURRYCTL");
  const std::vector<std::string> base = {"--control-socket", server.control_socket(), "seq"};
  auto run = [&](std::vector<std::string> args, std::string* out) {
    std::vector<std::string> all = base;
    all.insert(all.end(), args.begin(), args.end());
    const testing::RunResult result = testing::run_to_end(flurryctl, all);
    *out = result.output;
    return result.exit_code;
  };
  std::string out;
  EXPECT_EQ(run({"list", "--json"}, &out), 0) << out;
  EXPECT_NE(out.find("\"sequences\":[]"), std::string::npos) << "a request created a sequence: " << out;
  EXPECT_EQ(run({"create", "inv", "--start", "42", "--mode", "monotonic"}, &out), 0) << out;
  EXPECT_EQ(run({"create", "inv"}, &out), 1) << out;
  EXPECT_NE(out.find("exists already"), std::string::npos) << out;
  EXPECT_EQ(run({"create", "a/b"}, &out), 1) << out;
  EXPECT_NE(out.find("bad sequence name"), std::string::npos) << out;
  EXPECT_EQ(run({"create", "x", "--start", "-1"}, &out), 2) << out;
  EXPECT_EQ(run({"create", "x", "--mode", "sideways"}, &out), 2) << out;
  EXPECT_EQ(run({"show"}, &out), 2) << out;
  EXPECT_EQ(run({"show", "inv", "--json"}, &out), 0) << out;
  EXPECT_NE(out.find("\"start\":42"), std::string::npos) << out;
  const testing::RunResult cli = testing::run_to_end(testing::env_or_die("FLURRY_CLI"),
                                                     {"seq", "inv", "-n", "3", "--server", server.address()});
  EXPECT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_EQ(cli.output, "42\n43\n44\n");
  ASSERT_TRUE(client->get_seq("inv", 2, numbers, &error)) << error.message;
  EXPECT_EQ(numbers, (std::vector<std::uint64_t>{45, 46}));
  const testing::RunResult bad = testing::run_to_end(
      testing::env_or_die("FLURRY_CLI"), {"seq", "no/pe", "-n", "3", "--server", server.address()});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_EQ(run({"delete", "inv"}, &out), 0) << out;
  EXPECT_FALSE(client->get_seq("inv", 1, numbers, &error));
  EXPECT_EQ(error.code, client::ErrorCode::unknown_sequence);
  EXPECT_EQ(run({"delete", "inv"}, &out), 1) << out;
  server.stop();
}

}  // namespace
}  // namespace flurry
