// tests/integration/memcache_test.cc — the memcached front end of a real flurryd
// (--memcache-listen), driven as katsubushi's users drive it: a real memcached client library
// (Debian's python3-pymemcache) and katsubushi's documented session over a plain socket.
//
//   * pymemcache: get, get_many, gets, incr on a sequence created with the flurryctl binary,
//     incr of an unknown sequence (None: NOT_FOUND), stats, version;
//   * katsubushi's README session (`GET new`, `GET id1 id2`), `get id id id` (three distinct
//     IDs), gets' cas field, and memcached's answers to what flurry does not serve (ERROR,
//     CLIENT_ERROR; a line past the limit closes the connection);
//   * the front end's counters in `flurryctl stats` and in the metrics;
//   * drained (flurryctl drain): SERVER_ERROR in the words of RESP's -FENCED;
//   * IDs from UDP, RESP and memcached together, and numbers of one sequence through RESP and
//     memcached, none twice, across a kill -9 and restart under that load;
//   * an idle connection and one trickling an endless line are closed after their timeouts
//     while a new client is served, and an address at --peer-connections-max loses its own
//     idle connection for a new one.
// Every wait polls with a generous bound; every load loop is bounded in count and time.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "control/control_server.h"
#include "serving.h"
#include "tests/support/child_process.h"
#include "tests/support/ports.h"
#include "tests/support/wait.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;

struct Memcache : testing::LocalFlurryd {
  std::uint16_t memcache_port = testing::free_tcp_port();
  std::uint16_t resp_port = testing::free_tcp_port();

  explicit Memcache(std::vector<std::string> flags = {"--workers", "2", "--lead-ms", "1000"})
      : LocalFlurryd("flurry-mc-", std::move(flags)) {}

  void start(std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--memcache-listen", "127.0.0.1:" + std::to_string(memcache_port),
                               "--resp-listen", "127.0.0.1:" + std::to_string(resp_port)});
    if (starts == 0) extra.push_back("--init");
    LocalFlurryd::start(extra);
  }
  // The flurryctl binary, as an operator runs it.
  testing::RunResult flurryctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--control-socket", control_socket()});
    return testing::run_to_end(testing::env_or_die("FLURRYCTL"), args, 20'000);
  }
  std::string metrics() const {
    Result<nlohmann::json> reply = control::control_request(control_socket(), "metrics", 5000);
    return reply.ok() ? reply->value("metrics", "") : "";
  }
};

// A counter's value in the Prometheus text: the first sample whose line starts with `prefix`
// (0 when absent).
std::uint64_t sample(const std::string& text, const std::string& prefix) {
  const std::size_t at = text.find("\n" + prefix);
  if (at == std::string::npos) return 0;
  const std::size_t space = text.find(' ', at + 1 + prefix.size());
  return std::stoull(text.substr(space + 1));
}

