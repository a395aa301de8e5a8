// tests/integration/auth_test.cc — authentication against a real flurryd (issue 10): keys
// rotate under load without losing a request (reloads by flurryctl and SIGHUP while signed
// clients fetch), a key's rate limit holds within 10 % over a few seconds, --auth required
// refuses unsigned GET_IDS and serves signed ones, `keys list` shows no secret, and a key
// file others can read is refused at start.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "serving.h"
#include "tests/support/child_process.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;

struct KeySpec {
  std::uint32_t id;
  std::uint8_t seed;  // secret bytes seed, seed + 1, ...
  std::uint32_t rate_per_s = 0;
};

std::string secret_hex(std::uint8_t seed) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  for (int i = 0; i < 16; ++i) {
    const auto byte = static_cast<std::uint8_t>(seed + i);
    hex += digits[byte >> 4];
    hex += digits[byte & 15];
  }
  return hex;
}

void write_keys(const std::string& path, const std::vector<KeySpec>& keys, mode_t mode = 0600) {
  const std::string temporary = path + ".new";
  {
    std::ofstream file(temporary);
    for (const KeySpec& key : keys) {
      file << "[[key]]\nname = \"key" << key.id << "\"\nid = " << key.id << "\nsecret = \""
           << secret_hex(key.seed) << "\"\nrate_per_s = " << key.rate_per_s << "\n\n";
    }
  }
  ::chmod(temporary.c_str(), mode);
  ASSERT_EQ(std::rename(temporary.c_str(), path.c_str()), 0);  // atomic: a reload never sees half
}

