// tests/integration/front_ends_test.cc — the Redis-protocol and HTTP front ends of a real
// flurryd (--resp-listen, --http-listen), driven by the clients users already have: the real
// redis-cli, hiredis (pipelined, several connections), Python's redis package, and libcurl.
//
//   * every command and path answers as documented, errors included;
//   * named sequences through both doors (INCR, INCRBY, FLURRY.SEQ, GET; /v1/seq, Leaf's
//     segment path), with the UDP GET_SEQ of the client library: no number twice, an INCRBY's
//     run all its own, unknown names refused saying how to create them;
//   * HTTP keep-alive: several answers on one connection;
//   * IDs from RESP, HTTP and the UDP workers together are all distinct (each front end owns
//     its own core slice);
//   * overload answers TRYAGAIN / 503 + Retry-After, never a reused ID;
//   * kill -9 under RESP and HTTP load, restart on the same state dir: every ID of both runs
//     is distinct;
//   * a taken front-end port stops flurryd at start, naming the flag.
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "client/client.h"
#include "control/control_server.h"
#include "serving.h"
#include "tests/support/child_process.h"
#include "tests/support/ports.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;

struct FrontEnds : testing::LocalFlurryd {
  std::uint16_t resp_port = testing::free_tcp_port();
  std::uint16_t http_port = testing::free_tcp_port();

  explicit FrontEnds(std::vector<std::string> flags = {"--workers", "2", "--lead-ms", "1000"})
      : LocalFlurryd("flurry-fe-", std::move(flags)) {}

  void start() {
    std::vector<std::string> extra = {"--resp-listen", "127.0.0.1:" + std::to_string(resp_port),
                                      "--http-listen", "127.0.0.1:" + std::to_string(http_port)};
    if (starts == 0) extra.push_back("--init");
    LocalFlurryd::start(extra);
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(http_port) + path;
  }
  // flurryctl seq create NAME [--mode MODE], through the control socket; again while the
  // sequence store is busy (a reservation's disk write held it past command_wait: a busy disk
  // on a loaded machine, nothing wrong; the create was not carried out), bounded.
  void create_sequence(const std::string& name, const std::string& mode = "segment") const {
    Result<nlohmann::json> reply = Error{"not asked"};
    for (int attempt = 0; attempt < 300; ++attempt) {
      reply = control::control_request_object(
          control_socket(), {{"cmd", "seq"}, {"op", "create"}, {"name", name}, {"mode", mode}});
      if (!reply.ok() || reply->value("error", std::string()).find("is busy") == std::string::npos) break;
      std::this_thread::sleep_for(200ms);
    }
    ASSERT_TRUE(reply.ok()) << reply.message();
    ASSERT_TRUE(reply->value("ok", false)) << reply->dump();
  }
};

struct HttpAnswer {
  long status = 0;
  std::string body;
  std::string headers;
};

std::size_t append(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

HttpAnswer http(const std::string& url, const char* method = "GET") {
  static const CURLcode init = curl_global_init(CURL_GLOBAL_DEFAULT);
  (void)init;
  HttpAnswer answer;
  CURL* handle = curl_easy_init();
  curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
  curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, 20000L);  // a bound for a lost answer, not a timing
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &append);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &answer.body);
  curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, &append);
  curl_easy_setopt(handle, CURLOPT_HEADERDATA, &answer.headers);
  if (curl_easy_perform(handle) == CURLE_OK)
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &answer.status);
  curl_easy_cleanup(handle);
  return answer;
}

// GET `url` again after 1 ms while it answers 503 for the ceiling (at most 10,000 times).
HttpAnswer http_retrying(const std::string& url) {
  HttpAnswer answer;
  for (int attempt = 0; attempt < 10'000; ++attempt) {
    answer = http(url);
    if (answer.status != 503 || answer.headers.find("Retry-After") == std::string::npos) break;
    std::this_thread::sleep_for(1ms);
  }
  return answer;
}