std::size_t duplicates(std::vector<std::uint64_t> ids) {
  std::sort(ids.begin(), ids.end());
  return static_cast<std::size_t>(ids.end() - std::unique(ids.begin(), ids.end()));
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

// One memcached text-protocol connection over a plain socket, from `from` (any 127.0.0.0/8
// address: each is its own peer for the per-address limit).
class Connection {
 public:
  explicit Connection(std::uint16_t port, const std::string& from = "127.0.0.1") {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, from.c_str(), &local.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (fd_ >= 0 && (bind(fd_, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0 ||
                     connect(fd_, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0)) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool ok() const { return fd_ >= 0; }
  bool send_all(const std::string& text) {
    return fd_ >= 0 && send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
  }
  // The next line without its CRLF; nullopt when none comes within timeout_ms or the peer closed.
  std::optional<std::string> line(int timeout_ms = 20'000) {  // a bound for a lost answer
    const std::uint64_t until = testing::now_ms() + static_cast<std::uint64_t>(timeout_ms);
    for (;;) {
      const std::size_t end = buffer_.find("\r\n");
      if (end != std::string::npos) {
        std::string out = buffer_.substr(0, end);
        buffer_.erase(0, end + 2);
        return out;
      }
      const std::uint64_t now = testing::now_ms();
      if (now >= until || !fill(static_cast<int>(until - now))) return std::nullopt;
    }
  }
  // Everything the peer sends until it closes (true) or timeout_ms passes (false).
  bool closed_by_peer(std::uint64_t timeout_ms, std::string* rest = nullptr) {
    const std::uint64_t until = testing::now_ms() + timeout_ms;
    while (testing::now_ms() < until) {
      if (!fill(200)) {
        if (closed_) {
          if (rest != nullptr) *rest = buffer_;
          return true;
        }
      }
    }
    return false;
  }
  // A get or gets answer: the VALUE lines' keys, numbers and cas fields up to END. False when
  // it is not one (`first` holds the first line, e.g. a SERVER_ERROR).
  struct Item {
    std::string key;
    std::uint64_t value = 0;
    std::string cas;
  };
  bool get_answer(std::vector<Item>* items, std::string* first) {
    for (int i = 0; i < 100'000; ++i) {
      const std::optional<std::string> header = line();
      if (!header) {
        *first = "(no answer)";
        return false;
      }
      if (*header == "END") return true;
      std::smatch match;
      static const std::regex value_line("VALUE (\\S+) 0 ([0-9]+)( [0-9]+)?");
      if (!std::regex_match(*header, match, value_line)) {
        *first = *header;
        return false;
      }
      const std::optional<std::string> data = line();
      if (!data || data->size() != std::stoul(match[2].str()) || numbers(*data).size() != 1) {
        *first = *header + " / " + data.value_or("(none)");
        return false;
      }
      items->push_back(
          {match[1].str(), std::stoull(*data), match[3].matched ? match[3].str().substr(1) : ""});
    }
    return false;
  }

 private:
  bool fill(int timeout_ms) {
    pollfd ready{fd_, POLLIN, 0};
    if (fd_ < 0 || poll(&ready, 1, std::max(timeout_ms, 0)) <= 0) return false;
    char chunk[16384];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      closed_ = true;
      return false;
    }
    if (n > 0) buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool closed_ = false;
  std::string buffer_;
};

// `request` (a get or gets), asked again after 1 ms while it answers SERVER_ERROR for the
// ceiling (at most 10,000 times, as a client would right after a start). The items of the
// answer; false (with the answer's first line in `first`) on any other answer.
bool get_items(Connection& connection, const std::string& request, std::vector<Connection::Item>* items,
               std::string* first) {
  for (int attempt = 0; attempt < 10'000; ++attempt) {
    items->clear();
    if (!connection.send_all(request)) return false;
    if (connection.get_answer(items, first)) return true;
    if (first->rfind("SERVER_ERROR the node's issue ceiling is reached", 0) != 0) return false;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// `get id id ...` with `keys` keys (get_items); appends the IDs. True when all came.
bool get_ids(Connection& connection, int keys, std::vector<std::uint64_t>* ids) {
  std::string request = "get";
  for (int i = 0; i < keys; ++i) request += " id";
  std::vector<Connection::Item> items;
  std::string first;
  if (!get_items(connection, request + "\r\n", &items, &first)) {
    ADD_FAILURE() << request << " answered " << first;
    return false;
  }
  for (const auto& item : items) ids->push_back(item.value);
  return static_cast<int>(items.size()) == keys;
}

// `incr name n`, asked again while the sequence's next block is on its way (SERVER_ERROR, at
// most 10,000 times). The numbers last-n+1 .. last are appended.
bool incr(Connection& connection, const std::string& name, int n, std::vector<std::uint64_t>* numbers_out,
          std::string* answer = nullptr) {
  for (int attempt = 0; attempt < 10'000; ++attempt) {
    if (!connection.send_all("incr " + name + " " + std::to_string(n) + "\r\n")) return false;
    const std::optional<std::string> line = connection.line();
    if (!line) return false;
    if (answer != nullptr) *answer = *line;
    if (line->rfind("SERVER_ERROR", 0) == 0 && line->find("retry after") != std::string::npos) {
      std::this_thread::sleep_for(1ms);
      continue;
    }
    const std::vector<std::uint64_t> last = numbers(*line);
    if (last.size() != 1 || line->find_first_not_of("0123456789") != std::string::npos) return false;
    for (std::uint64_t v = last[0] - static_cast<std::uint64_t>(n) + 1; v <= last[0]; ++v) {
      numbers_out->push_back(v);
    }
    return true;
  }
  return false;
}

TEST(Memcache, PymemcacheClientLibrary) {
  Memcache server;
  server.start();
  const testing::RunResult created = server.flurryctl({"seq", "create", "tickets"});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  // The library as a katsubushi user calls it; the server's SERVER_ERROR for the ceiling (right
  // after a start) is asked again, as a client would.
  const std::string script =
      "import sys, time\n"
      "from pymemcache.client.base import Client\n"
      "from pymemcache.exceptions import MemcacheServerError\n"
      "c = Client(('127.0.0.1', int(sys.argv[1])), connect_timeout=5, timeout=5)\n"
      "def retrying(call):\n"
      "    for _ in range(10000):\n"
      "        try:\n"
      "            return call()\n"
      "        except MemcacheServerError as e:\n"
      "            assert 'retry after' in str(e), e\n"
      "            time.sleep(0.001)\n"
      "    raise RuntimeError('still refused')\n"
      "ids = [int(retrying(lambda: c.get('id')))]\n"
      "many = retrying(lambda: c.get_many(['id1', 'id2', 'id3']))\n"
      "assert sorted(many) == ['id1', 'id2', 'id3'], many\n"
      "ids += [int(v) for v in many.values()]\n"
      "value, cas = retrying(lambda: c.gets('id'))\n"
      "assert int(cas) == int(value), (value, cas)\n"
      "ids.append(int(value))\n"
      "first = retrying(lambda: c.incr('tickets', 1))\n"
      "last = retrying(lambda: c.incr('tickets', 10))\n"
      "assert last >= first + 10, (first, last)\n"
      "assert c.incr('nosuch', 1) is None\n"  // NOT_FOUND, as memcached answers a missing key
      "stats = c.stats()\n"
      "assert stats[b'cmd_get'] >= 3 and stats[b'ids_issued'] >= 5, stats\n"
      "assert stats[b'requests_seq'] >= 3 and stats[b'answered_unknown_sequence'] >= 1, stats\n"
      "print('version', c.version().decode())\n"
      "print('ids', ' '.join(str(i) for i in ids))\n"
      "print('seq', first, ' '.join(str(v) for v in range(last - 9, last + 1)))\n";
  const testing::RunResult result =
      testing::run_to_end("/usr/bin/python3", {"-c", script, std::to_string(server.memcache_port)}, 60'000);
  ASSERT_EQ(result.exit_code, 0) << "python3-pymemcache (apt-get install -y python3-pymemcache):\n"
                                 << result.output;
  EXPECT_NE(result.output.find(std::string("version ") + FLURRY_VERSION_FOR_TESTS + "\n"), std::string::npos)
      << result.output;
  const std::size_t ids_at = result.output.find("ids ");
  const std::size_t seq_at = result.output.find("seq ");
  ASSERT_TRUE(ids_at != std::string::npos && seq_at != std::string::npos) << result.output;
  const std::vector<std::uint64_t> ids = numbers(result.output.substr(ids_at, seq_at - ids_at));
  EXPECT_EQ(ids.size(), 5U);
  EXPECT_EQ(duplicates(ids), 0U) << result.output;
  const std::vector<std::uint64_t> sequence = numbers(result.output.substr(seq_at));
  EXPECT_EQ(sequence.size(), 11U);
  EXPECT_EQ(duplicates(sequence), 0U) << result.output;
  server.stop();
}

TEST(Memcache, KatsubushiSessionAndMemcachedAnswers) {
  Memcache server;
  server.start();
  Connection connection(server.memcache_port);
  ASSERT_TRUE(connection.ok());
  std::vector<std::uint64_t> ids;
  ASSERT_TRUE(get_ids(connection, 1, &ids));  // past the start's ceiling
  // katsubushi's README, as typed into telnet: `GET new` answers one ID under the key `new`;
  // `GET id1 id2` and `get id id id` a fresh ID for every key, the same key or not; gets adds
  // memcached's cas field (the ID itself).
  const struct {
    std::string request;
    std::vector<std::string> keys;
    bool cas;
  } gets[] = {
      {"GET new\r\n", {"new"}, false},
      {"GET id1 id2\r\n", {"id1", "id2"}, false},
      {"get id id id\r\n", {"id", "id", "id"}, false},
      {"gets id\r\n", {"id"}, true},
  };
  for (const auto& get : gets) {
    std::vector<Connection::Item> items;
    std::string first;
    ASSERT_TRUE(get_items(connection, get.request, &items, &first)) << get.request << " answered " << first;
    ASSERT_EQ(items.size(), get.keys.size()) << get.request;
    for (std::size_t i = 0; i < items.size(); ++i) {
      EXPECT_EQ(items[i].key, get.keys[i]) << get.request;
      EXPECT_EQ(items[i].cas, get.cas ? std::to_string(items[i].value) : "") << get.request;
      ids.push_back(items[i].value);
    }
  }
  EXPECT_EQ(ids.size(), 1U + 1 + 2 + 3 + 1);
  EXPECT_EQ(duplicates(ids), 0U);

  // What flurry does not serve, answered as memcached answers, the connection going on.
  const struct {
    std::string request;
    std::string answer;
  } refusals[] = {
      {"bogus\r\n", "ERROR"},
      {"get\r\n", "ERROR"},
      {"stats slabs\r\n", "ERROR"},
      {"incr nosuch 1\r\n", "NOT_FOUND"},
      {"incr tickets 0\r\n", "CLIENT_ERROR invalid numeric delta argument: from 1 to 10000"},
      {"incr no/pe 1\r\n", "CLIENT_ERROR 'no/pe' is not a sequence name"},
      {"decr tickets 1\r\n", "CLIENT_ERROR a named sequence only goes up"},
      {"set k 0 0 5\r\nhello\r\n", "CLIENT_ERROR flurry stores nothing"},
      {"get " + std::string(251, 'k') + "\r\n", "CLIENT_ERROR bad command line format"},
  };
  for (const auto& refusal : refusals) {
    ASSERT_TRUE(connection.send_all(refusal.request));
    const std::optional<std::string> line = connection.line();
    ASSERT_TRUE(line) << refusal.request;
    EXPECT_EQ(line->rfind(refusal.answer, 0), 0U) << refusal.request << " answered " << *line;
  }
  ASSERT_TRUE(connection.send_all("decr tickets 1 noreply\r\nset k 0 0 1 noreply\r\nz\r\nversion\r\n"));
  EXPECT_EQ(connection.line().value_or(""), std::string("VERSION ") + FLURRY_VERSION_FOR_TESTS)
      << "noreply: nothing answered before VERSION";
  ASSERT_TRUE(get_ids(connection, 2, &ids));
  // A line past memcached's limit: CLIENT_ERROR, then the connection is closed.
  ASSERT_TRUE(connection.send_all(std::string(3000, 'x')));
  std::string rest;
  EXPECT_TRUE(connection.closed_by_peer(10'000, &rest));
  EXPECT_EQ(rest.rfind("CLIENT_ERROR line too long", 0), 0U) << rest;
  // quit closes without an answer.
  Connection quitting(server.memcache_port);
  ASSERT_TRUE(quitting.send_all("quit\r\n"));
  rest = "(not closed)";
  EXPECT_TRUE(quitting.closed_by_peer(10'000, &rest));
  EXPECT_EQ(rest, "");
  server.stop();
}

TEST(Memcache, CountersInFlurryctlStatsAndMetrics) {
  Memcache server;
  server.start();
  Connection connection(server.memcache_port);
  std::vector<std::uint64_t> ids;
  ASSERT_TRUE(get_ids(connection, 5, &ids));
  ASSERT_TRUE(connection.send_all("bogus\r\nstats\r\n"));
  EXPECT_EQ(connection.line().value_or(""), "ERROR");
  std::string stats;
  for (int i = 0; i < 100; ++i) {
    const std::optional<std::string> line = connection.line();
    if (!line || *line == "END") break;
    stats += *line + "\n";
  }
  for (const char* name : {"STAT pid ", "STAT uptime ", "STAT version ", "STAT curr_connections 1\n",
                           "STAT cmd_get ", "STAT get_hits ", "STAT get_misses ", "STAT ids_issued ",
                           "STAT bad_request 1\n", "STAT idle_timeout 0\n", "STAT node_id 0\n"}) {
    EXPECT_NE(stats.find(name), std::string::npos) << name << " in\n" << stats;
  }
  const testing::RunResult ctl = server.flurryctl({"stats", "--json"});
  ASSERT_EQ(ctl.exit_code, 0) << ctl.output;
  const nlohmann::json json = nlohmann::json::parse(ctl.output.substr(ctl.output.find('{')), nullptr, false);
  ASSERT_TRUE(json.is_object()) << ctl.output;
  const nlohmann::json memcache = json["front_ends"].value("memcache", nlohmann::json::object());
  EXPECT_GE(memcache.value("ids_issued", 0), 5) << ctl.output;
  EXPECT_EQ(memcache.value("bad_request", 0), 1) << ctl.output;
  EXPECT_GE(memcache.value("connections_accepted", 0), 1) << ctl.output;
  EXPECT_TRUE(memcache.contains("idle_timeout")) << ctl.output;
  const std::string metrics = server.metrics();
  EXPECT_GE(sample(metrics, "flurry_front_end_events_total{front_end=\"memcache\",event=\"ids_issued\""), 5U)
      << metrics;
  EXPECT_NE(metrics.find("flurry_front_door_events_total{door=\"memcache\",event=\"idle_timeout\"}"),
            std::string::npos)
      << metrics;
  server.stop();
}

// flurryctl drain: the memcached door refuses get and incr with SERVER_ERROR in the words the
// RESP door uses after -FENCED (frontend.h refusal_text), and issues nothing more.
TEST(Memcache, DrainAnswersServerErrorInTheWordsOfResp) {
  Memcache server;
  server.start();
  ASSERT_EQ(server.flurryctl({"seq", "create", "tickets"}).exit_code, 0);
  Connection connection(server.memcache_port);
  std::vector<std::uint64_t> ids;
  ASSERT_TRUE(get_ids(connection, 2, &ids));
  std::vector<std::uint64_t> numbers_got;
  ASSERT_TRUE(incr(connection, "tickets", 1, &numbers_got));
  const testing::RunResult drained = server.flurryctl({"drain"});
  ASSERT_EQ(drained.exit_code, 0) << drained.output;
  const std::string words = "this node is draining (its operator is stopping it); ask another flurryd";
  ASSERT_TRUE(connection.send_all("get id id\r\nincr tickets 1\r\n"));
  EXPECT_EQ(connection.line().value_or(""), "SERVER_ERROR " + words);
  EXPECT_EQ(connection.line().value_or(""), "SERVER_ERROR " + words);
  redisContext* context = redisConnect("127.0.0.1", server.resp_port);
  ASSERT_TRUE(context != nullptr && context->err == 0);
  auto* reply = static_cast<redisReply*>(redisCommand(context, "FLURRY.ID"));
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(std::string(reply->str, reply->len), "FENCED " + words);
  freeReplyObject(reply);
  redisFree(context);
  ASSERT_TRUE(connection.send_all("stats\r\n"));
  std::string stats;
  for (int i = 0; i < 100; ++i) {
    const std::optional<std::string> line = connection.line();
    if (!line || *line == "END") break;
    stats += *line + "\n";
  }
  EXPECT_NE(stats.find("STAT answered_fenced 2\n"), std::string::npos) << stats;
  EXPECT_NE(stats.find("STAT get_misses 2\n"), std::string::npos) << stats;
  server.stop();
}

// Load through every door at once: UDP GET_IDS (the client library), RESP FLURRY.ID (hiredis,
// pipelined) and memcached `get` of 10 keys (pipelined), plus numbers of one sequence through
// RESP INCRBY and memcached incr; kill -9 in the middle, restart on the same state dir, and
// the same again. No ID and no number twice over both runs.
TEST(Memcache, UdpRespAndMemcacheNeverShareAnIdAcrossKillNine) {
  Memcache server;
  server.start();
  ASSERT_EQ(server.flurryctl({"seq", "create", "tickets"}).exit_code, 0);
  std::mutex mutex;
  std::vector<std::uint64_t> ids;
  std::vector<std::uint64_t> sequence;
  std::atomic<bool> stop{false};
  // What each door (memcached get, memcached incr, RESP, UDP) handed out in the current run.
  constexpr int doors = 4;
  std::atomic<std::uint64_t> served_after[doors] = {};
  auto keep = [&](std::vector<std::uint64_t>* into, const std::vector<std::uint64_t>& got, int door) {
    std::lock_guard lock(mutex);
    into->insert(into->end(), got.begin(), got.end());
    served_after[door] += got.size();
  };
  // Each door's load until `stop`, the server's death, or `rounds`; returns the failures that
  // were not the server dying.
  // udp_timeout: the UDP thread's attempts. Short before the kill (the call in flight when the
  // server dies pays it, and nothing is asserted of it); 5 s after the restart, where the thread's
  // first call must be answered (served_after) however loaded the machine.
  auto load = [&](int rounds, std::chrono::milliseconds udp_timeout) {
    std::vector<std::thread> threads;
    threads.emplace_back([&, rounds] {  // memcached: 20 pipelined gets of 10 keys a round
      Connection connection(server.memcache_port);
      for (int round = 0; round < rounds && !stop; ++round) {
        std::string request;
        for (int i = 0; i < 20; ++i) request += "get id id id id id id id id id id\r\n";
        if (!connection.send_all(request)) return;
        std::vector<std::uint64_t> got;
        for (int i = 0; i < 20; ++i) {
          std::vector<Connection::Item> items;
          std::string first;
          if (connection.get_answer(&items, &first)) {
            for (const auto& item : items) got.push_back(item.value);
          } else if (first.rfind("SERVER_ERROR the node's issue ceiling", 0) != 0) {
            keep(&ids, got, 0);
            return;  // the server died (or a failure: the counts below tell)
          }
        }
        keep(&ids, got, 0);
      }
    });
    threads.emplace_back([&, rounds] {  // memcached incr 3 on the sequence
      Connection connection(server.memcache_port);
      for (int round = 0; round < rounds && !stop; ++round) {
        std::vector<std::uint64_t> got;
        if (!incr(connection, "tickets", 3, &got)) return;
        keep(&sequence, got, 1);
      }
    });
    threads.emplace_back([&, rounds] {  // RESP: 20 pipelined FLURRY.ID 10 and INCRBY tickets 2
      redisContext* context = redisConnect("127.0.0.1", server.resp_port);
      if (context == nullptr || context->err != 0) return;
      for (int round = 0; round < rounds && !stop; ++round) {
        for (int i = 0; i < 20; ++i) redisAppendCommand(context, "FLURRY.ID 10");
        redisAppendCommand(context, "INCRBY tickets 2");
        std::vector<std::uint64_t> got;
        std::vector<std::uint64_t> numbers_got;
        bool alive = true;
        for (int i = 0; i < 21 && alive; ++i) {
          void* raw = nullptr;
          alive = redisGetReply(context, &raw) == REDIS_OK && raw != nullptr;
          if (!alive) break;
          auto* reply = static_cast<redisReply*>(raw);
          if (reply->type == REDIS_REPLY_ARRAY) {
            for (std::size_t k = 0; k < reply->elements; ++k)
              got.push_back(static_cast<std::uint64_t>(reply->element[k]->integer));
          } else if (reply->type == REDIS_REPLY_INTEGER) {
            const auto last = static_cast<std::uint64_t>(reply->integer);
            numbers_got.insert(numbers_got.end(), {last - 1, last});
          }
          freeReplyObject(reply);
        }
        keep(&ids, got, 2);
        keep(&sequence, numbers_got, 2);
        if (!alive) break;
      }
      redisFree(context);
    });
    threads.emplace_back([&, rounds, udp_timeout] {  // UDP: 50 IDs a request through the client library
      client::Options options;
      options.servers = {server.address()};
      options.timeout = udp_timeout;
      options.attempts = 2;
      client::Error error;
      auto udp = client::Client::create(options, &error);
      for (int round = 0; round < rounds * 4 && !stop && udp; ++round) {
        std::vector<std::uint64_t> got;
        if (!udp->get(50, got, &error)) return;
        keep(&ids, got, 3);
      }
    });
    return threads;
  };

  std::vector<std::thread> before_kill = load(100'000, 500ms);
  // Kill once every door has handed out IDs (bounded wait), whatever this machine's speed.
  for (const auto until = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < until;) {
    {
      std::lock_guard lock(mutex);
      if (ids.size() > 20'000 && sequence.size() > 300) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  server.daemon.signal(SIGKILL);
  EXPECT_EQ(server.daemon.wait(testing::exit_timeout_ms), 128 + SIGKILL);
  stop = true;
  for (auto& thread : before_kill) thread.join();
  std::vector<std::uint64_t> ids_before;
  {
    std::lock_guard lock(mutex);
    ids_before = ids;
  }
  ASSERT_GT(ids_before.size(), 1000U) << "the load should have received IDs before the kill";
  ASSERT_GT(sequence.size(), 30U) << "the load should have received sequence numbers before the kill";
  const std::size_t sequence_before = sequence.size();

  server.start();
  stop = false;
  for (auto& served : served_after) served = 0;
  std::vector<std::thread> after_restart = load(20, 5000ms);
  for (auto& thread : after_restart) thread.join();
  std::vector<std::uint64_t> ids_after(ids.begin() + static_cast<std::ptrdiff_t>(ids_before.size()),
                                       ids.end());
  // Each door served after the restart (a request refused for the ceiling is not asked again).
  for (int door = 0; door < doors; ++door) EXPECT_GT(served_after[door].load(), 0U) << "door " << door;
  ASSERT_FALSE(ids_after.empty());
  EXPECT_GT(sequence.size(), sequence_before);
  EXPECT_GT(*std::min_element(ids_after.begin(), ids_after.end()),
            *std::max_element(ids_before.begin(), ids_before.end()))
      << "a restart issues above every ID issued before the kill";
  EXPECT_EQ(duplicates(ids), 0U) << "of " << ids.size()
                                 << " IDs from UDP, RESP and memcached across the kill";
  EXPECT_EQ(duplicates(sequence), 0U)
      << "of " << sequence.size() << " numbers of one sequence from RESP and memcached across the kill";
  server.stop();
}

TEST(Memcache, IdleAndTricklingConnectionsAreClosedWhileANewClientIsServed) {
  Memcache server;
  server.start({"--idle-timeout-s", "2", "--request-timeout-s", "1", "--peer-connections-max", "2"});
  Connection idle(server.memcache_port, "127.0.0.2");
  Connection trickle(server.memcache_port, "127.0.0.3");
  ASSERT_TRUE(idle.ok() && trickle.ok());
  // A line that never ends: one more byte of its key every 100 ms.
  ASSERT_TRUE(trickle.send_all("get id"));
  // A new client is served at once while those two are held.
  {
    Connection client(server.memcache_port);
    std::vector<std::uint64_t> ids;
    EXPECT_TRUE(get_ids(client, 3, &ids));
    EXPECT_EQ(ids.size(), 3U);
  }
  bool trickle_closed = false;
  for (int i = 0; i < 300 && !trickle_closed; ++i) {  // at most 30 s
    trickle_closed = !trickle.send_all("d") || trickle.closed_by_peer(100);
  }
  EXPECT_TRUE(trickle_closed) << "a line trickling for ever was never closed";
  EXPECT_TRUE(idle.closed_by_peer(30'000)) << "an idle connection stayed open";
  // An address at --peer-connections-max (2): a third connection from it is served, and one of
  // its two idle ones is closed for it. Which one is the door's choice (the longer idle, by its
  // millisecond clock: two accepted in one millisecond tie), so either may be the one.
  Connection held_a(server.memcache_port, "127.0.0.4");
  Connection held_b(server.memcache_port, "127.0.0.4");
  ASSERT_TRUE(held_a.ok() && held_b.ok());
  {
    Connection third(server.memcache_port, "127.0.0.4");
    std::vector<std::uint64_t> ids;
    EXPECT_TRUE(get_ids(third, 1, &ids));
  }
  bool one_closed = false;
  for (int round = 0; round < 100 && !one_closed; ++round) {  // at most about 10 s
    one_closed = held_a.closed_by_peer(50) || held_b.closed_by_peer(50);
  }
  EXPECT_TRUE(one_closed) << "neither of the address's idle connections was closed for the third";
  const std::string metrics = server.metrics();
  EXPECT_GE(sample(metrics, "flurry_front_door_events_total{door=\"memcache\",event=\"idle_timeout\"}"), 1U)
      << metrics;
  EXPECT_GE(sample(metrics, "flurry_front_door_events_total{door=\"memcache\",event=\"request_timeout\"}"),
            1U)
      << metrics;
  EXPECT_GE(sample(metrics, "flurry_front_door_events_total{door=\"memcache\",event=\"shed_peer\"}"), 1U)
      << metrics;
  server.stop();
}

TEST(Memcache, BadFlagExitsNamingIt) {
  testing::TempDir state("flurry-mc-flag-");
  const testing::RunResult run = testing::run_to_end(
      testing::env_or_die("FLURRYD"),
      {"--init", "--state-dir", state.path(), "--listen",
       "127.0.0.1:" + std::to_string(testing::free_udp_port()), "--memcache-listen", "11211"},
      20'000);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("--memcache-listen '11211' must be ADDR:PORT, e.g. 127.0.0.1:11211"),
            std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace flurry
