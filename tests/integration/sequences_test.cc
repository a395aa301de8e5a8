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
//     input;
//   * never twice across a delete: `seq delete`, a flurryd restart, then `seq create` below the
//     floor is refused naming it; at the floor it is accepted and every number is new;
//   * a sequence created just below 2^63 is drawn to its end: the client gets
//     ErrorCode::exhausted (not RETRY for ever), and show, health and the metrics say so.
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
#include "tests/support/wait.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;

// The sequence manager's "try again": it waited command_wait for a block reservation in progress.
bool store_busy(const std::string& text) {
  return text.find("the sequence store is busy") != std::string::npos;
}

struct Server : testing::LocalFlurryd {
  Server() : LocalFlurryd("flurry-seq-", {"--workers", "2", "--lead-ms", "1000"}) {}

  void start() {
    LocalFlurryd::start(starts == 0 ? std::vector<std::string>{"--init"} : std::vector<std::string>{});
  }

  // Asked again while the answer is "the sequence store is busy" (a block reservation's disk
  // write held it past command_wait, which a busy disk on a loaded machine does with nothing
  // wrong; the command was not carried out); bounded.
  nlohmann::json seq(const nlohmann::json& request) const {
    nlohmann::json full = request;
    full["cmd"] = "seq";
    for (const std::uint64_t until = testing::now_ms() + 60'000;; testing::sleep_ms(100)) {
      Result<nlohmann::json> reply = control::control_request_object(control_socket(), full);
      EXPECT_TRUE(reply.ok()) << reply.message();
      if (!reply.ok()) return nlohmann::json::object();
      if (!store_busy(reply->value("error", std::string())) || testing::now_ms() >= until) return *reply;
    }
  }
};

// Runs flurryctl ARGS to its end, again while it says the sequence store is busy (see seq()):
// its exit code, its output in *out.
int flurryctl_patient(const std::vector<std::string>& args, std::string* out) {
  for (const std::uint64_t until = testing::now_ms() + 60'000;; testing::sleep_ms(100)) {
    const testing::RunResult result = testing::run_to_end(testing::env_or_die("FLURRYCTL"), args);
    *out = result.output;
    if (!store_busy(result.output) || testing::now_ms() >= until) return result.exit_code;
  }
}

// Load loops want a short timeout (a killed server is asked again soon); a test whose every
// call must succeed asks for a generous one and more attempts, and gets a minute of RETRY
// answers (a block reservation held up by a stalled disk or a starved thread answers RETRY
// meanwhile) before a call gives up.
std::unique_ptr<client::Client> make_client(const std::string& address,
                                            std::chrono::milliseconds timeout = 100ms,
                                            unsigned attempts = 2) {
  client::Options options;
  options.servers = {address};
  options.timeout = timeout;
  options.attempts = attempts;
  if (timeout >= 1000ms) options.retry_budget = 60'000ms;
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
  options.timeout = 2000ms;  // every call must succeed: a slow server is waited for
  options.retry_budget = 60'000ms;
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
  // The background refill is counted once it has added numbers, which it does whenever it is
  // scheduled after a call left a buffer below half (the last synchronous fetch does): asked
  // until it shows (bounded), not expected to have run by the time the loop ends.
  for (const std::uint64_t until = testing::now_ms() + 30'000;
       client->counters().prefetch_refills == 0 && testing::now_ms() < until;) {
    testing::sleep_ms(10);
  }
  EXPECT_GT(client->counters().prefetch_refills, 0u);
  EXPECT_FALSE(client->next_seq("nosuch", &error));
  EXPECT_EQ(error.code, client::ErrorCode::unknown_sequence) << error.message;
  server.stop();
}