std::vector<std::uint64_t> numbers(const std::string& text) {
  std::vector<std::uint64_t> out;
  std::string token;
  for (char c : text + " ") {
    if (c >= '0' && c <= '9') {
      token += c;
    } else if (!token.empty()) {
      out.push_back(std::stoull(token));
      token.clear();
    }
  }
  return out;
}

std::size_t duplicates(std::vector<std::uint64_t> ids) {
  std::sort(ids.begin(), ids.end());
  return static_cast<std::size_t>(ids.end() - std::unique(ids.begin(), ids.end()));
}

// `commands` FLURRY.ID `n` pipelined on one hiredis connection, `window` at a time. Appends
// the IDs. With `retry`, a TRYAGAIN is asked again after 1 ms (at most 10,000 times), as a
// client would: right after a start, and under overload, the ceiling answers TRYAGAIN until
// time catches up. Returns the number of error replies left (without retry: TRYAGAIN too),
// -1 when the connection failed.
long pipeline(std::uint16_t port, int commands, int n, int window, std::vector<std::uint64_t>* ids,
              bool retry = true) {
  redisContext* context = redisConnect("127.0.0.1", port);
  if (context == nullptr || context->err != 0) return -1;
  long errors = 0;
  int retries_left = 10'000;
  int to_send = commands;
  while (to_send > 0) {
    const int batch = std::min(window, to_send);
    to_send -= batch;
    for (int i = 0; i < batch; ++i) redisAppendCommand(context, "FLURRY.ID %d", n);
    for (int i = 0; i < batch; ++i) {
      void* raw = nullptr;
      if (redisGetReply(context, &raw) != REDIS_OK || raw == nullptr) {
        redisFree(context);
        return -1;
      }
      auto* reply = static_cast<redisReply*>(raw);
      if (reply->type == REDIS_REPLY_ARRAY) {
        for (std::size_t k = 0; k < reply->elements; ++k) {
          ids->push_back(static_cast<std::uint64_t>(reply->element[k]->integer));
        }
      } else if (reply->type == REDIS_REPLY_ERROR) {
        if (retry && std::string_view(reply->str).starts_with("TRYAGAIN") && retries_left-- > 0) {
          ++to_send;
          std::this_thread::sleep_for(1ms);
        } else {
          ++errors;
        }
      }
      freeReplyObject(reply);
    }
  }
  redisFree(context);
  return errors;
}

TEST(FrontEnds, RedisCliCommandsAnswerAsDocumented) {
  FrontEnds server;
  server.start();
  const std::string cli = "/usr/bin/redis-cli";
  ASSERT_EQ(access(cli.c_str(), X_OK), 0)
      << "redis-cli missing: apt-get install -y redis-tools (scripts/setup)";
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"-p", std::to_string(server.resp_port)});
    return testing::run_to_end(cli, args, 10'000).output;
  };
  EXPECT_EQ(run({"PING"}), "PONG\n");
  EXPECT_EQ(run({"ping", "hello"}), "hello\n");
  const std::vector<std::uint64_t> three = numbers(run({"FLURRY.ID", "3"}));
  ASSERT_EQ(three.size(), 3U);
  EXPECT_EQ(duplicates(three), 0U);
  EXPECT_EQ(numbers(run({"flurry.id"})).size(), 1U);
  EXPECT_NE(run({"FLURRY.ID", "0"}).find("ERR FLURRY.ID takes an optional count from 1 to 10000"),
            std::string::npos);
  EXPECT_NE(run({"FLURRY.ID", "10001"}).find("ERR"), std::string::npos);
  EXPECT_NE(
      run({"INCR", "orders"}).find("ERR no sequence 'orders': create it with `flurryctl seq create orders`"),
      std::string::npos);
  EXPECT_NE(run({"DECR", "orders"}).find("only goes up"), std::string::npos);
  EXPECT_NE(run({"FLUSHALL"}).find("ERR unknown command 'FLUSHALL'"), std::string::npos);
  EXPECT_NE(run({"INFO"}).find("flurry_version:"), std::string::npos);
  EXPECT_NE(run({"HELLO", "3"}).find("flurry"), std::string::npos);
  EXPECT_NE(run({"HELLO", "4"}).find("NOPROTO"), std::string::npos);
  server.stop();
}

