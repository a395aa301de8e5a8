// tests/client/client_test.cc — the C++ client against in-process servers that run the real
// core::Handler (tests/client/test_server.h): sizes of get(), RETRY, FENCED, dead servers,
// late and hostile answers, BAD_REQUEST / UNAUTHORIZED, prefetch from many threads, and
// destruction with the prefetch thread busy. No flurryd needed. The client's own waits (RETRY
// back-off, the refill's wait for an answer) run on a ManualClock where a test is about them.
#include "client/client.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <thread>
#include <unordered_set>
#include <vector>

#include "client/clock.h"
#include "proto/wire.h"
#include "tests/client/manual_clock.h"
#include "tests/client/test_server.h"

namespace flurry::client {
namespace {

using namespace std::chrono_literals;
using testing::DeadServer;
using testing::ManualClock;
using testing::Mode;
using testing::ServerConfig;
using testing::TestServer;

// How long an attempt waits where the test is not about timeouts: an in-process server on
// loopback answers in microseconds, but a loaded 2-CPU machine (or a sanitizer tree) can stall
// a thread for a good part of the client's default 100 ms, and a late answer would turn into a
// timeout plus an ignored answer and change the counts the tests check. 5 s, as every client's
// integration tests wait (CONTRIBUTING.md): flake hunts saw a sanitizer tree's server thread
// silent for more than 1 s; a test whose answers come costs nothing more.
constexpr std::chrono::milliseconds generous_timeout{5000};

// A client of `servers`; a test that leaves Options::timeout at its default gets
// generous_timeout (a test about timeouts sets its own).
std::unique_ptr<Client> make_client(std::vector<std::string> servers, Options options = {}) {
  options.servers = std::move(servers);
  if (options.timeout == Options{}.timeout) options.timeout = generous_timeout;
  Error error;
  auto client = Client::create(options, &error);
  EXPECT_NE(client, nullptr) << error.message;
  return client;
}

void expect_distinct(const std::vector<std::uint64_t>& ids) {
  std::unordered_set<std::uint64_t> seen(ids.begin(), ids.end());
  EXPECT_EQ(seen.size(), ids.size()) << "duplicate IDs";
}

void expect_node(const std::vector<std::uint64_t>& ids, std::uint32_t node) {
  const proto::Layout layout;
  for (std::uint64_t id : ids) {
    ASSERT_EQ(layout.decode(id).node, node) << "ID " << id << " is not from node " << node;
  }
}

// ---- get ----

class GetSizes : public ::testing::TestWithParam<std::size_t> {};

TEST_P(GetSizes, ReturnsExactlyNDistinctIds) {
  TestServer server;
  auto client = make_client({server.address()});
  ASSERT_NE(client, nullptr);
  const std::size_t n = GetParam();
  std::vector<std::uint64_t> ids{42};  // get() appends
  Error error;
  ASSERT_TRUE(client->get(n, ids, &error)) << error.message;
  ASSERT_EQ(ids.size(), n + 1);
  EXPECT_EQ(ids.front(), 42U);
  ids.erase(ids.begin());
  expect_distinct(ids);
  expect_node(ids, 1);
  const Counters counters = client->counters();
  EXPECT_EQ(counters.ids_received, n);
  EXPECT_EQ(counters.timeouts, 0U);
  EXPECT_EQ(counters.ignored_responses, 0U);
  EXPECT_EQ(counters.malformed_responses, 0U);
  // Never more than ids_per_request (4096) per request.
  EXPECT_GE(counters.requests, (n + 4095) / 4096);
  EXPECT_EQ(server.outcome(core::Outcome::ids_issued), n);
}

INSTANTIATE_TEST_SUITE_P(Client, GetSizes, ::testing::Values(1, 3, 4096, 100000));

TEST(Client, GetZeroSucceedsWithoutTraffic) {
  TestServer server;
  auto client = make_client({server.address()});
  std::vector<std::uint64_t> ids;
  Error error;
  EXPECT_TRUE(client->get(0, ids, &error));
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(client->counters().requests, 0U);
}

// Options::poll: the calling thread looks for its answer without sleeping. The real steady
// clock, counting the waits (poll(2) on the socket) the exchanges make. Only a wait with time
// left blocks: a thread preempted between the exchange's deadline check and its poll-window
// check reaches wait_until after the deadline, and that call returns at once (it was counted,
// and failed the test below on a loaded machine, though nothing blocked).
class CountingClock final : public Clock {
 public:
  time_point now() override { return steady_clock().now(); }
  bool wait_until(time_point deadline, std::span<pollfd> fds) override {
    if (now() < deadline) ++waits;
    return steady_clock().wait_until(deadline, fds);
  }
  bool sleep_until(time_point deadline, int wake_fd) override {
    return steady_clock().sleep_until(deadline, wake_fd);
  }
  std::atomic<int> waits{0};
};

// What the client does, not how fast the server is: with the poll window as long as an
// attempt, a polling client looks until the attempt ends and never blocks, however late an
// answer comes (a late one costs an attempt, and there are plenty).
TEST(Client, PollFindsAnswersWithoutWaiting) {
  TestServer server;
  constexpr int exchanges = 200;
  CountingClock clock;
  Options options;
  options.clock = &clock;
  options.poll = poll_max;
  options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(poll_max);
  options.attempts = attempts_max;
  auto client = make_client({server.address()}, options);
  ASSERT_NE(client, nullptr);
  Error error;
  std::vector<std::uint64_t> ids;
  // A call's attempts last 1 s in all (attempts_max of poll_max): a server thread held off the
  // CPU longer than that (a sanitizer tree beside other tests) leaves a call unanswered, which
  // says nothing about polling, so that call is made again (bounded).
  int unanswered = 0;
  for (int i = 0; i < exchanges; ++i) {
    bool got = client->get(1, ids, &error);
    for (int again = 0; !got && error.code == ErrorCode::no_answer && again < 20; ++again) {
      ++unanswered;
      got = client->get(1, ids, &error);
    }
    ASSERT_TRUE(got) << error.message;
  }
  EXPECT_EQ(clock.waits.load(), 0) << "a polling client blocked waiting for an answer";
  expect_distinct(ids);
  EXPECT_EQ(ids.size(), std::size_t{exchanges}) << unanswered << " calls unanswered and made again";
}

TEST(Client, PollOutOfRangeIsRefused) {
  Options options;
  options.poll = poll_max + std::chrono::microseconds{1};
  Error error;
  EXPECT_EQ(Client::create(options, &error), nullptr);
  EXPECT_EQ(error.code, ErrorCode::invalid_argument);
  EXPECT_NE(error.message.find("poll 10001 us is out of range 0..10000 us"), std::string::npos)
      << error.message;
}

TEST(Client, GetRejectsTooManyAtOnce) {
  TestServer server;
  auto client = make_client({server.address()});
  std::vector<std::uint64_t> ids;
  Error error;
  EXPECT_FALSE(client->get(get_count_max + 1, ids, &error));
  EXPECT_EQ(error.code, ErrorCode::invalid_argument);
  EXPECT_TRUE(ids.empty());
}

TEST(Client, RangesSumToNAndHoldConsecutiveIds) {
  TestServer server;
  auto client = make_client({server.address()});
  std::vector<proto::Range> ranges;
  Error error;
  ASSERT_TRUE(client->get_ranges(10000, ranges, &error)) << error.message;
  std::uint64_t total = 0;
  std::vector<std::uint64_t> ids;
  for (const proto::Range& range : ranges) {
    ASSERT_GT(range.count, 0U);
    total += range.count;
    for (std::uint32_t i = 0; i < range.count; ++i) ids.push_back(range.first + i);
  }
  EXPECT_EQ(total, 10000U);
  expect_distinct(ids);
  expect_node(ids, 1);
}

// Slices of 256 IDs per time unit and a request for 100000 at once: an answer holds at most
// 121 ranges, so the server answers partially and the client must ask again for the rest.
TEST(Client, PartialAnswersAreCompletedByAskingAgain) {
  ServerConfig config;
  config.layout.core_bits = 4;
  TestServer server(config);
  Options options;
  options.ids_per_request = 100000;
  auto client = make_client({server.address()}, options);
  std::vector<std::uint64_t> ids;
  Error error;
  ASSERT_TRUE(client->get(100000, ids, &error)) << error.message;
  ASSERT_EQ(ids.size(), 100000U);
  expect_distinct(ids);
  EXPECT_GT(server.outcome(core::Outcome::answered_partial), 0U);
  EXPECT_GT(client->counters().requests, 1U);
}

// ---- statuses ----

// Every RETRY wait below is stepped on a ManualClock, so these tests take no real time for
// the client's waiting and can count its waits exactly.

// A server that answers every GET_IDS with RETRY and `hint_us` until its ceiling is raised.
ServerConfig answering_retry(std::uint32_t hint_us) {
  ServerConfig config;
  config.start_with_ceiling = false;
  config.retry_hint_us = hint_us;
  return config;
}

// Raises the ceiling at the end of the first client wait that brings the clock to `after`.
void raise_ceiling_after(ManualClock& clock, TestServer& server, Clock::duration after) {
  clock.on_sleep([&clock, &server, after] {
    if (clock.elapsed() >= after) server.raise_ceiling();
  });
}

Options timed_by(ManualClock& clock) {
  Options options;
  options.clock = &clock;
  return options;
}

TEST(Client, RetryWaitsUntilTheCeilingRises) {
  TestServer server(answering_retry(2000));
  ManualClock clock;
  raise_ceiling_after(clock, server, 50ms);
  auto client = make_client({server.address()}, timed_by(clock));
  std::vector<std::uint64_t> ids;
  Error error;
  ASSERT_TRUE(client->get(10, ids, &error)) << error.message;
  EXPECT_EQ(ids.size(), 10U);
  expect_distinct(ids);
  const Counters counters = client->counters();
  // 25 waits of the 2 ms hint reach 50 ms; the 26th request is answered OK.
  EXPECT_EQ(counters.retries, 25U);
  EXPECT_EQ(counters.retries, server.outcome(core::Outcome::answered_retry));
  EXPECT_EQ(counters.requests, 26U);
  EXPECT_EQ(counters.timeouts, 0U);  // RETRY never moves on nor uses an attempt
  EXPECT_EQ(clock.elapsed(), 50ms);
  for (Clock::duration step : clock.sleeps()) EXPECT_EQ(step, 2ms);
}

TEST(Client, RetryHintBelowTheMinimumIsRaised) {
  TestServer server(answering_retry(0));  // a hint of 0 must not become a busy loop
  ManualClock clock;
  raise_ceiling_after(clock, server, 0ms);
  auto client = make_client({server.address()}, timed_by(clock));
  std::vector<std::uint64_t> ids;
  Error error;
  ASSERT_TRUE(client->get(1, ids, &error)) << error.message;
  EXPECT_EQ(clock.sleeps(), std::vector<Clock::duration>{Clock::duration{50us}});
}

TEST(Client, RetryForeverFailsAfterTheBudget) {
  TestServer server(answering_retry(5000));
  ManualClock clock;
  Options options = timed_by(clock);
  options.retry_budget = 30ms;
  auto client = make_client({server.address()}, options);
  std::vector<std::uint64_t> ids;
  Error error;
  EXPECT_FALSE(client->get(1, ids, &error));
  EXPECT_EQ(error.code, ErrorCode::retry_exhausted);
  EXPECT_NE(error.message.find(server.address()), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("RETRY for 30 ms (budget 30 ms)"), std::string::npos) << error.message;
  EXPECT_TRUE(ids.empty());
  // Six waits of 5 ms use the budget exactly; the seventh RETRY would exceed it.
  EXPECT_EQ(clock.sleeps().size(), 6U);
  EXPECT_EQ(clock.elapsed(), 30ms);
  EXPECT_EQ(client->counters().retries, 7U);
}

TEST(Client, RetryHintIsBoundedByRetryWaitMax) {
  TestServer server(answering_retry(60'000'000));  // a minute: the client must not believe it
  ManualClock clock;
  raise_ceiling_after(clock, server, 30ms);
  Options options = timed_by(clock);
  options.retry_wait_max = 5ms;
  auto client = make_client({server.address()}, options);
  std::vector<std::uint64_t> ids;
  Error error;
  EXPECT_TRUE(client->get(1, ids, &error)) << error.message;
  EXPECT_EQ(clock.sleeps(), std::vector<Clock::duration>(6, 5ms));
}

TEST(Client, FencedMovesToTheNextServer) {
  ServerConfig fenced_config;
  fenced_config.node_id = 1;
  TestServer fenced(fenced_config);
  fenced.fence();
  ServerConfig good_config;
  good_config.node_id = 2;
  TestServer good(good_config);
  auto client = make_client({fenced.address(), good.address()});
  std::vector<std::uint64_t> ids;
  Error error;
  ASSERT_TRUE(client->get(100, ids, &error)) << error.message;
  expect_node(ids, 2);
  EXPECT_EQ(client->counters().fenced, 1U);
  EXPECT_EQ(fenced.outcome(core::Outcome::answered_fenced), 1U);
  // The client stays on the server that works.
  ASSERT_TRUE(client->get(100, ids, &error)) << error.message;
  expect_node(ids, 2);
  expect_distinct(ids);
  EXPECT_EQ(client->counters().fenced, 1U);
}

TEST(Client, AllFencedFailsNamingTheServer) {
  TestServer fenced;
  fenced.fence();
  Options options;
  options.attempts = 3;
  auto client = make_client({fenced.address()}, options);
  std::vector<std::uint64_t> ids;
  Error error;
  EXPECT_FALSE(client->get(1, ids, &error));
  EXPECT_EQ(error.code, ErrorCode::fenced);
  EXPECT_NE(error.message.find(fenced.address() + " answered FENCED 3 times"), std::string::npos)
      << error.message;
  EXPECT_EQ(client->counters().fenced, 3U);
}

// A drained server (its operator is stopping it) is named as draining, not as one that lost
// its node id; with a drained and a lost server both named, the code is the lost one's.
TEST(Client, ADrainedServerIsNamedDraining) {
  TestServer drained;
  drained.drain();
  Options options;
  options.attempts = 2;
  auto client = make_client({drained.address()}, options);
  std::vector<std::uint64_t> ids;
  Error error;
  EXPECT_FALSE(client->get(1, ids, &error));
  EXPECT_EQ(error.code, ErrorCode::draining) << error.message;
  EXPECT_NE(error.message.find("draining: its operator is stopping it"), std::string::npos) << error.message;
  EXPECT_EQ(error.message.find("holds no node id"), std::string::npos) << error.message;
  TestServer fenced;
  fenced.fence();
  auto both = make_client({drained.address(), fenced.address()}, options);
  EXPECT_FALSE(both->get(1, ids, &error));
  EXPECT_EQ(error.code, ErrorCode::fenced) << error.message;
  EXPECT_NE(error.message.find("draining"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("holds no node id"), std::string::npos) << error.message;
}

// A layout whose time has run out answers EXHAUSTED: the client fails at once, saying so,
// and asks no other server (none can issue those IDs again).
TEST(Client, AnExhaustedLayoutFailsAtOnce) {
  ServerConfig config;
  config.layout = proto::Layout{
      30, 10, 12, 0, proto::CoreBitsFrom::sequence, proto::default_epoch_ms - (std::uint64_t{1} << 30), 1};
  TestServer server(config);  // the clock is past the 30-bit time field's last unit
  TestServer other(config);
  Options options;
  options.attempts = 5;
  auto client = make_client({server.address(), other.address()}, options);
  std::vector<std::uint64_t> ids;
  Error error;
  EXPECT_FALSE(client->get(1, ids, &error));
  EXPECT_EQ(error.code, ErrorCode::exhausted) << error.message;
  EXPECT_NE(error.message.find("time field has run out"), std::string::npos) << error.message;
  EXPECT_EQ(client->counters().requests, 1U);
  EXPECT_EQ(other.datagrams_in(), 0U);
}

// ---- NOT_OWNER: a monotonic sequence served by one node of a cluster ----

// Three servers (nodes 1, 2, 3) of one monotonic sequence "ledger" that node `owner` serves;
// the others answer NOT_OWNER naming it.
struct SeqCluster {
  explicit SeqCluster(std::uint32_t owner) {
    for (std::uint32_t node = 1; node <= 3; ++node) {
      ServerConfig config;
      config.node_id = node;
      config.sequence = "ledger";
      config.monotonic_owner = owner;
      servers.push_back(std::make_unique<TestServer>(config));
    }
  }
  std::vector<std::string> addresses(std::initializer_list<std::size_t> order) const {
    std::vector<std::string> out;
    for (std::size_t i : order) out.push_back(servers[i]->address());
    return out;
  }
  std::uint64_t not_owner_answers() const {
    std::uint64_t n = 0;
    for (const auto& server : servers) n += server->outcome(core::Outcome::answered_not_owner);
    return n;
  }
  std::vector<std::unique_ptr<TestServer>> servers;  // servers[i] is node i + 1
};

TEST(Client, NotOwnerIsFollowedToTheNamedNode) {
  SeqCluster cluster(3);
  // Node 3 is last in the list: the first call asks node 1 (NOT_OWNER, node 3), has not heard
  // from node 3 yet, asks node 2 (NOT_OWNER again), then node 3, which serves.
  auto client = make_client(cluster.addresses({0, 1, 2}));
  std::vector<std::uint64_t> numbers;
  Error error;
  ASSERT_TRUE(client->get_seq("ledger", 5, numbers, &error)) << error.message;
  EXPECT_EQ(numbers, (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(cluster.not_owner_answers(), 2U);
  // The client stays with the owner: no more NOT_OWNER.
  ASSERT_TRUE(client->get_seq("ledger", 3, numbers, &error)) << error.message;
  EXPECT_EQ(numbers.back(), 8U);
  EXPECT_EQ(cluster.not_owner_answers(), 2U);
}

TEST(Client, NotOwnerGoesStraightToAServerKnownAsTheOwner) {
  SeqCluster cluster(2);
  auto client = make_client(cluster.addresses({0, 1, 2}));
  std::vector<std::uint64_t> numbers;
  Error error;
  ASSERT_TRUE(client->get_seq("ledger", 1, numbers, &error)) << error.message;  // node 1, then node 2
  EXPECT_EQ(cluster.not_owner_answers(), 1U);
  // The sequence moves to node 1: node 2 now names it, and node 1 answered before, so the
  // client goes back to it directly (not on to node 3).
  cluster.servers[1]->set_sequence_owner(1);
  cluster.servers[2]->set_sequence_owner(1);
  cluster.servers[0]->set_sequence_owner(1);
  ASSERT_TRUE(client->get_seq("ledger", 1, numbers, &error)) << error.message;
  EXPECT_EQ(cluster.servers[1]->outcome(core::Outcome::answered_not_owner), 1U);
  EXPECT_EQ(cluster.servers[2]->outcome(core::Outcome::requests_get_seq), 0U) << "node 3 was never asked";
  EXPECT_EQ(numbers.size(), 2U);
}

TEST(Client, NotOwnerOfANodeOutsideTheListFailsNamingIt) {
  SeqCluster cluster(3);
  auto client = make_client(cluster.addresses({0, 1}));  // node 3 is not in the list
  std::vector<std::uint64_t> numbers;
  Error error;
  EXPECT_FALSE(client->get_seq("ledger", 1, numbers, &error));
  EXPECT_EQ(error.code, ErrorCode::not_owner);
  EXPECT_NE(error.message.find("node 3 does, and none of this client's servers answers as that node"),
            std::string::npos)
      << error.message;
  EXPECT_TRUE(numbers.empty());
  EXPECT_EQ(cluster.not_owner_answers(), 2U) << "each server asked once, then the call gives up";
  // The next call asks both again (either may be node 3 by now), not only the one it starts on:
  // an earlier call's records do not end a call early.
  EXPECT_FALSE(client->get_seq("ledger", 1, numbers, &error));
  EXPECT_EQ(error.code, ErrorCode::not_owner);
  EXPECT_EQ(cluster.not_owner_answers(), 4U);
}

TEST(Client, NoOwnerKnownWaitsWithinTheBudgetThenUsesTheAttempts) {
  SeqCluster cluster(proto::not_owner_unknown);
  Options options;
  options.attempts = 4;
  options.retry_budget = 200ms;  // four waits of 50 ms without using an attempt, then the attempts
  auto client = make_client(cluster.addresses({0, 1}), options);
  std::vector<std::uint64_t> numbers;
  Error error;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(client->get_seq("ledger", 1, numbers, &error));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  EXPECT_EQ(error.code, ErrorCode::not_owner);
  EXPECT_NE(error.message.find("answered NOT_OWNER 4 times (no owner known)"), std::string::npos)
      << error.message;
  EXPECT_EQ(cluster.not_owner_answers(), 8U);
  // Once an owner is chosen the next call finds it.
  for (auto& server : cluster.servers) server->set_sequence_owner(2);
  ASSERT_TRUE(client->get_seq("ledger", 2, numbers, &error)) << error.message;
  EXPECT_EQ(numbers, (std::vector<std::uint64_t>{1, 2}));
}

TEST(Client, AnOwnerChosenDuringTheWaitIsFound) {
  SeqCluster cluster(proto::not_owner_unknown);
  // node 1 names itself: restarted inside its lease, its old owner key not yet expired
  cluster.servers[0]->set_sequence_owner(1, false);
  ManualClock clock;
  Options options = timed_by(clock);
  // The owner is chosen while the client waits after its second NOT_OWNER (a simulated moment,
  // not a real sleep): the third question finds it.
  int waits = 0;
  clock.on_sleep([&] {
    if (++waits == 2) cluster.servers[0]->set_sequence_owner(1);
  });
  auto client = make_client(cluster.addresses({0}), options);
  std::vector<std::uint64_t> numbers;
  Error error;
  const bool got = client->get_seq("ledger", 3, numbers, &error);
  ASSERT_TRUE(got) << error.message;
  EXPECT_EQ(numbers, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_GE(cluster.not_owner_answers(), 2U);
}

TEST(Client, AFencedServersOldNodeIdIsNotTakenForTheOwner) {
  // A lost node 7 (FENCED, its header still says 7); C is node 7 now and owns the sequence.
  SeqCluster cluster(7);
  ServerConfig config;
  config.node_id = 7;
  config.sequence = "ledger";
  config.monotonic_owner = 7;
  auto old_seven = std::make_unique<TestServer>(config);
  old_seven->fence();
  auto new_seven = std::make_unique<TestServer>(config);
  auto client = make_client({old_seven->address(), cluster.servers[1]->address(), new_seven->address()});
  std::vector<std::uint64_t> numbers;
  Error error;
  ASSERT_TRUE(client->get_seq("ledger", 2, numbers, &error)) << error.message;
  EXPECT_EQ(numbers, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(old_seven->outcome(core::Outcome::answered_fenced), 1U) << "asked once, never as the owner";
}

// Whether `call`, whose waits the test steps on `clock`, ends within 30 s of real time. If it
// does not (a broken client), the clock is stepped on an hour at a time until every attempt
// has timed out, so that the call ends and the test fails instead of hanging.
bool ends_in_time(std::future<bool>& call, ManualClock& clock) {
  if (call.wait_for(30s) == std::future_status::ready) return true;
  while (call.wait_for(10ms) != std::future_status::ready) clock.advance(1h);
  return false;
}

// The timeout is stepped (ManualClock): the attempt on the dead server times out when the test
// says so, and the live server's answer ends its attempt however late this machine delivers
// it, so exactly one timeout is counted.
TEST(Client, DeadServerFirstMovesOnAfterTimeout) {
  DeadServer dead;
  ServerConfig config;
  config.node_id = 2;
  TestServer good(config);
  ManualClock clock;
  Options options = timed_by(clock);
  options.timeout = 500ms;
  auto client = make_client({dead.address(), good.address()}, options);
  std::vector<std::uint64_t> ids;
  Error error;
  std::future<bool> got = std::async(std::launch::async, [&] { return client->get(10, ids, &error); });
  EXPECT_TRUE(clock.await_waiter(10s)) << "the client never waited for the dead server";
  clock.advance(500ms);  // the attempt on `dead` times out; the client moves to `good`
  ASSERT_TRUE(ends_in_time(got, clock)) << "the call did not move on to the live server";
  ASSERT_TRUE(got.get()) << error.message;
  expect_node(ids, 2);
  EXPECT_EQ(client->counters().timeouts, 1U);
  EXPECT_EQ(clock.elapsed(), 500ms) << "the live server's attempt never timed out";
}

TEST(Client, NoAnswerNamesServerAttemptsAndTimeout) {
  DeadServer dead;
  Options options;
  options.timeout = 20ms;
  options.attempts = 3;
  auto client = make_client({dead.address()}, options);
  std::vector<std::uint64_t> ids;
  Error error;
  EXPECT_FALSE(client->get(5, ids, &error));
  EXPECT_EQ(error.code, ErrorCode::no_answer);
  EXPECT_EQ(error.message, "no answer from " + dead.address() + " after 3 attempts of 20 ms");
  EXPECT_EQ(client->counters().timeouts, 3U);
  EXPECT_TRUE(ids.empty());
}

// Attempts on dead, fenced, dead, fenced. The timeouts are stepped (ManualClock): each attempt on
// the dead server ends when the test advances the clock, once the client has sent it (counted in
// requests), and the FENCED answers end theirs however late they come.
TEST(Client, MixedFailuresAreAllNamed) {
  DeadServer dead;
  TestServer fenced;
  fenced.fence();
  ManualClock clock;
  Options options = timed_by(clock);
  options.timeout = 500ms;
  options.attempts = 4;
  auto client = make_client({dead.address(), fenced.address()}, options);
  std::vector<std::uint64_t> ids;
  Error error;
  std::future<bool> got = std::async(std::launch::async, [&] { return client->get(5, ids, &error); });
  for (const std::uint64_t attempt_on_dead : {1, 3}) {
    // The request's deadline is fixed (sent + timeout) before it is counted, so the step below
    // ends that attempt whether the client is already waiting or about to.
    const auto sent = [&] { return client->counters().requests >= attempt_on_dead; };
    for (int i = 0; i < 30'000 && !sent(); ++i) std::this_thread::sleep_for(1ms);
    EXPECT_TRUE(sent()) << "attempt " << attempt_on_dead << " was never sent";
    clock.advance(500ms);
  }
  ASSERT_TRUE(ends_in_time(got, clock)) << "the call did not end";
  EXPECT_FALSE(got.get());
  EXPECT_EQ(error.code, ErrorCode::fenced);
  EXPECT_NE(error.message.find(dead.address() + " gave no answer within 500 ms 2 times"), std::string::npos)
      << error.message;
  EXPECT_NE(error.message.find(fenced.address() + " answered FENCED 2 times"), std::string::npos)
      << error.message;
}

// A server that answers after the client gave up on it: its late answer carries the id of a
// previous attempt and must never be taken for the current request. The timeout is stepped
// and the answer held until the test releases it, so "late" does not depend on timing. The
// late answer waits on the socket connected to that server; it is read (and ignored) when the
// client next asks that server, which happens once the other one answers FENCED.
TEST(Client, LateAnswersFromEarlierAttemptsAreIgnored) {
  ServerConfig late_config;
  late_config.node_id = 1;
  late_config.mode = Mode::late;
  TestServer late(late_config);
  ServerConfig good_config;
  good_config.node_id = 2;
  TestServer good(good_config);
  ManualClock clock;
  Options options = timed_by(clock);
  options.timeout = 30ms;
  auto client = make_client({late.address(), good.address()}, options);
  std::vector<std::uint64_t> ids;
  Error error;
  std::future<bool> first = std::async(std::launch::async, [&] { return client->get(5, ids, &error); });
  ASSERT_TRUE(clock.await_waiter(10s)) << "the client never waited for the late server";
  clock.advance(30ms);  // the attempt on `late` times out; the client moves to `good`
  ASSERT_TRUE(first.get()) << error.message;
  expect_node(ids, 2);
  late.release_late();
  ASSERT_TRUE(late.await_answers_sent(1, 10s));
  good.fence();  // the next call moves back to `late`, where the old answer waits first
  std::vector<std::uint64_t> more;
  std::future<bool> second = std::async(std::launch::async, [&] { return client->get(5, more, &error); });
  ASSERT_EQ(second.wait_for(10s), std::future_status::ready) << "the call on the released server hung";
  ASSERT_TRUE(second.get()) << error.message;
  expect_node(more, 1);
  ids.insert(ids.end(), more.begin(), more.end());
  expect_distinct(ids);
  EXPECT_EQ(late.outcome(core::Outcome::answered_ok), 2U);
  EXPECT_EQ(client->counters().ignored_responses, 1U) << "the old answer was read and ignored";
  EXPECT_EQ(client->counters().timeouts, 1U);
  EXPECT_EQ(clock.elapsed(), 30ms);
}

TEST(Client, HostileAnswersAreIgnoredAndCounted) {
  ServerConfig config;
  config.mode = Mode::hostile;
  TestServer server(config);
  auto client = make_client({server.address()});
  std::vector<std::uint64_t> ids;
  Error error;
  ASSERT_TRUE(client->get(1, ids, &error)) << error.message;
  ASSERT_TRUE(client->get(4096, ids, &error)) << error.message;
  ASSERT_TRUE(client->get(20000, ids, &error)) << error.message;
  ASSERT_TRUE(client->ping(&error).has_value()) << error.message;
  const std::optional<proto::Info> info = client->info(&error);
  ASSERT_TRUE(info.has_value()) << error.message;
  EXPECT_EQ(to_layout(*info), proto::Layout{});
  ASSERT_EQ(ids.size(), 1U + 4096U + 20000U);
  expect_distinct(ids);
  for (std::uint64_t id : ids) ASSERT_GE(id, testing::fake_id_limit) << "a fake ID got through";
  expect_node(ids, 1);
  const Counters counters = client->counters();
  EXPECT_EQ(counters.timeouts, 0U);
  EXPECT_EQ(counters.requests, counters.responses);
  EXPECT_EQ(counters.ignored_responses, counters.requests);
  EXPECT_EQ(counters.malformed_responses, testing::hostile_malformed_per_request * counters.requests);
}

TEST(Client, BadRequestIsAnErrorNamingTheReason) {
  ServerConfig config;
  config.mode = Mode::mangle_version;
  TestServer server(config);
  TestServer other;  // must not be tried: another server would reject the same request
  auto client = make_client({server.address(), other.address()});
  std::vector<std::uint64_t> ids;
  Error error;
  EXPECT_FALSE(client->get(10, ids, &error));
  EXPECT_EQ(error.code, ErrorCode::bad_request);
  EXPECT_NE(error.message.find("BAD_REQUEST (bad_version)"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find(server.address()), std::string::npos) << error.message;
  EXPECT_EQ(client->counters().requests, 1U);
  EXPECT_EQ(other.datagrams_in(), 0U);
  EXPECT_TRUE(ids.empty());
}

TEST(Client, UnauthorizedIsAnErrorNamingTheReason) {
  ServerConfig config;
  config.mode = Mode::mangle_auth;
  TestServer server(config);
  auto client = make_client({server.address()});
  Error error;
  EXPECT_FALSE(client->next(&error).has_value());
  EXPECT_EQ(error.code, ErrorCode::unauthorized);
  // A bare header with the flag has no room for the trailer; a padded one names no key of a
  // server with --auth off. Either way the reason is named.
  EXPECT_TRUE(error.message.find("UNAUTHORIZED (trailer_short)") != std::string::npos ||
              error.message.find("UNAUTHORIZED (auth_unsupported)") != std::string::npos)
      << error.message;
}

// ---- authentication (PROTOCOL.md "Authentication") ----

std::unique_ptr<Client> make_signed_client(const TestServer& server, std::uint8_t secret_xor = 0,
                                           std::chrono::milliseconds timeout = generous_timeout) {
  Options options;
  options.servers = {server.address()};
  // The tests here expect each attempt's answer within the attempt (an unverified answer does
  // not end it): generous, as make_client's, unless no answer is to come at all.
  options.timeout = timeout;
  options.attempts = 2;
  Key key;
  key.id = flurry::client::testing::test_key_id;
  key.secret = flurry::client::testing::test_key_secret;
  key.secret[0] ^= secret_xor;
  options.key = key;
  Error error;
  auto client = Client::create(options, &error);
  EXPECT_NE(client, nullptr) << error.message;
  return client;
}

TEST(ClientAuth, SignedRequestsGetVerifiedIds) {
  ServerConfig config;
  config.auth = true;
  TestServer server(config);
  auto client = make_signed_client(server);
  std::vector<std::uint64_t> ids;
  Error error;
  ASSERT_TRUE(client->get(5000, ids, &error)) << error.message;
  EXPECT_EQ(ids.size(), 5000U);
  EXPECT_EQ(client->counters().unverified_responses, 0U);
  // An unsigned client is refused by a server that requires authentication.
  auto plain = make_client({server.address()});
  EXPECT_FALSE(plain->next(&error).has_value());
  EXPECT_EQ(error.code, ErrorCode::unauthorized);
  EXPECT_NE(error.message.find("auth_required"), std::string::npos) << error.message;
}

TEST(ClientAuth, UnsignedOrWronglySignedAnswersAreRejectedAndCounted) {
  // Each client waits out its two generous attempts (no answer ends one): the two modes run at
  // once, each with its own server and client.
  const auto check = [](Mode mode) {
    ServerConfig config;
    config.auth = true;
    config.mode = mode;
    TestServer server(config);
    auto client = make_signed_client(server);
    Error error;
    EXPECT_FALSE(client->next(&error).has_value());
    // No answer verifies, so the client never learns the server's node id: each attempt is
    // signed for any server and refused wrong_server, a refusal it cannot trust either. It
    // names that refusal (unauthorized) or, when even that did not decode, no answer.
    EXPECT_TRUE(error.code == ErrorCode::no_answer || error.code == ErrorCode::unauthorized) << error.message;
    EXPECT_EQ(client->counters().unverified_responses, 2U) << "one per attempt";
    EXPECT_EQ(client->counters().ids_received, 0U);
  };
  std::future<void> stripped = std::async(std::launch::async, check, Mode::strip_mac);
  std::future<void> flipped = std::async(std::launch::async, check, Mode::flip_mac);
  stripped.get();
  flipped.get();
}

// ---- answers only from the server asked (PROTOCOL.md "What a client can be sure of") ----

// A sender on another address answers the request in flight with its exact request id (it saw
// the request), before the real server does: the client's socket is connected to the server,
// so the kernel never hands it the forged answer, and the real IDs are taken.
TEST(Client, AnAnswerFromAnotherAddressIsNeverTaken) {
  ServerConfig config;
  config.node_id = 3;
  config.mode = Mode::late;  // the real answer waits until the forgery has been sent
  TestServer server(config);
  auto client = make_client({server.address()});
  std::vector<std::uint64_t> ids;
  Error error;
  std::future<bool> got = std::async(std::launch::async, [&] { return client->get(5, ids, &error); });
  ASSERT_TRUE(server.await_requests(1, 10s));
  const TestServer::Seen seen = server.seen().front();
  // The forgery: a well-formed OK answer to that request id, with IDs of node 99.
  proto::ResponseHeader header;
  header.opcode = proto::Opcode::get_ids;
  header.range_count = 1;
  header.node = 99;
  header.request_id = seen.request_id;
  std::array<std::uint8_t, proto::datagram_size_max> forged{};
  std::size_t size = proto::encode_response_header(header, forged);
  proto::encode_range(forged, 0, proto::Range{proto::Layout{}.compose(1000, 99, 0, 0), 5});
  size += proto::range_size;
  const int spoofer = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(spoofer, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(seen.client_port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(::sendto(spoofer, forged.data(), size, 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(size));
  }
  ::close(spoofer);
  server.release_late();
  ASSERT_TRUE(got.get()) << error.message;
  expect_node(ids, 3);
  const Counters counters = client->counters();
  EXPECT_EQ(counters.ignored_responses + counters.malformed_responses, 0U)
      << "a datagram from another address reached the client";
}

// Request ids are unpredictable: 500 attempts' ids are distinct and none follows another by
// one (a counter, which lets anyone who saw one request answer the next ones ahead of time).
TEST(Client, RequestIdsAreUnpredictable) {
  TestServer server;
  auto client = make_client({server.address()});
  std::vector<std::uint64_t> ids;
  Error error;
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(client->get(1, ids, &error)) << error.message;
  const std::vector<TestServer::Seen> seen = server.seen();
  ASSERT_EQ(seen.size(), 500U);
  std::unordered_set<std::uint64_t> distinct;
  int ones = 0;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    distinct.insert(seen[i].request_id);
    ones += std::popcount(seen[i].request_id);
    if (i > 0) {
      EXPECT_NE(seen[i].request_id, seen[i - 1].request_id + 1) << "consecutive request ids at " << i;
    }
  }
  EXPECT_EQ(distinct.size(), seen.size());
  // 32,000 bits, half of them set: a random source gives 16,000 +- a few hundred.
  EXPECT_GT(ones, 15'000);
  EXPECT_LT(ones, 17'000);
}

// A signed client's first GET_IDS to a server names no node (it does not know it yet): the
// server refuses it wrong_server, signed, naming its node, and the client signs again for it
// at once, without using an attempt. Later calls sign for that node from the start.
TEST(ClientAuth, TheFirstRequestLearnsTheServersNodeAndSignsAgain) {
  ServerConfig config;
  config.auth = true;
  config.node_id = 6;
  TestServer server(config);
  Options options;
  options.attempts = 1;  // the refusal must not use it
  options.servers = {server.address()};
  options.timeout = generous_timeout;
  Key key;
  key.id = flurry::client::testing::test_key_id;
  key.secret = flurry::client::testing::test_key_secret;
  options.key = key;
  Error error;
  auto client = Client::create(options, &error);
  ASSERT_NE(client, nullptr) << error.message;
  std::vector<std::uint64_t> ids;
  ASSERT_TRUE(client->get(5, ids, &error)) << error.message;
  expect_node(ids, 6);
  EXPECT_EQ(client->counters().requests, 2U) << "one refused for any server, one for node 6";
  EXPECT_EQ(server.outcome(core::Outcome::answered_unauthorized), 1U);
  ASSERT_TRUE(client->get(5, ids, &error)) << error.message;
  EXPECT_EQ(client->counters().requests, 3U) << "the node is known now";
  EXPECT_EQ(server.outcome(core::Outcome::answered_unauthorized), 1U);
  EXPECT_EQ(client->counters().unverified_responses, 0U);
}

TEST(ClientAuth, WrongSecretGetsNothing) {
  ServerConfig config;
  config.auth = true;
  TestServer server(config);
  // A bad MAC is dropped unanswered: nothing is to come, so nothing is gained by waiting long.
  auto client = make_signed_client(server, 0x80, std::chrono::milliseconds(200));
  Error error;
  EXPECT_FALSE(client->next(&error).has_value());
  EXPECT_EQ(error.code, ErrorCode::no_answer) << "a bad MAC is dropped: " << error.message;
  EXPECT_EQ(client->counters().ids_received, 0U);
}

TEST(ClientAuth, KeyFileIsReadAndModeChecked) {
  const std::string path = ::testing::TempDir() + "/flurry_client_key_test.key";
  {
    std::ofstream file(path);
    file << "# a client key\nname = \"billing\"\nid = 7\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n";
  }
  Key key;
  Error error;
  ::chmod(path.c_str(), 0644);
  EXPECT_FALSE(read_key_file(path, &key, &error));
  EXPECT_NE(error.message.find("chmod 600"), std::string::npos) << error.message;
  ::chmod(path.c_str(), 0600);
  ASSERT_TRUE(read_key_file(path, &key, &error)) << error.message;
  EXPECT_EQ(key.id, 7U);
  EXPECT_EQ(key.secret, flurry::client::testing::test_key_secret);
  {
    std::ofstream file(path);
    file << "id = 7\nsecret = \"0001\"\n";
  }
  EXPECT_FALSE(read_key_file(path, &key, &error));
  EXPECT_NE(error.message.find("secret must be"), std::string::npos) << error.message;
  {
    std::ofstream file(path);
    file << "id = 7\nsecret = \"000102030405060708090a0b0c0d0e0f\"\nsecrte = 1\n";
  }
  EXPECT_FALSE(read_key_file(path, &key, &error));
  EXPECT_NE(error.message.find("unknown key 'secrte'"), std::string::npos) << error.message;
  {
    std::ofstream file(path);
    file << "id = 7\nsecret = 000102\n";  // not TOML: the parser names the line
  }
  EXPECT_FALSE(read_key_file(path, &key, &error));
  EXPECT_NE(error.message.find("line 2"), std::string::npos) << error.message;
  std::remove(path.c_str());
}

// ---- ping, info ----

TEST(Client, PingReportsRoundTripAndNode) {
  ServerConfig config;
  config.node_id = 7;
  TestServer server(config);
  auto client = make_client({server.address()});
  Error error;
  const auto before = std::chrono::steady_clock::now();
  const std::optional<PingResult> result = client->ping(&error);
  const auto took = std::chrono::steady_clock::now() - before;
  ASSERT_TRUE(result.has_value()) << error.message;
  EXPECT_GT(result->rtt.count(), 0);
  EXPECT_LE(result->rtt, took) << "the round trip is part of the call";
  EXPECT_EQ(result->node, 7U);
  EXPECT_EQ(result->server, server.address());
  EXPECT_EQ(server.outcome(core::Outcome::requests_ping), 1U);
}

TEST(Client, PingIsAnsweredEvenWhenFenced) {
  TestServer server;
  server.fence();
  auto client = make_client({server.address()});
  Error error;
  EXPECT_TRUE(client->ping(&error).has_value()) << error.message;
}

TEST(Client, InfoDescribesTheServerLayout) {
  ServerConfig config;
  config.layout = *proto::layout_preset("js-safe");
  config.layout.core_bits = 2;
  config.layout.core_from = proto::CoreBitsFrom::node;
  config.layout.epoch_ms = 1'600'000'000'000ULL;
  TestServer server(config);
  auto client = make_client({server.address()});
  Error error;
  const std::optional<proto::Info> info = client->info(&error);
  ASSERT_TRUE(info.has_value()) << error.message;
  EXPECT_EQ(to_layout(*info), config.layout);
  EXPECT_EQ(info->time_unit_ms, 10U);
}

// ---- create ----

TEST(Client, CreateRejectsBadOptions) {
  auto rejects = [](Options options, ErrorCode code, std::string_view needle) {
    Error error;
    EXPECT_EQ(Client::create(options, &error), nullptr);
    EXPECT_EQ(error.code, code) << error.message;
    EXPECT_NE(error.message.find(needle), std::string::npos) << error.message;
  };
  Options options;
  options.servers = {};
  rejects(options, ErrorCode::invalid_argument, "no server");
  options.servers = {"127.0.0.1"};
  rejects(options, ErrorCode::invalid_argument, "HOST:PORT");
  options.servers = {"127.0.0.1:0"};
  rejects(options, ErrorCode::invalid_argument, "port");
  options.servers = {"127.0.0.1:65536"};
  rejects(options, ErrorCode::invalid_argument, "port");
  options.servers = {"127.0.0.1:74x"};
  rejects(options, ErrorCode::invalid_argument, "port");
  options.servers = {":7420"};
  rejects(options, ErrorCode::invalid_argument, "HOST:PORT");
  options = Options{};
  options.attempts = 0;
  rejects(options, ErrorCode::invalid_argument, "attempts");
  options = Options{};
  options.timeout = 0ms;
  rejects(options, ErrorCode::invalid_argument, "timeout");
  options = Options{};
  options.prefetch = 1;
  rejects(options, ErrorCode::invalid_argument, "prefetch");
  options = Options{};
  options.ids_per_request = 0;
  rejects(options, ErrorCode::invalid_argument, "ids per request");
  options = Options{};
  options.ids_per_request = proto::count_max + 1;
  rejects(options, ErrorCode::invalid_argument, "ids per request");
}

TEST(Client, CreateResolvesNamesAndSendsNothing) {
  Options options;
  options.servers = {"localhost:7420", "127.0.0.1:7421"};
  Error error;
  auto client = Client::create(options, &error);
  ASSERT_NE(client, nullptr) << error.message;
  EXPECT_EQ(client->counters().requests, 0U);
}

// ---- next and prefetch ----

TEST(Client, NextWithoutPrefetchAsksEachTime) {
  TestServer server;
  auto client = make_client({server.address()});
  std::vector<std::uint64_t> ids;
  Error error;
  for (int i = 0; i < 50; ++i) {
    const std::optional<std::uint64_t> id = client->next(&error);
    ASSERT_TRUE(id.has_value()) << error.message;
    ids.push_back(*id);
  }
  expect_distinct(ids);
  EXPECT_EQ(client->counters().requests, 50U);
}

TEST(Client, PrefetchServesManyThreadsWithDistinctIds) {
  TestServer server;
  Options options;
  options.prefetch = 8192;
  auto client = make_client({server.address()}, options);
  constexpr int threads = 4;
  constexpr std::size_t per_thread = 50'000;
  std::vector<std::vector<std::uint64_t>> got(threads);
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      got[t].reserve(per_thread);
      Error error;
      for (std::size_t i = 0; i < per_thread; ++i) {
        const std::optional<std::uint64_t> id = client->next(&error);
        if (!id) {
          failures.fetch_add(1);
          return;
        }
        got[t].push_back(*id);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  ASSERT_EQ(failures.load(), 0);
  std::vector<std::uint64_t> all;
  for (const auto& ids : got) all.insert(all.end(), ids.begin(), ids.end());
  ASSERT_EQ(all.size(), threads * per_thread);
  expect_distinct(all);
  expect_node(all, 1);
  // The refill thread is counted once it added IDs, which it does whenever it is scheduled
  // after a call left the buffer below half (the last synchronous fetch does): asked until it
  // shows (bounded), not expected to have run by the time the callers are done.
  for (int i = 0; i < 30'000 && client->counters().prefetch_refills == 0; ++i)
    std::this_thread::sleep_for(1ms);
  const Counters counters = client->counters();
  EXPECT_GT(counters.prefetch_refills, 0U);
  // Batches, not one request per ID.
  EXPECT_LT(counters.requests, all.size() / 100);
}

// client.h promises every member function is safe from any thread: get(), ping() and next()
// at once (and the refill thread) share the one socket.
TEST(Client, MixedCallsFromManyThreadsShareTheSocket) {
  TestServer server;
  Options options;
  options.prefetch = 1000;
  auto client = make_client({server.address()}, options);
  constexpr int rounds = 200;
  std::vector<std::uint64_t> from_get;
  std::vector<std::uint64_t> from_next;
  std::atomic<int> failures{0};
  std::thread getter([&] {
    Error error;
    for (int i = 0; i < rounds; ++i) {
      if (!client->get(100, from_get, &error)) failures.fetch_add(1);
    }
  });
  std::thread nexter([&] {
    Error error;
    for (int i = 0; i < rounds * 100; ++i) {
      const std::optional<std::uint64_t> id = client->next(&error);
      if (!id) {
        failures.fetch_add(1);
        return;
      }
      from_next.push_back(*id);
    }
  });
  std::thread pinger([&] {
    Error error;
    for (int i = 0; i < rounds; ++i) {
      if (!client->ping(&error)) failures.fetch_add(1);
    }
  });
  getter.join();
  nexter.join();
  pinger.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<std::uint64_t> all = from_get;
  all.insert(all.end(), from_next.begin(), from_next.end());
  EXPECT_EQ(all.size(), 2U * rounds * 100);
  expect_distinct(all);
  EXPECT_EQ(client->counters().ignored_responses, 0U);
}

TEST(Client, PrefetchNextFailsCleanlyWithoutServer) {
  DeadServer dead;
  Options options;
  options.prefetch = 64;
  options.timeout = 10ms;
  options.attempts = 2;
  auto client = make_client({dead.address()}, options);
  Error error;
  EXPECT_FALSE(client->next(&error).has_value());
  EXPECT_EQ(error.code, ErrorCode::no_answer);
}

// A next() that fails (here: every request BAD_REQUEST) leaves nothing behind in the buffer:
// once the server answers again, one next() costs a request or two, not one per earlier failure
// (a claim left per failed call made the client fetch and throw away thousands of IDs).
TEST(Client, PrefetchFailuresLeaveNothingToCatchUpOn) {
  ServerConfig config;
  config.mode = Mode::mangle_version;
  TestServer server(config);
  Options options;
  options.prefetch = 64;
  options.ids_per_request = 64;
  auto client = make_client({server.address()}, options);
  Error error;
  for (int i = 0; i < 2000; ++i) {
    ASSERT_FALSE(client->next(&error).has_value());
    ASSERT_EQ(error.code, ErrorCode::bad_request);
  }
  server.set_mode(Mode::normal);
  const std::uint64_t before = client->counters().requests;
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 10; ++i) {
    const std::optional<std::uint64_t> id = client->next(&error);
    ASSERT_TRUE(id.has_value()) << error.message;
    ids.push_back(*id);
  }
  std::this_thread::sleep_for(300ms);  // and whatever the refill thread does meanwhile
  expect_distinct(ids);
  // The synchronous fetch, the refill's top-up, and a refill that was backing off: a handful.
  EXPECT_LE(client->counters().requests - before, 6U);
}

TEST(Client, DestructionWhileRefillingIsClean) {
  TestServer server;
  for (int round = 0; round < 20; ++round) {
    Options options;
    options.prefetch = 1 << 20;  // the refill thread is busy for a while
    auto client = make_client({server.address()}, options);
    Error error;
    ASSERT_TRUE(client->next(&error).has_value()) << error.message;
    client.reset();  // while the background thread is mid-refill
  }
}

// The clock never reaches the refill's answer deadline, so only the wake fd can end its wait.
TEST(Client, DestructionInterruptsAnExchangeInFlight) {
  DeadServer dead;
  ManualClock clock;
  Options options = timed_by(clock);
  options.prefetch = 1024;
  auto client = make_client({dead.address()}, options);
  ASSERT_TRUE(clock.await_waiter(10s)) << "the refill thread never waited for an answer";
  std::future<void> destroyed = std::async(std::launch::async, [&client] { client.reset(); });
  // Far beyond a join on a loaded machine; a destructor that waited for the clock never returns.
  if (destroyed.wait_for(30s) != std::future_status::ready) {
    ADD_FAILURE() << "destruction did not interrupt the wait for an answer";
    while (destroyed.wait_for(10ms) != std::future_status::ready) clock.advance(1h);
  }
}

}  // namespace
}  // namespace flurry::client