TEST(Sequences, UnknownNamesAreRefusedNeverCreatedAndFlurryctlExplains) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  auto client = make_client(server.address(), 2000ms, 5);  // every answer here must come
  client::Error error;
  std::vector<std::uint64_t> numbers;
  EXPECT_FALSE(client->get_seq("nosuch", 5, numbers, &error));
  EXPECT_EQ(error.code, client::ErrorCode::unknown_sequence) << error.message;
  EXPECT_NE(error.message.find("flurryctl seq create nosuch"), std::string::npos) << error.message;
  EXPECT_FALSE(client->get_seq("bad/name", 5, numbers, &error));
  EXPECT_EQ(error.code, client::ErrorCode::invalid_argument);

  const std::vector<std::string> base = {"--control-socket", server.control_socket(), "seq"};
  auto run = [&](std::vector<std::string> args, std::string* out) {
    std::vector<std::string> all = base;
    all.insert(all.end(), args.begin(), args.end());
    return flurryctl_patient(all, out);
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
  // From --start 42 up, strictly increasing. Not exactly 42, 43, 44: a request whose answer came
  // after the client's timeout (a loaded machine, a sanitizer build) was asked again, and the
  // numbers of the first were skipped, as a monotonic sequence may (never given twice).
  const testing::RunResult cli =
      testing::run_to_end(testing::env_or_die("FLURRY_CLI"),
                          {"seq", "inv", "-n", "3", "--timeout-ms", "2000", "--server", server.address()});
  EXPECT_EQ(cli.exit_code, 0) << cli.output;
  std::vector<std::uint64_t> from_cli;
  for (std::size_t at = 0, end; (end = cli.output.find('\n', at)) != std::string::npos; at = end + 1) {
    from_cli.push_back(std::stoull(cli.output.substr(at, end - at)));
  }
  ASSERT_EQ(from_cli.size(), 3U) << cli.output;
  EXPECT_GE(from_cli[0], 42U) << cli.output;
  EXPECT_TRUE(from_cli[0] < from_cli[1] && from_cli[1] < from_cli[2]) << cli.output;
  ASSERT_TRUE(client->get_seq("inv", 2, numbers, &error)) << error.message;
  ASSERT_EQ(numbers.size(), 2U);
  EXPECT_GT(numbers[0], from_cli[2]);
  EXPECT_GT(numbers[1], numbers[0]);
  const testing::RunResult bad = testing::run_to_end(
      testing::env_or_die("FLURRY_CLI"), {"seq", "no/pe", "-n", "3", "--server", server.address()});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_EQ(run({"delete", "inv"}, &out), 0) << out;
  EXPECT_FALSE(client->get_seq("inv", 1, numbers, &error));
  EXPECT_EQ(error.code, client::ErrorCode::unknown_sequence);
  EXPECT_EQ(run({"delete", "inv"}, &out), 1) << out;
  server.stop();
}

// Runs flurryctl against the server (again while the store is busy); its exit code, its output
// in *out.
int flurryctl(const Server& server, std::vector<std::string> args, std::string* out) {
  std::vector<std::string> all = {"--control-socket", server.control_socket()};
  all.insert(all.end(), args.begin(), args.end());
  return flurryctl_patient(all, out);
}

// Issue 24, item 6: in local mode `seq delete X` then `seq create X` handed out 0.. again.
TEST(Sequences, DeletedNameKeepsItsFloorAcrossARestart) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  std::string out;
  ASSERT_EQ(flurryctl(server, {"seq", "create", "orders"}, &out), 0) << out;
  auto client = make_client(server.address(), 2000ms, 5);
  ASSERT_TRUE(client);
  client::Error error;
  std::vector<std::uint64_t> before;
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(client->get_seq("orders", 50, before, &error)) << error.message;
  ASSERT_EQ(flurryctl(server, {"seq", "delete", "orders"}, &out), 0) << out;
  server.stop();
  ASSERT_NO_FATAL_FAILURE(server.start());
  EXPECT_EQ(flurryctl(server, {"seq", "create", "orders"}, &out), 1) << "created again from 0: " << out;
  const std::size_t at = out.find("--start ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::uint64_t floor = std::stoull(out.substr(at + 8));
  EXPECT_GT(floor, *std::max_element(before.begin(), before.end())) << out;
  EXPECT_EQ(flurryctl(server, {"seq", "create", "orders", "--start", std::to_string(floor - 1)}, &out), 1)
      << out;
  EXPECT_EQ(flurryctl(server, {"seq", "show", "orders"}, &out), 1) << out;
  EXPECT_NE(out.find("floor is " + std::to_string(floor)), std::string::npos) << out;
  EXPECT_EQ(flurryctl(server, {"seq", "list", "--json"}, &out), 0) << out;
  EXPECT_NE(out.find(R"("deleted":[{"floor":)" + std::to_string(floor) + R"(,"name":"orders"}])"),
            std::string::npos)
      << out;
  ASSERT_EQ(flurryctl(server, {"seq", "create", "orders", "--start", std::to_string(floor)}, &out), 0) << out;
  std::vector<std::uint64_t> after;
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(client->get_seq("orders", 50, after, &error)) << error.message;
  std::unordered_set<std::uint64_t> seen(before.begin(), before.end());
  ASSERT_EQ(seen.size(), before.size()) << "a number twice before the delete";
  for (std::uint64_t n : after) {
    ASSERT_TRUE(seen.insert(n).second) << n << " issued again after delete, restart and create";
    ASSERT_GE(n, floor);
  }
  server.stop();
}