TEST(FrontEnds, PythonRedisClientWithPipelining) {
  FrontEnds server;
  server.start();
  const std::string script =
      "import redis, sys\n"
      "r = redis.Redis(host='127.0.0.1', port=int(sys.argv[1]))\n"
      "assert r.ping()\n"
      "ids = [r.execute_command('FLURRY.ID')]\n"
      "need, rounds = 200, 0\n"
      "while need and rounds < 1000:\n"  // TRYAGAIN (the ceiling) is asked again, as a client would
      "    rounds += 1\n"
      "    p = r.pipeline(transaction=False)\n"
      "    for _ in range(need): p.execute_command('FLURRY.ID', 50)\n"
      "    need = 0\n"
      "    for reply in p.execute(raise_on_error=False):\n"
      "        if isinstance(reply, Exception):\n"
      "            assert str(reply).startswith('TRYAGAIN'), reply\n"
      "            need += 1\n"
      "        else:\n"
      "            ids.extend(reply)\n"
      "print(' '.join(str(i) for i in ids))\n";
  const testing::RunResult result =
      testing::run_to_end("/usr/bin/python3", {"-c", script, std::to_string(server.resp_port)}, 30'000);
  ASSERT_EQ(result.exit_code, 0) << "python3-redis (apt-get install -y python3-redis):\n" << result.output;
  const std::vector<std::uint64_t> ids = numbers(result.output);
  EXPECT_EQ(ids.size(), 1U + 200 * 50);
  EXPECT_EQ(duplicates(ids), 0U);
  server.stop();
}

TEST(FrontEnds, HttpPathsAndStatuses) {
  FrontEnds server;
  server.start();
  HttpAnswer answer = http_retrying(server.url("/v1/ids?n=5"));
  EXPECT_EQ(answer.status, 200);
  EXPECT_NE(answer.headers.find("application/json"), std::string::npos);
  EXPECT_NE(answer.body.find("\"node\":0"), std::string::npos) << answer.body;
  EXPECT_EQ(numbers(answer.body.substr(0, answer.body.find("node"))).size(), 5U) << answer.body;
  answer = http_retrying(server.url("/v1/ids?n=4&format=text"));
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(std::count(answer.body.begin(), answer.body.end(), '\n'), 4);
  answer = http_retrying(server.url("/api/snowflake/get/orders"));
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(numbers(answer.body).size(), 1U);
  EXPECT_EQ(answer.body.find('\n'), std::string::npos) << "Leaf's answer is the bare ID";
  EXPECT_EQ(http(server.url("/v1/ids?n=0")).status, 400);
  EXPECT_EQ(http(server.url("/v1/ids?n=abc")).status, 400);
  EXPECT_EQ(http(server.url("/v1/ids?n=10001")).status, 400);
  answer = http(server.url("/api/segment/get/orders"));
  EXPECT_EQ(answer.status, 404);
  EXPECT_NE(answer.body.find("flurryctl seq create orders"), std::string::npos) << answer.body;
  EXPECT_EQ(http(server.url("/v1/seq/no%2Fpe")).status, 400);
  EXPECT_EQ(http(server.url("/nothing")).status, 404);
  EXPECT_EQ(http(server.url("/v1/ids"), "POST").status, 405);
  answer = http(server.url("/v1/info"));
  EXPECT_NE(answer.headers.find("application/json"), std::string::npos);
  const nlohmann::json info = nlohmann::json::parse(answer.body, nullptr, false);
  ASSERT_TRUE(info.is_object()) << answer.body;
  EXPECT_EQ(info.value("flurry_version", ""), FLURRY_VERSION_FOR_TESTS) << answer.body;
  EXPECT_EQ(info.value("layout", "").rfind("41/10/12", 0), 0U) << answer.body;
  // IDs as JSON strings, for JavaScript (above 2^53 a number loses digits).
  answer = http_retrying(server.url("/v1/ids?n=3&format=strings"));
  const nlohmann::json strings = nlohmann::json::parse(answer.body, nullptr, false);
  ASSERT_TRUE(strings.is_object() && strings["ids"].is_array()) << answer.body;
  ASSERT_EQ(strings["ids"].size(), 3U);
  for (const auto& id : strings["ids"]) EXPECT_TRUE(id.is_string()) << answer.body;
  server.stop();
}

// HTTP/1.1 keep-alive: one libcurl handle asks 20 times; every answer comes on the connection
// of the first (CURLINFO_NUM_CONNECTS counts the connections each request had to open).
TEST(FrontEnds, HttpKeepsTheConnectionAlive) {
  FrontEnds server;
  server.start();
  ASSERT_EQ(http_retrying(server.url("/v1/ids")).status, 200);  // past the start's RETRY
  CURL* handle = curl_easy_init();
  std::string body;
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &append);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, 20000L);  // a bound for a lost answer, not a timing
  long connects_total = 0;
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 20; ++i) {
    body.clear();
    const std::string url = server.url(i % 2 == 0 ? "/v1/ids?n=2&format=text" : "/v1/info");
    curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
    ASSERT_EQ(curl_easy_perform(handle), CURLE_OK);
    long status = 0;
    long connects = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(handle, CURLINFO_NUM_CONNECTS, &connects);
    EXPECT_EQ(status, 200) << body;
    connects_total += connects;
    if (i % 2 == 0) {
      for (std::uint64_t id : numbers(body)) ids.push_back(id);
    }
  }
  curl_easy_cleanup(handle);
  EXPECT_EQ(connects_total, 1) << "each request after the first should reuse the connection";
  EXPECT_EQ(ids.size(), 20U);
  EXPECT_EQ(duplicates(ids), 0U);
  server.stop();
}

