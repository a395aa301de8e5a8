// tests/integration/door_auth_test.cc — the front doors' credentials against a real flurryd
// (--auth required|optional with --resp-listen and --http-listen): a key's door password, made
// by the real `flurryctl keys hash-password`, used by the clients people have — redis-cli
// (AUTH name password, and AUTH name:password), hiredis (HELLO 3 AUTH), Python's redis package
// (username=, password=), curl (a bearer token, two requests on one connection) — and:
//
//   * without a credential, or with a wrong one, nothing is issued: -NOAUTH / -WRONGPASS, and
//     401 with WWW-Authenticate: Bearer;
//   * HTTP keep-alive verifies a token once per connection (the door's `logins` counter);
//   * a logged-in caller meets its key's batch_max (-NOPERM / 403) and rate_per_s (-TRYAGAIN /
//     429), counted in the key's counters of `flurryctl stats`;
//   * under optional, callers without a login are served; a key reload that changes the
//     password ends the sessions that logged in with the old one;
//   * the memcached door under required: memcached's ASCII login (a set carrying the name and
//     door password) through pymemcache; without it `CLIENT_ERROR unauthenticated`, a wrong one
//     closes the connection; the key's batch_max and sequences held there too;
//   * HTTPS with a certificate made by openssl, trusted by curl --cacert only;
//   * IDs from signed UDP, RESP and HTTP together: none twice.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "serving.h"
#include "tests/support/child_process.h"
#include "tests/support/ports.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;

constexpr const char* udp_secret = "000102030405060708090a0b0c0d0e0f";
constexpr const char* billing_password = "billing-door-password-0123";
constexpr const char* small_password = "small-door-password-45678";

std::vector<std::uint64_t> numbers(const std::string& text) {
  std::vector<std::uint64_t> out;
  std::string token;
  for (char c : text + " ") {
    if (c >= '0' && c <= '9') {
      token += c;
    } else if (!token.empty()) {
      if (token.size() >= 6) out.push_back(std::stoull(token));  // IDs, not counts or ports
      token.clear();
    }
  }
  return out;
}

// What follows curl -i's (last) header block; empty when there is none.
std::string body_of(const std::string& output) {
  const std::size_t end = output.rfind("\r\n\r\n");
  return end == std::string::npos ? std::string() : output.substr(end + 4);
}

std::size_t duplicates(std::vector<std::uint64_t> ids) {
  std::sort(ids.begin(), ids.end());
  return static_cast<std::size_t>(ids.end() - std::unique(ids.begin(), ids.end()));
}