// Issue 24, item 7: a sequence at 2^63 answered RETRY for ever. The client draws it to its end
// (a bounded loop) and gets ErrorCode::exhausted; asking again fails the same way at once.
TEST(Sequences, ASequenceAtItsEndAnswersExhaustedAndTheClientStops) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  const std::uint64_t limit = std::uint64_t{1} << 63;
  const std::uint64_t start = limit - 3000;
  std::string out;
  ASSERT_EQ(flurryctl(server, {"seq", "create", "last", "--start", std::to_string(start)}, &out), 0) << out;
  auto client = make_client(server.address(), 2000ms, 3);
  ASSERT_TRUE(client);
  client::Error error;
  std::vector<std::uint64_t> numbers;
  bool failed = false;
  for (int i = 0; i < 1000 && !failed; ++i) failed = !client->get_seq("last", 100, numbers, &error);
  ASSERT_TRUE(failed) << "3000 numbers, 1000 calls of 100: the end was never reached";
  EXPECT_EQ(error.code, client::ErrorCode::exhausted) << error.message;
  EXPECT_NE(error.message.find("2^63"), std::string::npos) << error.message;
  std::unordered_set<std::uint64_t> seen;
  for (std::uint64_t n : numbers) {
    ASSERT_TRUE(seen.insert(n).second) << n << " twice";
    ASSERT_GE(n, start);
    ASSERT_LT(n, limit);
  }
  EXPECT_FALSE(numbers.empty());
  std::vector<std::uint64_t> more;
  EXPECT_FALSE(client->get_seq("last", 1, more, &error));
  EXPECT_EQ(error.code, client::ErrorCode::exhausted) << error.message;
  EXPECT_TRUE(more.empty());
  ASSERT_EQ(flurryctl(server, {"seq", "show", "last", "--json"}, &out), 0) << out;
  EXPECT_NE(out.find(R"("exhausted":true)"), std::string::npos) << out;
  // The node still serves IDs: healthy, naming the exhausted sequence. Asked until healthy
  // (bounded): a watermark write pending past stall_ms (a busy disk on a loaded machine)
  // makes a correct node unhealthy for that moment.
  int health = 1;
  for (const std::uint64_t until = testing::now_ms() + 30'000;
       (health = flurryctl(server, {"health", "--json"}, &out)) != 0 && testing::now_ms() < until;) {
    testing::sleep_ms(50);
  }
  EXPECT_EQ(health, 0) << out;
  EXPECT_NE(out.find(R"("sequences_exhausted":["last"])"), std::string::npos) << out;
  ASSERT_EQ(flurryctl(server, {"metrics"}, &out), 0) << out;
  EXPECT_NE(out.find("\nflurry_seq_exhausted_sequences 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\nflurry_seq_exhausted{sequence=\"last\"} 1\n"), std::string::npos) << out;
  std::printf("exhausted after %zu numbers (%llu retries)\n", numbers.size(),
              static_cast<unsigned long long>(client->counters().retries));
  server.stop();
}

}  // namespace
}  // namespace flurry