std::unique_ptr<client::Client> signed_client(const std::string& address, const KeySpec& spec,
                                              std::chrono::milliseconds timeout = 2000ms) {
  client::Options options;
  options.servers = {address};
  // Generous: an answer later than an attempt would count as a timeout and a late, unverified
  // answer, and the tests count both.
  options.timeout = timeout;
  client::Key key;
  key.id = spec.id;
  for (int i = 0; i < 16; ++i)
    key.secret[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(spec.seed + i);
  options.key = key;
  client::Error error;
  auto client = client::Client::create(options, &error);
  EXPECT_TRUE(client) << error.message;
  return client;
}

struct AuthNode : testing::LocalFlurryd {
  // The key file lives in the state dir, which exists only once the base is built.
  explicit AuthNode(const std::string& mode, std::vector<std::string> more = {})
      : LocalFlurryd("flurry-auth-", std::move(more)) {
    flags.insert(flags.end(), {"--auth", mode, "--key-file", key_file, "--lead-ms", "1000"});
  }
  std::string key_file = state_dir + "/keys.toml";
  nlohmann::json ask(const std::vector<std::string>& command) {
    std::vector<std::string> args = {"--control-socket", control_socket(), "--json"};
    args.insert(args.end(), command.begin(), command.end());
    const auto reply = testing::run_to_end(testing::env_or_die("FLURRYCTL"), args);
    EXPECT_EQ(reply.exit_code, 0) << reply.output;
    // Failed or unparsable: an empty object, so the caller's check fails and nothing throws (a
    // throw while the load threads run would end the test in std::terminate, its flurryd killed
    // but still holding node 0's lock for a moment: the next test in the shard failed on it).
    nlohmann::json answer = nlohmann::json::parse(reply.output, nullptr, false);
    return answer.is_object() ? answer : nlohmann::json::object();
  }
  const nlohmann::json* key_stats(const nlohmann::json& stats, std::uint32_t id) {
    for (const auto& key : stats["keys"]) {
      if (key.value("id", 0U) == id) return &key;
    }
    return nullptr;
  }
};

// Signed clients fetch on two threads while the key file rotates key 1 -> 2 with both valid in
// between, reloaded 40 times (flurryctl and SIGHUP alternately): no get() fails, no ID repeats,
// and the server refused nothing of a valid key.
TEST(Auth, RotationUnderLoadLosesNoRequest) {
  AuthNode node("optional", {"--workers", "2", "--init"});
  const KeySpec old_key{1, 10}, new_key{2, 50};
  write_keys(node.key_file, {old_key});
  node.start();
  std::atomic<int> phase{0};  // 0: only the old key; 1: both; 2: only the new key
  std::atomic<bool> stop{false};
  std::vector<std::vector<std::uint64_t>> seen(2);
  std::array<std::atomic<std::size_t>, 2> fetched{};  // seen[i].size(), readable by this thread
  std::atomic<int> failures{0};
  std::atomic<std::uint64_t> timeouts{0};
  // Calls refused as stale that lasted longer than the window (flurryd's default 5 s): see below.
  std::atomic<std::uint64_t> held_up{0};
  constexpr auto window = 5000ms;
  auto load = [&](int index, KeySpec key, int active_until_phase) {
    auto client = signed_client(node.address(), key);
    client::Error error;
    auto& ids = seen[static_cast<std::size_t>(index)];
    while (!stop.load() && phase.load() <= active_until_phase) {
      const auto began = std::chrono::steady_clock::now();
      if (!client->get(50, ids, &error)) {
        const auto took =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began);
        // A request is stale only when handled more than the window after it was signed, and
        // an attempt's timeout starts when it is sent, after the signing: a client held up in
        // between (stamped, then not run for seconds on a loaded machine) times nothing out,
        // and its call lasts longer than the window; so does one not run again until its late
        // answer had come. That refusal is right and issued nothing (a flake hunt met one,
        // TSan: a stale refusal, no timeout). A stale refusal within a shorter call is not.
        const bool stale = error.code == client::ErrorCode::unauthorized &&
                           error.message.find("(stale_timestamp)") != std::string::npos;
        if (stale && took > window) {
          held_up.fetch_add(1);
        } else {
          ADD_FAILURE() << "key " << key.id << " in phase " << phase.load() << ", a call of " << took.count()
                        << " ms: " << error.message;
          failures.fetch_add(1);
        }
      }
      fetched[static_cast<std::size_t>(index)].store(ids.size());
    }
    // A late answer is read as an unverified one (its request's MAC is no longer awaited): only
    // an attempt that timed out can leave one.
    EXPECT_LE(client->counters().unverified_responses, client->counters().timeouts);
    timeouts.fetch_add(client->counters().timeouts);
  };
  // Each phase lasts until its load has fetched enough, however slow the machine (bounded).
  const auto wait_for_ids = [&](std::size_t index, std::size_t count) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (fetched[index].load() < count && failures.load() == 0 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
  };
  std::thread old_load(load, 0, old_key, 1);
  wait_for_ids(0, 1000);
  write_keys(node.key_file, {old_key, new_key});
  phase.store(1);
  std::thread new_load;
  for (int i = 0; i < 40; ++i) {
    if (i % 2 == 0) {
      EXPECT_EQ(node.ask({"keys", "reload"}).value("ok", false), true);
    } else {
      node.daemon.signal(SIGHUP);
    }
    if (i == 5) new_load = std::thread(load, 1, new_key, 2);
    std::this_thread::sleep_for(25ms);
  }
  wait_for_ids(1, 500);
  const std::size_t old_key_ids = fetched[0].load();
  wait_for_ids(0, old_key_ids + 500);  // the old key served while both were valid
  phase.store(2);                      // the old key's clients stop before it goes away
  old_load.join();
  write_keys(node.key_file, {new_key});
  EXPECT_EQ(node.ask({"keys", "reload"}).value("ok", false), true);
  const std::size_t new_key_ids = fetched[1].load();
  wait_for_ids(1, new_key_ids + 500);  // the new key served alone after the old one went
  stop.store(true);
  new_load.join();
  EXPECT_EQ(failures.load(), 0);
  std::set<std::uint64_t> unique;
  for (const auto& ids : seen) {
    for (std::uint64_t id : ids) EXPECT_TRUE(unique.insert(id).second) << "ID " << id << " twice";
  }
  EXPECT_GE(seen[0].size(), 1500U);
  EXPECT_GE(seen[1].size(), 1000U);
  const nlohmann::json stats = node.ask({"stats"});
  const auto& errors = stats["total"]["request_errors"];
  for (const char* reason : {"unknown_key", "bad_mac", "replay", "replay_full"}) {
    EXPECT_EQ(errors.value(reason, 1ULL), 0U) << reason;
  }
  // A request handled more than the 5 s window after it was signed (a client or a flurryd
  // thread held up that long on a loaded machine) is refused as stale, rightly: either its
  // client had given up on that attempt (2 s) long before, or the client itself was held up
  // after signing and its call failed after more than the window (held_up, above). So at most
  // one per timeout or held-up call, and none without.
  EXPECT_LE(errors.value("stale_timestamp", ~0ULL), timeouts.load() + held_up.load())
      << errors.dump() << "\n"
      << held_up.load() << " calls refused as stale after more than the window";
  const nlohmann::json* new_stats = node.key_stats(stats, 2);
  ASSERT_NE(new_stats, nullptr) << stats.dump();
  // Every ID the client took was issued to its key; an attempt that timed out may have been
  // issued too (never handed out).
  if (timeouts.load() == 0) {
    EXPECT_EQ((*new_stats)["ids_issued"].get<std::uint64_t>(), seen[1].size());
  } else {
    EXPECT_GE((*new_stats)["ids_issued"].get<std::uint64_t>(), seen[1].size());
  }
  // The old key is gone now: a request signed with it is dropped unanswered (an unknown key
  // gets no answer, so a flood of them reflects nothing), counted as unknown_key, and the
  // client's error says what to check.
  auto late = signed_client(node.address(), old_key, 300ms);  // no answer is expected
  client::Error error;
  EXPECT_FALSE(late->next(&error).has_value());
  EXPECT_NE(error.message.find("key id it does not know"), std::string::npos) << error.message;
  // The client's silence ends by its own timeout, not by the server having handled its
  // requests: the count is waited for (bounded; a held-up worker counts them late).
  std::uint64_t unknown_key = 0;
  for (const auto until = std::chrono::steady_clock::now() + 20s;
       unknown_key == 0 && std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(50ms)) {
    unknown_key = node.ask({"stats"})["total"]["request_errors"].value("unknown_key", 0ULL);
  }
  EXPECT_GE(unknown_key, 1U);
  node.stop();
}