// Named sequences through every door at once: redis-cli's INCR / INCRBY / GET / FLURRY.SEQ,
// hiredis pipelines of INCRBY (each run of n numbers its own), HTTP /v1/seq and Leaf's
// segment path, and the UDP GET_SEQ of the client library. No number twice over all of them.
TEST(FrontEnds, NamedSequencesThroughEveryDoorNeverRepeat) {
  FrontEnds server;
  server.start();
  server.create_sequence("tickets");
  const std::string cli = "/usr/bin/redis-cli";
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"-p", std::to_string(server.resp_port)});
    return testing::run_to_end(cli, args, 10'000).output;
  };
  std::vector<std::uint64_t> all;
  auto retrying = [&](std::vector<std::string> args) {  // a new block may still be on its way
    std::string out;
    for (int attempt = 0; attempt < 1000; ++attempt) {
      out = run(args);
      if (out.find("TRYAGAIN") == std::string::npos) break;
      std::this_thread::sleep_for(5ms);
    }
    return out;
  };
  const std::vector<std::uint64_t> one = numbers(retrying({"INCR", "tickets"}));
  ASSERT_EQ(one.size(), 1U);
  all.push_back(one[0]);
  const std::vector<std::uint64_t> three = numbers(retrying({"FLURRY.SEQ", "tickets", "3"}));
  ASSERT_EQ(three.size(), 3U);
  all.insert(all.end(), three.begin(), three.end());
  // INCRBY of the largest count: one run of 10,000 (all its own), or, when that is more than a
  // sub-block holds, an error that says so; never TRYAGAIN for ever.
  const std::string big = retrying({"INCRBY", "tickets", "10000"});
  if (big.find("ERR INCRBY tickets 10000: no run of 10000") == std::string::npos) {
    const std::vector<std::uint64_t> last = numbers(big);
    ASSERT_EQ(last.size(), 1U) << big;
    for (std::uint64_t v = last[0] - 9999; v <= last[0]; ++v) all.push_back(v);
  }
  // GET on a new connection has seen nothing: nil (an empty line from redis-cli).
  EXPECT_EQ(numbers(run({"GET", "tickets"})).size(), 0U);
  // One connection: INCRBY then GET answers the same number, and FLURRY.SEQ without n.
  const std::string script =
      "import redis, sys\n"
      "r = redis.Redis(host='127.0.0.1', port=int(sys.argv[1]))\n"
      "for _ in range(1000):\n"
      "    try:\n"
      "        last = r.incrby('tickets', 5); break\n"
      "    except redis.ResponseError as e:\n"
      "        assert str(e).startswith('TRYAGAIN'), e\n"
      "assert int(r.get('tickets')) == last, (r.get('tickets'), last)\n"
      "print(' '.join(str(v) for v in range(last - 4, last + 1)))\n";
  const testing::RunResult python =
      testing::run_to_end("/usr/bin/python3", {"-c", script, std::to_string(server.resp_port)}, 30'000);
  ASSERT_EQ(python.exit_code, 0) << python.output;
  const std::vector<std::uint64_t> five = numbers(python.output);
  ASSERT_EQ(five.size(), 5U);
  all.insert(all.end(), five.begin(), five.end());

  std::mutex mutex;
  std::vector<std::thread> threads;
  threads.emplace_back([&] {  // RESP: INCRBY 7, 300 times pipelined 50 at a time
    redisContext* context = redisConnect("127.0.0.1", server.resp_port);
    ASSERT_TRUE(context != nullptr && context->err == 0);
    std::vector<std::uint64_t> got;
    int to_send = 300;
    int retries_left = 10'000;
    while (to_send > 0) {
      const int batch = std::min(50, to_send);
      to_send -= batch;
      for (int i = 0; i < batch; ++i) redisAppendCommand(context, "INCRBY tickets 7");
      for (int i = 0; i < batch; ++i) {
        void* raw = nullptr;
        ASSERT_EQ(redisGetReply(context, &raw), REDIS_OK);
        auto* reply = static_cast<redisReply*>(raw);
        if (reply->type == REDIS_REPLY_INTEGER) {
          const auto last = static_cast<std::uint64_t>(reply->integer);
          for (std::uint64_t v = last - 6; v <= last; ++v) got.push_back(v);
        } else if (reply->type == REDIS_REPLY_ERROR && std::string_view(reply->str).starts_with("TRYAGAIN") &&
                   retries_left-- > 0) {
          ++to_send;
          std::this_thread::sleep_for(1ms);
        } else {
          ADD_FAILURE() << "INCRBY: " << (reply->type == REDIS_REPLY_ERROR ? reply->str : "not an integer");
        }
        freeReplyObject(reply);
      }
    }
    redisFree(context);
    EXPECT_EQ(got.size(), 300U * 7);
    std::lock_guard lock(mutex);
    all.insert(all.end(), got.begin(), got.end());
  });
  threads.emplace_back([&] {  // HTTP: /v1/seq 100 x 20, and Leaf's segment path 100 x 1
    std::vector<std::uint64_t> got;
    for (int i = 0; i < 100; ++i) {
      HttpAnswer answer = http_retrying(server.url("/v1/seq/tickets?n=20&format=text"));
      if (answer.status != 200) ADD_FAILURE() << "HTTP " << answer.status << " " << answer.body;
      for (std::uint64_t v : numbers(answer.body)) got.push_back(v);
      answer = http_retrying(server.url("/api/segment/get/tickets"));
      if (answer.status != 200) ADD_FAILURE() << "Leaf " << answer.status << " " << answer.body;
      EXPECT_EQ(answer.body.find('\n'), std::string::npos) << "Leaf's answer is the bare number";
      for (std::uint64_t v : numbers(answer.body)) got.push_back(v);
    }
    EXPECT_EQ(got.size(), 100U * 21);
    std::lock_guard lock(mutex);
    all.insert(all.end(), got.begin(), got.end());
  });
  threads.emplace_back([&] {  // UDP: GET_SEQ through the client library, 200 x 10
    client::Options options;
    options.servers = {server.address()};
    options.timeout = 2000ms;
    options.retry_budget =
        60'000ms;  // every call must succeed: RETRY while a block is reserved is waited out
    client::Error error;
    auto udp = client::Client::create(options, &error);
    ASSERT_TRUE(udp) << error.message;
    std::vector<std::uint64_t> got;
    for (int i = 0; i < 200; ++i) {
      if (!udp->get_seq("tickets", 10, got, &error)) ADD_FAILURE() << "UDP GET_SEQ: " << error.message;
    }
    EXPECT_EQ(got.size(), 200U * 10);
    std::lock_guard lock(mutex);
    all.insert(all.end(), got.begin(), got.end());
  });
  for (auto& thread : threads) thread.join();
  EXPECT_GE(all.size(), 1U + 3 + 5 + 300 * 7 + 100 * 21 + 200 * 10);
  EXPECT_EQ(duplicates(all), 0U) << "of " << all.size()
                                 << " numbers of one sequence through RESP, HTTP and UDP";
  server.stop();
}