// The real `flurryctl keys hash-password`, the password on its stdin.
std::string door_hash(const std::string& dir, const std::string& password) {
  const std::string input = dir + "/password.txt";
  std::ofstream(input) << password << "\n";
  const testing::RunResult made =
      testing::run_to_end(testing::env_or_die("FLURRYCTL"), {"keys", "hash-password"}, 30'000, input);
  EXPECT_EQ(made.exit_code, 0) << made.output;
  std::remove(input.c_str());
  const std::size_t start = made.output.find("door_password_hash = \"");
  EXPECT_NE(start, std::string::npos) << made.output;
  return start == std::string::npos ? std::string()
                                    : made.output.substr(start, made.output.find('\n', start) - start);
}

struct DoorNode : testing::LocalFlurryd {
  std::uint16_t resp_port = testing::free_tcp_port();
  std::uint16_t http_port = testing::free_tcp_port();
  std::uint16_t memcache_port = 0;  // with_memcache(): the memcached door too
  std::string key_file = state_dir + "/keys.toml";

  // `base_dir`: where the state dir is made (/tmp, or /dev/shm: see the redis-benchmark test).
  explicit DoorNode(const std::string& mode, const std::string& base_dir = "/tmp")
      : LocalFlurryd("flurry-door-", {"--init", "--workers", "2", "--lead-ms", "1000", "--auth", mode},
                     base_dir) {
    flags.insert(flags.end(), {"--key-file", key_file});
  }
  std::vector<std::string> tls_flags;  // --http-tls-cert and --http-tls-key, when HTTPS
  std::vector<std::string> door_flags() const {
    std::vector<std::string> flags = {"--resp-listen", "127.0.0.1:" + std::to_string(resp_port),
                                      "--http-listen", "127.0.0.1:" + std::to_string(http_port)};
    flags.insert(flags.end(), tls_flags.begin(), tls_flags.end());
    if (memcache_port != 0)
      flags.insert(flags.end(), {"--memcache-listen", "127.0.0.1:" + std::to_string(memcache_port)});
    return flags;
  }
  void with_memcache() { memcache_port = testing::free_tcp_port(); }
  // billing: a door password, every opcode; small: a door password, batch_max 5 and 5 requests
  // a second; udp: no door password. `billing_line`: billing's door_password_hash line.
  void write_keys(const std::string& billing_line, const std::string& small_line) const {
    const std::string temporary = key_file + ".new";
    {
      std::ofstream file(temporary);
      file << "[[key]]\nname = \"billing\"\nid = 7\nsecret = \"" << udp_secret
           << "\"\nopcodes = [\"get_ids\", \"info\", \"get_seq\"]\n"
           << billing_line << "\n\n"
           << "[[key]]\nname = \"small\"\nid = 8\nsecret = \"" << udp_secret
           << "\"\nbatch_max = 5\nrate_per_s = 5\n"
           << small_line << "\n\n"
           << "[[key]]\nname = \"udp\"\nid = 9\nsecret = \"" << udp_secret << "\"\n";
    }
    ::chmod(temporary.c_str(), 0600);
    ASSERT_EQ(std::rename(temporary.c_str(), key_file.c_str()), 0);
  }
  // Started, and serving signed UDP for key 7 (an unsigned probe is refused under required).
  void start_signed(client::Client& signed_client) {
    ASSERT_TRUE(daemon.spawn(flurryd, args(door_flags()), state_dir + "/flurryd-0.log"));
    std::vector<std::uint64_t> ids;
    client::Error error;
    bool served = false;
    for (int i = 0; i < 600 && !served && daemon.running(); ++i) {
      served = signed_client.get(1, ids, &error);
      if (!served) std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(served) << error.message << "\n" << daemon.log();
  }
  testing::RunResult redis_cli(std::vector<std::string> args) const {
    args.insert(args.begin(), {"-p", std::to_string(resp_port), "--no-auth-warning"});
    return testing::run_to_end("/usr/bin/redis-cli", args, 20'000);
  }
  testing::RunResult curl(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--http1.1", "-sS", "-i", "--max-time", "20"});
    return testing::run_to_end("/usr/bin/curl", args, 30'000);
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(http_port) + path;
  }
  nlohmann::json stats() const {
    const auto reply = testing::run_to_end(testing::env_or_die("FLURRYCTL"),
                                           {"--control-socket", control_socket(), "--json", "stats"});
    EXPECT_EQ(reply.exit_code, 0) << reply.output;
    return nlohmann::json::parse(reply.output, nullptr, false);
  }
  nlohmann::json key_stats(const std::string& name) const {
    const nlohmann::json all = stats();  // kept: a range-for over stats()["keys"] outlives stats()'s value
    for (const auto& key : all["keys"]) {
      if (key.value("name", "") == name) return key;
    }
    return nlohmann::json::object();
  }
};

std::unique_ptr<client::Client> signed_client(const std::string& address) {
  client::Options options;
  options.servers = {address};
  options.timeout = 2000ms;
  client::Key key;
  key.id = 7;
  for (int i = 0; i < 16; ++i) key.secret[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
  options.key = key;
  client::Error error;
  auto client = client::Client::create(options, &error);
  EXPECT_TRUE(client) << error.message;
  return client;
}

// A hiredis reply as text ("ERR-PREFIX message", an integer, or the array's integers
// space-separated), freed here; "" for none (the connection failed).
std::string reply_text(redisReply* reply) {
  if (reply == nullptr) return "";
  std::string text;
  if (reply->type == REDIS_REPLY_ERROR || reply->type == REDIS_REPLY_STATUS) text = reply->str;
  if (reply->type == REDIS_REPLY_INTEGER) text = std::to_string(reply->integer);
  if (reply->type == REDIS_REPLY_ARRAY) {
    for (std::size_t i = 0; i < reply->elements; ++i) {
      const redisReply* element = reply->element[i];
      if (element->type == REDIS_REPLY_INTEGER) text += std::to_string(element->integer) + " ";
      if (element->type == REDIS_REPLY_STRING) text += std::string(element->str, element->len) + " ";
    }
  }
  freeReplyObject(reply);
  return text;
}

// hiredis, pipelined: `times` of the same command written at once, then their replies in order
// (fewer when the connection failed).
std::vector<std::string> hiredis_pipelined(redisContext* context, const std::vector<std::string>& args,
                                           int times) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const std::string& arg : args) {
    argv.push_back(arg.c_str());
    lengths.push_back(arg.size());
  }
  for (int i = 0; i < times; ++i) {
    redisAppendCommandArgv(context, static_cast<int>(argv.size()), argv.data(), lengths.data());
  }
  std::vector<std::string> replies;
  for (int i = 0; i < times; ++i) {
    void* reply = nullptr;
    if (redisGetReply(context, &reply) != REDIS_OK) break;
    replies.push_back(reply_text(static_cast<redisReply*>(reply)));
  }
  return replies;
}

// hiredis: one command's reply as text; "" when the connection failed.
std::string hiredis_reply(redisContext* context, const std::vector<std::string>& args) {
  const std::vector<std::string> replies = hiredis_pipelined(context, args, 1);
  return replies.empty() ? "" : replies[0];
}

TEST(DoorAuth, RequiredServesTheDoorPasswordAndRefusesEveryoneElse) {
  DoorNode node("required");
  node.write_keys(door_hash(node.state_dir, billing_password), door_hash(node.state_dir, small_password));
  auto udp = signed_client(node.address());
  ASSERT_NO_FATAL_FAILURE(node.start_signed(*udp));
  std::vector<std::uint64_t> all;  // every ID issued to this test, from every door
  std::size_t billing_door_ids = 0;
  client::Error error;
  ASSERT_TRUE(udp->get(100, all, &error)) << error.message;

  // RESP, without a login or with a wrong one: nothing issued.
  testing::RunResult run = node.redis_cli({"FLURRY.ID", "3"});
  EXPECT_NE(run.output.find("NOAUTH"), std::string::npos) << run.output;
  EXPECT_TRUE(numbers(run.output).empty()) << run.output;
  run = node.redis_cli({"PING"});
  EXPECT_NE(run.output.find("NOAUTH"), std::string::npos) << "every command needs a login: " << run.output;
  run = node.redis_cli({"--user", "billing", "--pass", "wrong-password-123456", "FLURRY.ID", "3"});
  EXPECT_NE(run.output.find("WRONGPASS"), std::string::npos) << run.output;
  EXPECT_TRUE(numbers(run.output).empty()) << run.output;
  run = node.redis_cli({"--user", "udp", "--pass", billing_password, "FLURRY.ID", "3"});
  EXPECT_NE(run.output.find("WRONGPASS"), std::string::npos)
      << "a key without a door password: " << run.output;

  // redis-cli: AUTH name password, and the one-argument AUTH name:password.
  run = node.redis_cli({"--user", "billing", "--pass", billing_password, "FLURRY.ID", "3"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  std::vector<std::uint64_t> got = numbers(run.output);
  EXPECT_EQ(got.size(), 3U) << run.output;
  billing_door_ids += got.size();
  all.insert(all.end(), got.begin(), got.end());
  run = node.redis_cli({"-a", std::string("billing:") + billing_password, "FLURRY.ID", "4"});
  got = numbers(run.output);
  EXPECT_EQ(got.size(), 4U) << run.output;
  billing_door_ids += got.size();
  all.insert(all.end(), got.begin(), got.end());

  // hiredis (RESP2): HELLO 2 AUTH, then IDs on that connection; HELLO without AUTH is refused.
  redisContext* context = redisConnect("127.0.0.1", node.resp_port);
  ASSERT_TRUE(context != nullptr && context->err == 0);
  EXPECT_EQ(hiredis_reply(context, {"HELLO", "2"}).rfind("NOAUTH", 0), 0U) << "HELLO without AUTH";
  EXPECT_NE(hiredis_reply(context, {"HELLO", "2", "AUTH", "billing", billing_password}).find("flurry"),
            std::string::npos);
  got = numbers(hiredis_reply(context, {"FLURRY.ID", "5"}));
  EXPECT_EQ(got.size(), 5U);
  billing_door_ids += got.size();
  all.insert(all.end(), got.begin(), got.end());
  redisFree(context);
  // RESP3's login, HELLO 3 AUTH, spoken on a plain socket (Debian's hiredis 0.14 has no
  // RESP3): the answer is a RESP3 map, then FLURRY.ID 2 on the same connection.
  const std::string resp3 =
      "import socket, sys, time\n"
      "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)\n"
      "def command(*args):\n"
      "    s.sendall(('*%d\\r\\n' % len(args) + ''.join('$%d\\r\\n%s\\r\\n' % (len(a), a) for a in "
      "args)).encode())\n"
      "command('HELLO', '3', 'AUTH', 'billing', sys.argv[2])\n"
      "command('FLURRY.ID', '2')\n"
      "data = b''\n"
      "deadline = time.time() + 10\n"
      "while data.count(b'\\r\\n:') < 4 and time.time() < deadline:\n"  // id, proto, then the two IDs
      "    chunk = s.recv(4096)\n"
      "    if not chunk: break\n"
      "    data += chunk\n"
      "print(data.decode())\n";
  run = testing::run_to_end("/usr/bin/python3",
                            {"-c", resp3, std::to_string(node.resp_port), billing_password}, 30'000);
  EXPECT_EQ(run.output.rfind("%", 0), 0U) << "a RESP3 map: " << run.output;
  ASSERT_NE(run.output.find("modules"), std::string::npos) << run.output;
  got = numbers(run.output.substr(run.output.find("modules")));
  EXPECT_EQ(got.size(), 2U) << run.output;
  billing_door_ids += got.size();
  all.insert(all.end(), got.begin(), got.end());
  // batch_max and rate_per_s of another key, on a connection of its own.
  context = redisConnect("127.0.0.1", node.resp_port);
  ASSERT_TRUE(context != nullptr && context->err == 0);
  EXPECT_EQ(hiredis_reply(context, {"AUTH", "small", small_password}), "OK");
  EXPECT_EQ(hiredis_reply(context, {"FLURRY.ID", "6"}).rfind("NOPERM", 0), 0U) << "above batch_max 5";
  EXPECT_EQ(hiredis_reply(context, {"INCR", "orders"}).rfind("NOPERM", 0), 0U) << "no get_seq";
  int limited = 0;
  // 5 a second, a bucket of one: of two commands written at once (25 times), the second finds
  // the bucket the first emptied, whatever the machine's speed.
  std::vector<std::string> replies;
  for (int i = 0; i < 25; ++i) {
    for (std::string& reply : hiredis_pipelined(context, {"FLURRY.ID", "1"}, 2))
      replies.push_back(std::move(reply));
  }
  EXPECT_EQ(replies.size(), 50U);
  for (const std::string& reply : replies) {
    if (reply.rfind("TRYAGAIN", 0) == 0) {
      ++limited;
      EXPECT_NE(reply.find("rate_per_s"), std::string::npos) << reply;
    } else {
      got = numbers(reply);
      all.insert(all.end(), got.begin(), got.end());
    }
  }
  EXPECT_GT(limited, 0);
  redisFree(context);
  context = redisConnect("127.0.0.1", node.resp_port);
  ASSERT_TRUE(context != nullptr && context->err == 0);
  EXPECT_EQ(hiredis_reply(context, {"AUTH", "billing", "wrong-password-123456"}).rfind("WRONGPASS", 0), 0U);
  EXPECT_EQ(hiredis_reply(context, {"FLURRY.ID", "1"}), "") << "a failed login closes the connection";
  redisFree(context);

  // Python's redis package: username and password (AUTH name password on connect).
  const std::string script =
      "import redis, sys\n"
      "port, password = int(sys.argv[1]), sys.argv[2]\n"
      "r = redis.Redis(host='127.0.0.1', port=port, username='billing', password=password)\n"
      "print(' '.join(str(i) for i in r.execute_command('FLURRY.ID', 6)))\n"
      "try:\n"
      "    redis.Redis(host='127.0.0.1', port=port, username='billing', "
      "password='nope-nope-nope-nope').ping()\n"
      "    print('wrong password served')\n"
      "except redis.exceptions.RedisError as e:\n"  // redis-py 4 raises WRONGPASS as ResponseError
      "    print('refused:', e)\n"
      "try:\n"
      "    redis.Redis(host='127.0.0.1', port=port).execute_command('FLURRY.ID')\n"
      "    print('no password served')\n"
      "except redis.exceptions.AuthenticationError as e:\n"  // NOAUTH
      "    print('refused:', e)\n";
  run = testing::run_to_end("/usr/bin/python3",
                            {"-c", script, std::to_string(node.resp_port), billing_password}, 30'000);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("served"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("refused: WRONGPASS"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("refused: Authentication required"), std::string::npos) << run.output;
  got = numbers(run.output.substr(0, run.output.find('\n')));
  EXPECT_EQ(got.size(), 6U) << run.output;
  billing_door_ids += got.size();
  all.insert(all.end(), got.begin(), got.end());

  // HTTP: no token, a wrong one, a malformed header: 401 with the Bearer challenge.
  run = node.curl({node.url("/v1/ids?n=3")});
  EXPECT_NE(run.output.find("HTTP/1.1 401"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("WWW-Authenticate: Bearer realm=\"flurry\""), std::string::npos) << run.output;
  EXPECT_TRUE(numbers(body_of(run.output)).empty()) << run.output;
  run = node.curl({"-H", "Authorization: Bearer billing:wrong-password-123456", node.url("/v1/ids?n=3")});
  EXPECT_NE(run.output.find("HTTP/1.1 401"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("invalid_token"), std::string::npos) << run.output;
  run = node.curl({"-H", "Authorization: Basic YmlsbGluZzp4", node.url("/v1/info")});
  EXPECT_NE(run.output.find("HTTP/1.1 401"), std::string::npos) << run.output;
  // The token, two requests on one connection: both served, the token verified once.
  const std::uint64_t logins_before = node.stats()["front_ends"]["http"].value("logins", 0ULL);
  run = node.curl({"-H", std::string("Authorization: Bearer billing:") + billing_password,
                   node.url("/v1/ids?n=5&format=text"), node.url("/v1/ids?n=7&format=text")});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  std::size_t ok = 0;
  for (std::size_t at = run.output.find("HTTP/1.1 200"); at != std::string::npos;
       at = run.output.find("HTTP/1.1 200", at + 1))
    ++ok;
  EXPECT_EQ(ok, 2U) << run.output;
  got = numbers(run.output);
  EXPECT_EQ(got.size(), 12U) << run.output;
  billing_door_ids += got.size();
  all.insert(all.end(), got.begin(), got.end());
  EXPECT_EQ(node.stats()["front_ends"]["http"].value("logins", 0ULL), logins_before + 1)
      << "keep-alive verified the token again";
  // Another key's limits through HTTP: 403 above batch_max.
  run = node.curl(
      {"-H", std::string("Authorization: Bearer small:") + small_password, node.url("/v1/ids?n=6")});
  EXPECT_NE(run.output.find("HTTP/1.1 403"), std::string::npos) << run.output;

  // Counted per key, as signed UDP is.
  const nlohmann::json billing = node.key_stats("billing");
  EXPECT_GE(billing.value("ids_issued", 0ULL), billing_door_ids + 100)
      << "UDP's and the doors': " << billing.dump();
  EXPECT_GT(billing["rejected"].value("bad_mac", 0ULL), 0U) << "wrong door passwords: " << billing.dump();
  const nlohmann::json small = node.key_stats("small");
  EXPECT_GE(small["rejected"].value("not_permitted", 0ULL), 3U) << small.dump();
  EXPECT_GT(small["rejected"].value("rate_limited", 0ULL), 0U) << small.dump();

  EXPECT_EQ(duplicates(all), 0U) << all.size() << " IDs from UDP, RESP and HTTP";
  node.stop();
}

TEST(DoorAuth, OptionalServesCallersWithoutLoginAndAPasswordChangeEndsSessions) {
  DoorNode node("optional");
  node.write_keys(door_hash(node.state_dir, billing_password), "");
  auto udp = signed_client(node.address());
  ASSERT_NO_FATAL_FAILURE(node.start_signed(*udp));
  std::vector<std::uint64_t> all;
  client::Error error;
  ASSERT_TRUE(udp->get(50, all, &error)) << error.message;

  // No login: served, as unsigned UDP is under optional.
  testing::RunResult run = node.redis_cli({"FLURRY.ID", "3"});
  std::vector<std::uint64_t> got = numbers(run.output);
  EXPECT_EQ(got.size(), 3U) << run.output;
  all.insert(all.end(), got.begin(), got.end());
  run = node.curl({node.url("/v1/ids?n=2&format=text")});
  got = numbers(body_of(run.output));
  EXPECT_EQ(got.size(), 2U) << run.output;
  all.insert(all.end(), got.begin(), got.end());
  // A wrong password is still refused (and ends that connection).
  run = node.redis_cli({"--user", "billing", "--pass", "wrong-password-123456", "FLURRY.ID", "3"});
  EXPECT_NE(run.output.find("WRONGPASS"), std::string::npos) << run.output;

  // A logged-in connection; then the key file changes billing's door password and is reloaded.
  redisContext* context = redisConnect("127.0.0.1", node.resp_port);
  ASSERT_TRUE(context != nullptr && context->err == 0);
  EXPECT_EQ(hiredis_reply(context, {"AUTH", std::string("billing:") + billing_password}), "OK");
  got = numbers(hiredis_reply(context, {"FLURRY.ID", "4"}));
  EXPECT_EQ(got.size(), 4U);
  all.insert(all.end(), got.begin(), got.end());
  const std::string new_password = "billing-new-password-98765";
  node.write_keys(door_hash(node.state_dir, new_password), "");
  const auto reload = testing::run_to_end(testing::env_or_die("FLURRYCTL"),
                                          {"--control-socket", node.control_socket(), "keys", "reload"});
  ASSERT_EQ(reload.exit_code, 0) << reload.output;
  const std::string ended = hiredis_reply(context, {"FLURRY.ID", "4"});
  EXPECT_EQ(ended.rfind("NOAUTH", 0), 0U) << ended;
  EXPECT_NE(ended.find("changed"), std::string::npos) << ended;
  EXPECT_EQ(hiredis_reply(context, {"AUTH", "billing", billing_password}).rfind("WRONGPASS", 0), 0U)
      << "the old password after the reload";
  redisFree(context);
  run = node.redis_cli({"--user", "billing", "--pass", new_password, "FLURRY.ID", "2"});
  got = numbers(run.output);
  EXPECT_EQ(got.size(), 2U) << run.output;
  all.insert(all.end(), got.begin(), got.end());
  run =
      node.curl({"-H", "Authorization: Bearer billing:" + new_password, node.url("/v1/ids?n=3&format=text")});
  got = numbers(body_of(run.output));
  EXPECT_EQ(got.size(), 3U) << run.output;
  all.insert(all.end(), got.begin(), got.end());

  EXPECT_EQ(duplicates(all), 0U) << all.size() << " IDs";
  node.stop();
}

// What a Redis user runs first: `redis-benchmark -t incr -P 16` (INCR counter:__rand_int__, a
// name the door creates with --seq-auto-create monotonic) and an INCRBY, pipelined, through a
// door that needs a login (--user, -a) and through one that does not; without the login under
// required nothing is counted. The counter after N INCRs answers N + 1 to the next one: every
// INCR of the benchmark was served, once.
TEST(DoorAuth, RedisBenchmarkIncrPipelinedWithAndWithoutTheDoorPassword) {
  for (const std::string mode : {"required", "optional"}) {
    SCOPED_TRACE(mode);
    // The state dir on tmpfs: this test is about the door's protocol under redis-benchmark,
    // which stops at its first error. A sequence's next block becomes durable with an fdatasync
    // on flurry-seq's thread, and a door waits for it (frontend.h sequence_wait) before
    // TRYAGAIN: on a disk stalled longer than that by other load (the sanitizer trees' builds in
    // CI), the benchmark stopped (fresh-clone CI of 4ab8114). Disk stalls are the disk_stall and
    // durability tests' subject, not this one's. And the door waits 5 s, not the default 200 ms:
    // flurry-seq's thread (the next sub-block, every 1 ms) starved that long by a loaded
    // machine is not what this test is about either.
    DoorNode node(mode, "/dev/shm");
    node.flags.insert(node.flags.end(),
                      {"--seq-auto-create", "monotonic", "--door-sequence-wait-ms", "5000"});
    node.write_keys(door_hash(node.state_dir, billing_password) + "\nsequences = [\"*\"]", "");
    auto udp = signed_client(node.address());
    ASSERT_NO_FATAL_FAILURE(node.start_signed(*udp));
    const std::vector<std::string> login = {"--user", "billing", "-a", billing_password};
    const auto benchmark = [&](bool with_login, std::vector<std::string> args) {
      args.insert(args.begin(), {"-p", std::to_string(node.resp_port), "-q", "-P", "16", "-c", "4"});
      if (with_login) args.insert(args.begin(), login.begin(), login.end());
      return testing::run_to_end("/usr/bin/redis-benchmark", args, 120'000);
    };
    const auto incr = [&](const std::string& name) {
      std::vector<std::string> args = login;
      args.insert(args.end(), {"INCR", name});
      return node.redis_cli(args).output;
    };
    if (mode == "required") {
      const testing::RunResult refused = benchmark(false, {"-t", "incr", "-n", "200"});
      EXPECT_NE(refused.output.find("NOAUTH"), std::string::npos) << refused.output;
    }
    const bool with_login = mode == "required";
    testing::RunResult run = benchmark(with_login, {"-t", "incr", "-n", "20000"});
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("INCR: "), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("Error"), std::string::npos) << run.output;
    EXPECT_EQ(incr("counter:__rand_int__"), "20001\n") << "every INCR of the benchmark, none refused";
    run = benchmark(with_login, {"-n", "2000", "INCRBY", "tickets", "5"});
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(run.output.find("Error"), std::string::npos) << run.output;
    EXPECT_EQ(incr("tickets"), "10001\n") << "2000 runs of 5";
    if (mode == "required") {  // each of the benchmark's 4 connections logged in, twice over
      EXPECT_GE(node.stats()["front_ends"]["resp"].value("logins", 0ULL), 8U);
    }
    node.stop();
  }
}

// HTTPS (--http-tls-cert, --http-tls-key) with a certificate the test makes with openssl: curl
// trusts it with --cacert only, the bearer token crosses in TLS, keep-alive works over it; a key
// file others can read, or a certificate without its key, stops the start (exit 2).
TEST(DoorAuth, HttpsServesWithTheCertificateAndItsPrivateKey) {
  DoorNode node("required");
  const std::string cert = node.state_dir + "/door-cert.pem";
  const std::string key = node.state_dir + "/door-key.pem";
  const testing::RunResult made = testing::run_to_end(
      "/usr/bin/openssl",
      {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
       "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"},
      60'000);
  ASSERT_EQ(made.exit_code, 0) << "openssl (apt-get install -y openssl, scripts/setup):\n" << made.output;
  ASSERT_EQ(::chmod(key.c_str(), 0600), 0);
  node.write_keys(door_hash(node.state_dir, billing_password), "");
  node.tls_flags = {"--http-tls-cert", cert, "--http-tls-key", key};
  auto udp = signed_client(node.address());
  ASSERT_NO_FATAL_FAILURE(node.start_signed(*udp));
  // The doors are logged after the workers serve (a slow sanitizer build: seconds later). The
  // wait ends as soon as the line is there; its 60 s bound only keeps a broken node from hanging
  // the test (a healthy one logs within seconds even under ASan on a loaded 2-CPU machine).
  for (int i = 0; i < 1200 && node.daemon.log().find("HTTPS on tcp") == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_NE(node.daemon.log().find("HTTPS on tcp"), std::string::npos) << node.daemon.log();
  std::vector<std::uint64_t> all;
  client::Error error;
  ASSERT_TRUE(udp->get(20, all, &error)) << error.message;
  const std::string https = "https://127.0.0.1:" + std::to_string(node.http_port);
  const std::string bearer = std::string("Authorization: Bearer billing:") + billing_password;

  // Trusted through --cacert: two requests on one TLS connection, one login.
  testing::RunResult run = node.curl(
      {"--cacert", cert, "-H", bearer, https + "/v1/ids?n=3&format=text", https + "/v1/ids?n=4&format=text"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  std::size_t ok = 0;
  for (std::size_t at = run.output.find("HTTP/1.1 200"); at != std::string::npos;
       at = run.output.find("HTTP/1.1 200", at + 1))
    ++ok;
  EXPECT_EQ(ok, 2U) << run.output;
  std::vector<std::uint64_t> got = numbers(run.output);
  EXPECT_EQ(got.size(), 7U) << run.output;
  all.insert(all.end(), got.begin(), got.end());
  EXPECT_EQ(node.stats()["front_ends"]["http"].value("logins", 0ULL), 1U);
  // Without the token: 401 over TLS too.
  run = node.curl({"--cacert", cert, https + "/v1/ids"});
  EXPECT_NE(run.output.find("HTTP/1.1 401"), std::string::npos) << run.output;
  // Without --cacert curl does not trust it; plain HTTP to the TLS port gets no answer.
  run = node.curl({"-H", bearer, https + "/v1/ids?n=3"});
  EXPECT_EQ(run.exit_code, 60) << "curl: the peer's certificate cannot be authenticated: " << run.output;
  EXPECT_TRUE(numbers(run.output).empty()) << run.output;
  run = node.curl({"-H", bearer, "http://127.0.0.1:" + std::to_string(node.http_port) + "/v1/ids?n=3"});
  EXPECT_EQ(run.output.find("HTTP/1.1 200"), std::string::npos) << run.output;
  EXPECT_EQ(duplicates(all), 0U) << all.size() << " IDs";
  node.stop();

  // The key readable by others, or a certificate without its key: refused at start.
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  run = testing::run_to_end(node.flurryd, node.args(node.door_flags()), 30'000);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("chmod 600 " + key), std::string::npos) << run.output;
  node.tls_flags = {"--http-tls-cert", cert};
  run = testing::run_to_end(node.flurryd, node.args(node.door_flags()), 30'000);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--http-tls-key come together"), std::string::npos) << run.output;
}

// The memcached door under --auth required, through Debian's python3-pymemcache: a client
// library without a login of its own logs in with one set (memcached's ASCII authentication,
// as memcached -Y takes it), then gets IDs and sequence numbers as its key allows.
TEST(DoorAuth, RequiredMemcachedDoorLogsInWithASet) {
  DoorNode node("required");
  node.with_memcache();
  node.flags.insert(node.flags.end(), {"--seq-auto-create", "monotonic"});
  node.write_keys(door_hash(node.state_dir, billing_password) + "\nsequences = [\"*\"]",
                  door_hash(node.state_dir, small_password));
  auto udp = signed_client(node.address());
  ASSERT_NO_FATAL_FAILURE(node.start_signed(*udp));
  std::vector<std::uint64_t> all;
  client::Error error;
  ASSERT_TRUE(udp->get(20, all, &error)) << error.message;

  const std::string script =
      "import sys\n"
      "from pymemcache.client.base import Client\n"
      "import time\n"
      "from pymemcache.exceptions import MemcacheClientError, MemcacheError, MemcacheServerError\n"
      "port, billing, small = int(sys.argv[1]), sys.argv[2], sys.argv[3]\n"
      "def client():\n"
      "    return Client(('127.0.0.1', port), connect_timeout=10, timeout=10)\n"
      // A sequence's next block may not have reached the door yet (it becomes durable first: on
      // a loaded host longer than the door waits, seen under TSan in a flake hunt): the answer
      // says "retry after N us", and a client asks again, as here (bounded).
      "def incr(c, name, n):\n"
      "    end = time.monotonic() + 30\n"
      "    while True:\n"
      "        try:\n"
      "            return c.incr(name, n)\n"
      "        except MemcacheServerError as e:\n"
      "            if 'retry after' not in str(e) or time.monotonic() > end:\n"
      "                raise\n"
      "            time.sleep(0.01)\n"
      "c = client()\n"
      "try:\n"
      "    print('no login served:', c.get('id'))\n"
      "except MemcacheClientError as e:\n"
      "    print('refused:', e)\n"
      "c = client()\n"
      "try:\n"
      "    c.set('auth', 'billing wrong-password-123456', noreply=False)\n"
      "    print('wrong password served')\n"
      "except MemcacheClientError as e:\n"
      "    print('refused:', e)\n"
      "c = client()\n"
      "print('login', c.set('auth', 'billing ' + billing, noreply=False))\n"
      "print('ids', ' '.join(v.decode() for v in c.get_many(['id', 'a', 'b']).values()))\n"
      "print('incr', incr(c, 'tickets', 5))\n"
      "print('incr', incr(c, 'tickets', 5))\n"
      "s = client()\n"
      "s.set('auth', 'small ' + small, noreply=False)\n"
      "try:\n"
      "    s.get_many(['k%d' % i for i in range(6)])\n"
      "    print('above batch_max served')\n"
      "except MemcacheClientError as e:\n"
      "    print('refused:', e)\n";
  const testing::RunResult run = testing::run_to_end(
      "/usr/bin/python3",
      {"-c", script, std::to_string(node.memcache_port), billing_password, small_password}, 60'000);
  ASSERT_EQ(run.exit_code, 0) << "python3-pymemcache:\n" << run.output;
  EXPECT_EQ(run.output.find("served"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("unauthenticated: log in first"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("authentication failure: wrong key name or door password"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("key 'small' may not"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("login True"), std::string::npos) << run.output;
  const std::size_t ids_at = run.output.find("ids ");
  ASSERT_NE(ids_at, std::string::npos) << run.output;
  std::vector<std::uint64_t> got = numbers(run.output.substr(ids_at, run.output.find('\n', ids_at) - ids_at));
  EXPECT_EQ(got.size(), 3U) << run.output;
  all.insert(all.end(), got.begin(), got.end());
  EXPECT_NE(run.output.find("incr 5\nincr 10\n"), std::string::npos) << "two runs of 5: " << run.output;

  // Counted: the logins, the refusals, and billing's IDs in its key counters.
  const nlohmann::json door = node.stats()["front_ends"]["memcache"];
  EXPECT_GE(door.value("logins", 0ULL), 2U) << door.dump();
  EXPECT_GE(door.value("login_failed", 0ULL), 1U) << door.dump();
  EXPECT_GE(door.value("answered_login_needed", 0ULL), 1U) << door.dump();
  EXPECT_GE(door.value("answered_not_permitted", 0ULL), 1U) << door.dump();
  EXPECT_GE(node.key_stats("billing").value("ids_issued", 0ULL), 20U + 3U + 10U);
  EXPECT_EQ(duplicates(all), 0U) << all.size() << " IDs from UDP and memcached";
  node.stop();
}

}  // namespace
}  // namespace flurry