// One worker, one key at 200 requests per second, asked as fast as four clients can for 3 s.
// The limit is a ceiling: over 3 s the key is served at most 10 % above its rate (plus the
// bucket's 100 ms burst), whatever the scheduler does. When the clients offered twice the rate
// (served + refused, measured), some requests were refused, and some served. No floor on the
// rate served is asserted: the bucket keeps at most 100 ms of tokens, so a client or a flurryd
// descheduled for longer (seen at load 10 on 2 vCPUs: 153 a second served while 2,000 were
// offered) loses tokens without any fault; the rate served is printed for the reader.
TEST(Auth, RateLimitHoldsWithinTenPercent) {
  AuthNode node("optional", {"--workers", "1", "--init"});
  constexpr double limit = 200;
  const KeySpec key{3, 90, static_cast<std::uint32_t>(limit)};
  write_keys(node.key_file, {key});
  node.start();
  const auto before = node.ask({"stats"});
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  std::atomic<int> failures{0};
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      auto client = signed_client(node.address(), key);
      client::Error error;
      std::vector<std::uint64_t> ids;
      while (std::chrono::steady_clock::now() - start < 3s) {
        ids.clear();
        if (!client->get(1, ids, &error)) failures.fetch_add(1);
      }
    });
  }
  for (auto& thread : clients) thread.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto after = node.ask({"stats"});
  const auto served = (*node.key_stats(after, 3))["ids_issued"].get<std::uint64_t>() -
                      (*node.key_stats(before, 3))["ids_issued"].get<std::uint64_t>();
  const auto refused = (*node.key_stats(after, 3))["rejected"]["rate_limited"].get<std::uint64_t>() -
                       (*node.key_stats(before, 3))["rejected"]["rate_limited"].get<std::uint64_t>();
  const double rate = static_cast<double>(served) / seconds;
  const double offered = static_cast<double>(served + refused) / seconds;
  std::cout << "served " << served << " in " << seconds << " s: " << rate << " per second (limit " << limit
            << "), offered " << offered << " per second, " << failures.load() << " client calls gave up\n";
  EXPECT_LE(rate, limit * 1.1 + limit * 0.1 / seconds) << "above the key's rate";
  EXPECT_GT(served, 0U) << "nothing served to a key within its rate";
  if (offered >= 2 * limit) {
    EXPECT_GT(refused, 0U) << "offered twice the rate and nothing was refused";
  }
  node.stop();
}

TEST(Auth, RequiredRefusesUnsignedServesSignedAndListsNoSecret) {
  AuthNode node("required", {"--init"});
  const KeySpec key{4, 120};
  write_keys(node.key_file, {key});
  ASSERT_TRUE(node.daemon.spawn(node.flurryd, node.args(), node.state_dir + "/flurryd-0.log"));
  auto client = signed_client(node.address(), key);
  std::vector<std::uint64_t> ids;
  client::Error error;
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    served = client->get(10, ids, &error);
    if (!served) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(served) << error.message << "\n" << node.daemon.log();
  client::Options options;
  options.servers = {node.address()};
  options.timeout = 2000ms;  // the refusal must come within an attempt to be named
  auto plain = client::Client::create(options, &error);
  EXPECT_FALSE(plain->next(&error).has_value());
  EXPECT_NE(error.message.find("auth_required"), std::string::npos) << error.message;
  const nlohmann::json listed = node.ask({"keys", "list"});
  EXPECT_EQ(listed["keys"].size(), 1U);
  EXPECT_EQ(listed.dump().find(secret_hex(120)), std::string::npos) << "a secret was printed";
  EXPECT_EQ(listed.dump().find("secret"), std::string::npos);
  node.stop();
}

TEST(Auth, KeyFileOthersCanReadIsRefusedAtStart) {
  AuthNode node("optional", {"--init"});
  write_keys(node.key_file, {{5, 1}}, 0644);
  const auto run = testing::run_to_end(node.flurryd, node.args());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("chmod 600"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace flurry