TEST(FrontEnds, RespHttpAndUdpTogetherNeverShareAnId) {
  FrontEnds server;
  server.start();
  std::mutex mutex;
  std::vector<std::uint64_t> all;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {  // RESP: 3 connections x 400 pipelined commands x 25 IDs
    threads.emplace_back([&] {
      std::vector<std::uint64_t> ids;
      const long errors = pipeline(server.resp_port, 400, 25, 100, &ids);
      if (errors != 0) ADD_FAILURE() << "RESP pipeline: " << errors;
      std::lock_guard lock(mutex);
      all.insert(all.end(), ids.begin(), ids.end());
    });
  }
  threads.emplace_back([&] {  // HTTP: 100 requests x 100 IDs
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < 100; ++i) {
      const HttpAnswer answer = http_retrying(server.url("/v1/ids?n=100&format=text"));
      if (answer.status != 200) ADD_FAILURE() << "HTTP " << answer.status << " " << answer.body;
      for (std::uint64_t id : numbers(answer.body)) ids.push_back(id);
    }
    std::lock_guard lock(mutex);
    all.insert(all.end(), ids.begin(), ids.end());
  });
  threads.emplace_back([&] {  // UDP workers: 30,000 IDs through the client library
    client::Options options;
    options.servers = {server.address()};
    options.timeout = 2000ms;  // every call must succeed: far beyond a loaded machine's delays
    client::Error error;
    auto udp = client::Client::create(options, &error);
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < 300 && udp; ++i) {
      if (!udp->get(100, ids, &error)) ADD_FAILURE() << "UDP: " << error.message;
    }
    std::lock_guard lock(mutex);
    all.insert(all.end(), ids.begin(), ids.end());
  });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(all.size(), 3U * 400 * 25 + 100 * 100 + 30'000);
  EXPECT_EQ(duplicates(all), 0U) << "of " << all.size() << " IDs from RESP, HTTP and UDP";
  server.stop();
}

TEST(FrontEnds, OverloadAnswersTryAgainAndRetryAfterNeverAReusedId) {
  // A 1 s time unit: each front end's slice (a quarter of the 12-bit sequence) holds 1024 IDs a
  // second, and at most a 2 s lead of them ahead, so asking 10,000 at once is over capacity
  // however fast or slow this machine runs the requests.
  FrontEnds server({"--workers", "1", "--lead-ms", "2000", "--time-unit-ms", "1000"});
  server.start();
  std::vector<std::uint64_t> ids;
  const long resp_errors = pipeline(server.resp_port, 200, 10'000, 50, &ids, /*retry=*/false);
  EXPECT_GT(resp_errors, 0) << "10,000 IDs at once exceed what the slice may issue";
  long http_503 = 0;
  bool retry_after = true;
  for (int i = 0; i < 100; ++i) {
    const HttpAnswer answer = http(server.url("/v1/ids?n=10000&format=text"));
    if (answer.status == 503) {
      ++http_503;
      retry_after = retry_after && answer.headers.find("Retry-After: 1") != std::string::npos;
    } else {
      for (std::uint64_t id : numbers(answer.body)) ids.push_back(id);
    }
  }
  EXPECT_GT(http_503, 0);
  EXPECT_TRUE(retry_after) << "a 503 for the ceiling carries Retry-After";
  EXPECT_EQ(duplicates(ids), 0U);
  server.stop();
}

TEST(FrontEnds, KillNineUnderRespAndHttpLoadNeverReissues) {
  FrontEnds server;
  server.start();
  std::mutex mutex;
  std::vector<std::uint64_t> before;
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  load.emplace_back([&] {
    for (int round = 0; round < 2000 && !stop; ++round) {
      std::vector<std::uint64_t> ids;
      if (pipeline(server.resp_port, 20, 50, 20, &ids) < 0) break;  // the server died
      std::lock_guard lock(mutex);
      before.insert(before.end(), ids.begin(), ids.end());
    }
  });
  load.emplace_back([&] {
    for (int round = 0; round < 5000 && !stop; ++round) {
      const HttpAnswer answer = http_retrying(server.url("/v1/ids?n=50&format=text"));
      if (answer.status != 200) break;  // the server died
      std::lock_guard lock(mutex);
      for (std::uint64_t id : numbers(answer.body)) before.push_back(id);
    }
  });
  // Kill once the load has IDs in hand (bounded wait), whatever this machine's speed.
  for (const auto until = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < until;) {
    {
      std::lock_guard lock(mutex);
      if (before.size() > 5000) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  server.daemon.signal(SIGKILL);
  EXPECT_EQ(server.daemon.wait(testing::exit_timeout_ms), 128 + SIGKILL);
  stop = true;
  for (auto& thread : load) thread.join();
  ASSERT_GT(before.size(), 1000U) << "the load should have received IDs before the kill";

  server.start();
  std::vector<std::uint64_t> after;
  ASSERT_EQ(pipeline(server.resp_port, 100, 50, 50, &after), 0);
  for (int i = 0; i < 50; ++i) {
    for (std::uint64_t id : numbers(http_retrying(server.url("/v1/ids?n=50&format=text")).body))
      after.push_back(id);
  }
  EXPECT_EQ(after.size(), 100U * 50 + 50 * 50);
  EXPECT_GT(*std::min_element(after.begin(), after.end()), *std::max_element(before.begin(), before.end()))
      << "a restart issues above every ID issued before the kill";
  std::vector<std::uint64_t> all = before;
  all.insert(all.end(), after.begin(), after.end());
  EXPECT_EQ(duplicates(all), 0U) << "of " << all.size() << " IDs across the kill";
  server.stop();
}

TEST(FrontEnds, TakenPortStopsTheStartNamingTheFlag) {
  FrontEnds first;
  first.start();
  testing::TempDir state("flurry-fe-taken-");
  const testing::RunResult second =
      testing::run_to_end(first.flurryd,
                          {"--init", "--state-dir", state.path(), "--listen",
                           "127.0.0.1:" + std::to_string(testing::free_udp_port()), "--node-id", "7",
                           "--resp-listen", "127.0.0.1:" + std::to_string(first.resp_port)},
                          20'000);
  EXPECT_NE(second.exit_code, 0);
  EXPECT_NE(second.output.find("--resp-listen"), std::string::npos) << second.output;
  first.stop();
}

}  // namespace
}  // namespace flurry
