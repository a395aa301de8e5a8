// tests/integration/flurryd_test.cc — real flurryd processes on loopback, driven through the
// real client library and the real control socket.
//
//   * >= 1,000,000 IDs from several client threads; kill -9 in the middle of the load;
//     restart on the same state directory; every ID unique across both runs and every ID
//     after the restart larger than every ID before it.
//   * garbage datagrams are counted by reason and the server keeps serving; each oversized
//     datagram moves exactly one counter (too_long);
//   * the 1 s time unit (--time-unit-ms 1000) is served and reported by INFO;
//   * bad flags, a corrupt state file, a state file of another node, and a second flurryd on
//     the same state directory give a clear error and a non-zero exit;
//   * SIGTERM stops cleanly and the next start issues above everything before;
//   * systemd's notify protocol: READY=1 only once IDs are served, WATCHDOG=1, STOPPING=1;
//   * pinned workers stay inside the CPUs flurryd may run on (taskset).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_set>
#include <utility>

#include "client/client.h"
#include "control/control_server.h"
#include "serving.h"
#include "tests/support/child_process.h"
#include "tests/support/notify_socket.h"
#include "tests/support/ports.h"
#include "tests/support/status.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;

struct Server : testing::LocalFlurryd {
  Server() : LocalFlurryd("flurry-it-", {"--workers", "2", "--lead-ms", "1000"}) {}

  // The first start of a fresh state dir is a new node: --init (a later one must not be).
  void start(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> all = extra;
    if (starts == 0) all.push_back("--init");
    LocalFlurryd::start(all);
  }

  nlohmann::json control(const std::string& cmd) const {
    nlohmann::json reply;
    std::string error;
    EXPECT_TRUE(flurry::testing::is_ok(
        flurry::testing::take(control::control_request(control_socket(), cmd), &reply)));
    return reply;
  }
};

// A short timeout suits the load loops (a killed server is asked again soon, a failed get is
// retried); a test whose every answer must come asks for `answered`: a flurryd on loopback
// answers in microseconds, but a sanitizer build on a loaded 2-CPU machine can hold an answer
// for a good part of a second, and two attempts of 100 ms would then fail the call.
constexpr std::chrono::milliseconds answered = 5000ms;
std::unique_ptr<client::Client> make_client(const std::string& address,
                                            std::chrono::milliseconds timeout = 100ms) {
  client::Options options;
  options.servers = {address};
  options.timeout = timeout;
  options.attempts = 2;
  options.ids_per_request = 4096;
  client::Error error;
  auto made = client::Client::create(options, &error);
  EXPECT_TRUE(made) << error.message;
  return made;
}

// Several client threads fetch until `target` IDs arrived in total or `stop` is set; a
// failed get() (the server was killed) is retried until the deadline.
std::vector<std::vector<std::uint64_t>> load(const std::string& address, int threads, std::size_t target,
                                             std::atomic<bool>& stop, std::atomic<std::size_t>& received,
                                             std::chrono::seconds limit) {
  std::vector<std::vector<std::uint64_t>> per_thread(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto client = make_client(address);
      if (!client) return;
      auto& ids = per_thread[static_cast<std::size_t>(t)];
      ids.reserve(target / static_cast<std::size_t>(threads) + 8192);
      client::Error error;
      while (!stop.load() && received.load() < target && std::chrono::steady_clock::now() < deadline) {
        const std::size_t before = ids.size();
        if (client->get(2000, ids, &error)) {
          received += ids.size() - before;
        } else {
          std::this_thread::sleep_for(5ms);
        }
      }
    });
  }
  for (auto& worker : workers) worker.join();
  return per_thread;
}

// Asks `health` until the node says healthy (bounded). A correct node may say unhealthy for a
// moment: a watermark write pending longer than stall_ms (250 ms at --lead-ms 1000) is reported
// as degraded_disk, and on a loaded machine with a busy disk one can be. What a test means by
// "still healthy" is that the node is, or becomes so again by itself; one that stays unhealthy
// fails after the bound.
bool becomes_healthy(const Server& server, std::uint64_t limit_ms = 30'000) {
  for (const std::uint64_t until = testing::now_ms() + limit_ms;; testing::sleep_ms(50)) {
    if (server.control("health")["healthy"] == true) return true;
    if (testing::now_ms() >= until) return false;
  }
}

TEST(Flurryd, MillionIdsKill9RestartAllUniqueAndAboveEverythingBefore) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());

  // Phase 1: load from 4 threads; kill -9 flurryd while they are fetching.
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> received{0};
  std::vector<std::vector<std::uint64_t>> before;
  std::thread killer([&] {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (received.load() < 400'000 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    server.daemon.signal(SIGKILL);
    EXPECT_TRUE(server.daemon.wait(testing::exit_timeout_ms)) << "flurryd did not end after SIGKILL";
    std::this_thread::sleep_for(300ms);  // clients see timeouts against the dead server
    stop = true;
  });
  before = load(server.address(), 4, 10'000'000, stop, received, 90s);
  killer.join();
  const std::size_t received_before = received.load();
  ASSERT_GE(received_before, 400'000U) << server.daemon.log();

  // Phase 2: restart on the same state directory, fetch the rest of the million.
  ASSERT_NO_FATAL_FAILURE(server.start());
  std::atomic<bool> never{false};
  std::atomic<std::size_t> received_after{0};
  const std::size_t remaining = 1'000'000 - std::min<std::size_t>(received_before, 600'000);
  auto after = load(server.address(), 4, remaining, never, received_after, 90s);
  ASSERT_GE(received_after.load(), remaining);

  std::unordered_set<std::uint64_t> seen;
  seen.reserve(received_before + received_after.load());
  std::uint64_t max_before = 0;
  for (const auto& ids : before) {
    for (const auto id : ids) {
      ASSERT_TRUE(seen.insert(id).second) << "duplicate ID " << id << " before the restart";
      max_before = std::max(max_before, id);
    }
  }
  std::uint64_t min_after = ~std::uint64_t{0};
  for (const auto& ids : after) {
    for (const auto id : ids) {
      ASSERT_TRUE(seen.insert(id).second) << "duplicate ID " << id << " after the restart";
      min_after = std::min(min_after, id);
    }
  }
  EXPECT_GE(seen.size(), 1'000'000U);
  EXPECT_GT(min_after, max_before) << "an ID after the restart is not above every ID before it";
  std::printf("%zu IDs before kill -9, %zu after restart, all unique; min after %llu > max before %llu\n",
              received_before, received_after.load(), static_cast<unsigned long long>(min_after),
              static_cast<unsigned long long>(max_before));

  // The server's own count matches what the clients received after the restart (at least).
  const auto stats = server.control("stats");
  EXPECT_GE(stats["total"]["ids_issued"].get<std::uint64_t>(), received_after.load());
  server.stop();
}

void send_datagram(std::uint16_t port, const std::vector<std::uint8_t>& bytes) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&address), sizeof address);
  close(fd);
}

TEST(Flurryd, GarbageIsCountedByReasonAndServingContinues) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start({"--workers", "1"}));
  // Sent 25 at a time, each group received by the worker before the next leaves: a burst of
  // all 450 could overflow the socket's receive buffer while the worker is descheduled, and
  // then the exact counts below would be the scheduler's.
  std::vector<std::vector<std::uint8_t>> garbage;
  std::mt19937_64 rng(12345);
  // 200 random datagrams (almost surely bad magic), 50 short ones, 50 oversize (> 1472),
  // 50 with a wrong version, 50 with nonzero padding.
  for (int i = 0; i < 200; ++i) {
    std::vector<std::uint8_t> bytes(1 + rng() % 200);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    if (bytes.size() >= 2 && bytes[0] == 0x46 && bytes[1] == 0x4c) bytes[0] = 0;
    garbage.push_back(bytes);
  }
  std::array<std::uint8_t, proto::datagram_size_max> buffer{};
  proto::Request request;
  request.opcode = proto::Opcode::get_ids;
  request.count = 5;
  const std::size_t size = proto::encode_request(request, buffer);
  for (int i = 0; i < 50; ++i) garbage.emplace_back(buffer.begin(), buffer.begin() + 7);
  for (int i = 0; i < 50; ++i) {
    std::vector<std::uint8_t> big(1600, 0);
    std::copy(buffer.begin(), buffer.begin() + static_cast<long>(size), big.begin());
    garbage.push_back(big);
  }
  for (int i = 0; i < 50; ++i) {
    std::vector<std::uint8_t> bad(buffer.begin(), buffer.begin() + static_cast<long>(size));
    bad[proto::request_offset::version] = 9;
    garbage.push_back(bad);
  }
  for (int i = 0; i < 50; ++i) {
    std::vector<std::uint8_t> padded(buffer.begin(), buffer.begin() + static_cast<long>(size));
    padded.resize(64, 0);
    padded[40] = 1;
    garbage.push_back(padded);
  }
  const auto received = [&] { return server.control("stats")["total"]["rx_datagrams"].get<std::uint64_t>(); };
  const std::uint64_t before = received();
  for (std::size_t sent = 0; sent < garbage.size();) {
    for (std::size_t k = 0; k < 25 && sent < garbage.size(); ++k, ++sent)
      send_datagram(server.port, garbage[sent]);
    for (const auto until = std::chrono::steady_clock::now() + 20s;
         received() < before + sent && std::chrono::steady_clock::now() < until;) {
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(received(), before + sent) << "the worker did not receive every datagram sent";
  }
  // Still serving.
  auto client = make_client(server.address(), answered);
  std::vector<std::uint64_t> ids;
  client::Error error;
  ASSERT_TRUE(client->get(1000, ids, &error)) << error.message;
  EXPECT_EQ(std::unordered_set<std::uint64_t>(ids.begin(), ids.end()).size(), 1000U);

  // Counted by reason (loopback does not drop at this rate; allow for it anyway by waiting).
  nlohmann::json errors;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  do {
    errors = server.control("stats")["total"]["request_errors"];
    if (errors["bad_version"].get<int>() >= 50 && errors["trailing_bytes"].get<int>() >= 50 &&
        errors["too_short"].get<int>() >= 50 && errors["too_long"].get<int>() >= 50)
      break;
    std::this_thread::sleep_for(50ms);
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(errors["bad_version"].get<int>(), 50) << errors.dump();
  EXPECT_EQ(errors["trailing_bytes"].get<int>(), 50) << errors.dump();
  EXPECT_GE(errors["too_short"].get<int>(), 50) << errors.dump();  // random short ones too
  EXPECT_EQ(errors["too_long"].get<int>(), 50) << errors.dump();
  EXPECT_GE(errors["bad_magic"].get<int>() + errors["too_short"].get<int>(), 250) << errors.dump();
  const auto metrics = server.control("metrics")["metrics"].get<std::string>();
  EXPECT_NE(metrics.find("flurry_request_errors_total{worker=\"0\",reason=\"bad_version\"} 50"),
            std::string::npos)
      << metrics;
  EXPECT_TRUE(becomes_healthy(server)) << server.control("health").dump();

  // Bad control-socket input gets an error answer, never a crash: an unknown command whose
  // echo is cut inside a UTF-8 character (this once aborted flurryd), and broken JSON lines.
  nlohmann::json reply;
  ASSERT_TRUE(flurry::testing::is_ok(flurry::testing::take(
      control::control_request(server.control_socket(), std::string(63, 'a') + "\xc3\xa9"), &reply)));
  EXPECT_EQ(reply["ok"], false);
  EXPECT_NE(reply["error"].get<std::string>().find("unknown command"), std::string::npos);
  EXPECT_TRUE(server.daemon.running());
  EXPECT_TRUE(becomes_healthy(server)) << server.control("health").dump();
  server.stop();
}

// Each oversized datagram moves exactly one drop reason, too_long, whether it fits the socket
// backend's receive buffer or is cut by the kernel; no transport counter moves (PROTOCOL.md
// "Request errors"). With --udp-gro (64 KiB buffers) both sizes fit; without it the buffer is
// 2048 bytes, so the 4000-byte datagram arrives cut (MSG_TRUNC).
class OversizedDatagrams : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Flurryd, OversizedDatagrams, ::testing::Values("--udp-gro=true", "--udp-gro=false"));

TEST_P(OversizedDatagrams, EachCountsOnce) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start({"--workers", "1", GetParam()}));
  const nlohmann::json before = server.control("stats")["total"];
  std::array<std::uint8_t, proto::datagram_size_max> buffer{};
  proto::Request request;
  request.opcode = proto::Opcode::get_ids;
  request.count = 5;
  const std::size_t size = proto::encode_request(request, buffer);
  for (const std::size_t oversize : {std::size_t{1600}, std::size_t{4000}}) {
    std::vector<std::uint8_t> big(oversize, 0);
    std::copy(buffer.begin(), buffer.begin() + static_cast<long>(size), big.begin());
    send_datagram(server.port, big);
  }
  auto delta = [&](const nlohmann::json& now, const nlohmann::json& then) {
    return now.get<std::uint64_t>() - then.get<std::uint64_t>();
  };
  // Waits until every counter asserted below has moved for both datagrams: a datagram is
  // counted in rx_datagrams as the worker takes it and in too_long and dropped after it is
  // decoded, so a snapshot taken between the two (a worker descheduled there) would show one
  // and not the others. The exact counts are then asserted: nothing counted twice.
  nlohmann::json after;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  do {
    after = server.control("stats")["total"];
    if (delta(after["rx_datagrams"], before["rx_datagrams"]) >= 2 &&
        delta(after["dropped"], before["dropped"]) >= 2 &&
        delta(after["request_errors"]["too_long"], before["request_errors"]["too_long"]) >= 2)
      break;
    std::this_thread::sleep_for(20ms);
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(delta(after["rx_datagrams"], before["rx_datagrams"]), 2u) << after.dump();
  EXPECT_EQ(delta(after["dropped"], before["dropped"]), 2u) << after.dump();
  for (const auto& [reason, value] : after["request_errors"].items()) {
    EXPECT_EQ(delta(value, before["request_errors"][reason]), reason == "too_long" ? 2u : 0u)
        << reason << ": " << after.dump();
  }
  for (const auto& [counter, reasons] : after["transport"].items()) {
    for (const auto& [reason, value] : reasons.items()) {
      EXPECT_EQ(value.get<std::uint64_t>(), 0u) << counter << "." << reason << ": " << after.dump();
    }
  }
  server.stop();
}

// The 1 s time unit end to end: selected by --time-unit-ms, reported by INFO, used by the IDs.
// The socket workers' threads of a running flurryd (named flurry-w<i>) and the CPUs each may
// run on (its Cpus_allowed_list), from /proc.
std::map<std::string, std::string> worker_cpus(pid_t pid) {
  std::map<std::string, std::string> found;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::string name;
    std::getline(std::ifstream(task.path() / "comm"), name);
    if (name.rfind("flurry-w", 0) != 0) continue;
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) found[name] = line.substr(line.find_last_of(" \t") + 1);
    }
  }
  return found;
}

TEST(Flurryd, PinnedWorkersStayInsideTheCpusItMayRunOn) {
  // flurryd started on the last CPU this test may use (as `taskset -c N flurryd`): both workers
  // are pinned there, not to CPUs 0 and 1 of the machine.
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int last = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mine)) last = cpu;
  }
  ASSERT_GE(last, 0);
  cpu_set_t only;
  CPU_ZERO(&only);
  CPU_SET(last, &only);
  ASSERT_EQ(sched_setaffinity(0, sizeof only, &only), 0);  // this thread; the child inherits it
  Server server;
  server.start();
  ASSERT_EQ(sched_setaffinity(0, sizeof mine, &mine), 0);
  // Serving means one worker answered; the other may still be starting (and naming itself):
  // read until both are there (a sanitizer build on a busy host starts threads slowly).
  std::map<std::string, std::string> cpus;
  for (const std::uint64_t until = testing::now_ms() + 10'000; testing::now_ms() < until;
       testing::sleep_ms(20)) {
    cpus = worker_cpus(server.daemon.pid());
    if (cpus.size() >= 2) break;
  }
  const std::string expected = std::to_string(last);
  EXPECT_EQ(cpus, (std::map<std::string, std::string>{{"flurry-w0", expected}, {"flurry-w1", expected}}));
  server.stop();
}

TEST(Flurryd, OneSecondTimeUnitIsSelectableAndReportedByInfo) {
  Server server;
  // Later flags win: the lead must span at least two 1 s units.
  ASSERT_NO_FATAL_FAILURE(server.start({"--time-unit-ms", "1000", "--lead-ms", "3000"}));
  const auto wall_ms = [] {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
  };
  const std::uint64_t before_ms = wall_ms();
  auto client = make_client(server.address(), answered);
  client::Error error;
  const auto info = client->info(&error);
  ASSERT_TRUE(info) << error.message;
  EXPECT_EQ(info->time_unit_ms, 1000);
  std::vector<std::uint64_t> ids;
  ASSERT_TRUE(client->get(5000, ids, &error)) << error.message;
  const proto::Layout layout = client::to_layout(*info);
  for (const std::uint64_t id : ids) {
    const proto::Decoded decoded = layout.decode(id);
    // Read in 1 s units the time is now: not before the second the test started in, at most
    // two leads and a unit ahead (--init starts a new node a lead above the clock, and the
    // ceiling runs a lead ahead; read in 1 ms units it would be decades off).
    ASSERT_GE(decoded.unix_ms + 1000, before_ms) << id;
    ASSERT_LE(decoded.unix_ms, wall_ms() + 3000 + 3000 + 1000) << id;
  }
  const std::string config = server.control("config")["config"].get<std::string>();
  EXPECT_NE(config.find("time_unit_ms = 1000"), std::string::npos) << config;
  server.stop();
}

TEST(Flurryd, BadFlagsExitNonZeroNamingTheProblem) {
  const std::string flurryd = testing::env_or_die("FLURRYD");
  const testing::TempDir temp{"flurry-flags-"};
  const std::string dir = temp.path();
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"--workers", "0"}, "--workers"},
      {{"--workers", "abc"}, "--workers"},
      {{"--bogus"}, "bogus"},
      {{"--layout", "50/10/12"}, "63"},
      {{"--layout", "fancy"}, "layout"},
      {{"--node-id", "1024"}, "node id 1024"},
      {{"--listen", "127.0.0.1"}, "ADDR:PORT"},
      {{"--listen", "nonsense:7420"}, "IPv4"},
      {{"--backend", "carrier-pigeon"}, "--backend"},
      {{"--epoch", "2999-01-01"}, "future"},
      {{"--lead-ms", "5"}, "--lead-ms"},
      {{"--time-unit-ms", "100"}, "time unit 100 ms"},
      {{"--time-unit-ms", "1000", "--lead-ms", "1500"}, "--lead-ms"},
      {{"--layout", "js-safe", "--time-unit-ms", "1"}, "at least 30"},
      {{"--config", dir + "/missing.toml"}, "missing.toml"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--state-dir", dir, "--listen",
                                     "127.0.0.1:" + std::to_string(testing::free_udp_port())};
    if (c.args[0] == "--listen") args.resize(2);
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto result = testing::run_to_end(flurryd, args);
    EXPECT_NE(result.exit_code, 0) << c.args[0] << " " << (c.args.size() > 1 ? c.args[1] : "");
    EXPECT_NE(result.output.find(c.expected), std::string::npos) << "expected '" << c.expected << "' in:\n"
                                                                 << result.output;
  }
  // A config file with an unknown key and with a value out of range.
  {
    std::ofstream(dir + "/bad.toml") << "workers = 2\nnode_idd = 3\n";
    const auto result = testing::run_to_end(flurryd, {"--state-dir", dir, "--config", dir + "/bad.toml"});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.output.find("unknown key 'node_idd'"), std::string::npos) << result.output;
  }
  {
    std::ofstream(dir + "/range.toml") << "lead_ms = 99999999\n";
    const auto result = testing::run_to_end(flurryd, {"--state-dir", dir, "--config", dir + "/range.toml"});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.output.find("lead_ms"), std::string::npos) << result.output;
  }
  const auto help = testing::run_to_end(flurryd, {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--lead-ms"), std::string::npos);
}

TEST(Flurryd, CorruptOrForeignStateRefusesToStartUnlessOverridden) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  server.daemon.signal(SIGTERM);
  ASSERT_EQ(server.daemon.wait(testing::exit_timeout_ms), 0);

  // Another node id on the same state: refused, then accepted with the override.
  auto foreign = testing::run_to_end(server.flurryd, server.args({"--node-id", "7"}));
  EXPECT_NE(foreign.exit_code, 0);
  EXPECT_NE(foreign.output.find("--accept-state-change"), std::string::npos) << foreign.output;

  // Both slots corrupt.
  {
    std::fstream file(server.state_dir + "/watermark", std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(file.good());
    const std::string junk(64, '\x5a');
    file.seekp(0);
    file.write(junk.data(), 64);
    file.seekp(4096);
    file.write(junk.data(), 64);
  }
  auto corrupt = testing::run_to_end(server.flurryd, server.args());
  EXPECT_NE(corrupt.exit_code, 0);
  EXPECT_NE(corrupt.output.find("watermark"), std::string::npos) << corrupt.output;
  EXPECT_NE(corrupt.output.find("--accept-corrupt-state"), std::string::npos) << corrupt.output;

  ASSERT_NO_FATAL_FAILURE(server.start({"--accept-corrupt-state"}));
  EXPECT_NE(server.daemon.log().find("corrupt"), std::string::npos);
  server.stop();
}

TEST(Flurryd, SecondInstanceOnSameStateFailsAndSigtermRestartIssuesAbove) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  auto client = make_client(server.address(), answered);
  std::vector<std::uint64_t> first;
  client::Error error;
  ASSERT_TRUE(client->get(10'000, first, &error)) << error.message;

  std::vector<std::string> args = server.args();
  args[3] = "127.0.0.1:" + std::to_string(testing::free_udp_port());
  const auto second = testing::run_to_end(server.flurryd, args);
  EXPECT_NE(second.exit_code, 0);
  EXPECT_NE(second.output.find(server.state_dir), std::string::npos) << second.output;

  server.daemon.signal(SIGTERM);
  ASSERT_EQ(server.daemon.wait(testing::exit_timeout_ms), 0);
  EXPECT_NE(server.daemon.log().find("stopped"), std::string::npos);
  ASSERT_NO_FATAL_FAILURE(server.start());
  std::vector<std::uint64_t> again;
  ASSERT_TRUE(client->get(10'000, again, &error)) << error.message;
  EXPECT_GT(*std::min_element(again.begin(), again.end()), *std::max_element(first.begin(), first.end()));
  EXPECT_TRUE(becomes_healthy(server)) << server.control("health").dump();
  const auto status = server.control("status");
  EXPECT_EQ(status["lease"]["mode"], "local");

  // drain: GET_IDS answered FENCED with detail "draining" (clients move on; the C++ client
  // reports ErrorCode::draining), PING still answered, health says no, and no later renewal
  // undoes it.
  EXPECT_EQ(server.control("drain")["state"], "draining");
  std::vector<std::uint64_t> drained;
  ASSERT_FALSE(client->get(1, drained, &error));
  EXPECT_EQ(error.code, client::ErrorCode::draining) << error.message;
  EXPECT_TRUE(client->ping(&error).has_value()) << error.message;
  // Until the renew thread's ticks have seen the clock 1.5 s past the drain (a renewal would
  // be due long before that at --lead-ms 1000), however slowly this machine runs them: the
  // tick records the time it saw (watermark.now_t, in ms) even while it renews nothing.
  const auto seen_t = [&] { return server.control("status")["watermark"]["now_t"].get<std::uint64_t>(); };
  const std::uint64_t drained_t = seen_t();
  for (const std::uint64_t until = testing::now_ms() + 60'000;
       seen_t() < drained_t + 1500 && testing::now_ms() < until;) {
    testing::sleep_ms(50);
  }
  ASSERT_GE(seen_t(), drained_t + 1500) << "the renew thread did not tick for 60 s";
  EXPECT_EQ(server.control("health")["healthy"], false);
  EXPECT_EQ(server.control("status")["state"], "draining");
  ASSERT_FALSE(client->get(1, drained, &error));
  server.stop();
}

// flurryctl top: rates per worker under a status line. On a terminal (a real tmux pane) it
// redraws in place, so the screen holds one table however many intervals passed; into a pipe
// it prints one block per interval.
TEST(Flurryd, FlurryctlTopRedrawsInPlaceOnATerminal) {
  Server server;
  server.start();
  const std::string flurryctl = testing::env_or_die("FLURRYCTL");
  const std::vector<std::string> top = {"--control-socket", server.control_socket(), "top", "--interval-ms",
                                        "100"};
  std::vector<std::string> piped = top;
  piped.insert(piped.end(), {"--count", "3"});
  const testing::RunResult blocks = testing::run_to_end(flurryctl, piped);
  ASSERT_EQ(blocks.exit_code, 0) << blocks.output;
  std::size_t headers = 0;
  for (auto at = blocks.output.find("req/s"); at != std::string::npos;
       at = blocks.output.find("req/s", at + 1))
    ++headers;
  EXPECT_EQ(headers, 3U) << blocks.output;
  EXPECT_NE(blocks.output.find("state serving"), std::string::npos) << blocks.output;

  const std::string tmux = "/usr/bin/tmux";
  ASSERT_EQ(access(tmux.c_str(), X_OK), 0) << "tmux missing: apt-get install -y tmux (scripts/setup)";
  const std::string session = "flurry-top-" + std::to_string(getpid());
  // Five intervals, then a line that says top has ended; the shell then waits (so the pane,
  // and what top drew in it, stays until the session is killed). The screen is read once that
  // line is on it: all five tables were drawn by then, however slowly this machine drew them.
  std::string command = flurryctl;
  for (const auto& arg : top) command += " '" + arg + "'";
  command += " --count 5; echo flurryctl-top-ended; sleep 600";
  ASSERT_EQ(testing::run_to_end(tmux, {"new-session", "-d", "-s", session, "-x", "120", "-y", "30", command})
                .exit_code,
            0);
  std::string screen;
  for (const std::uint64_t until = testing::now_ms() + 60'000; testing::now_ms() < until;
       testing::sleep_ms(100)) {
    screen = testing::run_to_end(tmux, {"capture-pane", "-p", "-t", session}).output;
    if (screen.find("flurryctl-top-ended") != std::string::npos) break;
  }
  testing::run_to_end(tmux, {"kill-session", "-t", session});
  ASSERT_NE(screen.find("flurryctl-top-ended"), std::string::npos) << "top did not end within 60 s:\n"
                                                                   << screen;
  std::size_t on_screen = 0;
  for (auto at = screen.find("req/s"); at != std::string::npos; at = screen.find("req/s", at + 1))
    ++on_screen;
  EXPECT_EQ(on_screen, 1U) << "one table on the screen after five intervals:\n" << screen;
  server.stop();
}

// --log-format json: every line flurryd writes is one JSON object with the stable keys, the
// multi-line start-up configuration included, and so is a refusal at start.
// `top --json` streams one object a line, and its rates are its counts' differences over its
// intervals. Nothing here depends on how fast this machine is: top runs until a sample shows
// IDs issued since its first one (a loader fetches all along; bounded at 60 s), then it is
// stopped, and every interval's rate is checked against its counts.
TEST(Flurryd, FlurryctlTopJsonStreamsOneObjectPerInterval) {
  Server server;
  server.start();
  std::atomic<bool> stop{false};
  std::vector<std::uint64_t> fetched;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  std::thread loader([&] {
    auto client = make_client(server.address());
    if (!client) return;
    client::Error error;
    while (!stop.load() && std::chrono::steady_clock::now() < deadline && fetched.size() < 20'000'000) {
      if (!client->get(100, fetched, &error)) std::this_thread::sleep_for(5ms);
    }
  });
  testing::ChildProcess top;
  const std::string top_log = server.state_dir + "/top.log";
  ASSERT_TRUE(top.spawn(testing::env_or_die("FLURRYCTL"),
                        {"--control-socket", server.control_socket(), "top", "--json", "--interval-ms", "200",
                         "--count", "300"},
                        top_log));
  std::vector<nlohmann::json> samples;
  const auto grew = [&] {
    return samples.size() >= 4 && samples.back()["counts"]["ids_issued"].get<std::uint64_t>() >
                                      samples.front()["counts"]["ids_issued"].get<std::uint64_t>();
  };
  while (!grew() && std::chrono::steady_clock::now() < deadline) {
    std::istringstream lines(top.log());
    samples.clear();
    for (std::string line; std::getline(lines, line) && lines.good();) {  // whole lines only
      ASSERT_TRUE(nlohmann::json::accept(line)) << "not one JSON object a line: " << line;
      samples.push_back(nlohmann::json::parse(line));
    }
    if (!top.running()) break;
    std::this_thread::sleep_for(50ms);
  }
  top.stop();
  stop = true;
  loader.join();
  ASSERT_TRUE(grew()) << "no IDs issued within 60 s while a client fetched all along: " << top.log();
  EXPECT_EQ(samples[0]["interval_s"].get<double>(), 0.0);
  // Each sample names the node's state; serving in one at least (the node issued IDs). Not in
  // every one: a watermark write pending past stall_ms (a busy disk on a loaded machine) is
  // reported as degraded_disk for that moment, rightly.
  EXPECT_TRUE(std::any_of(samples.begin(), samples.end(),
                          [](const nlohmann::json& sample) { return sample["state"] == "serving"; }));
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const nlohmann::json& sample = samples[i];
    EXPECT_TRUE(sample["state"].is_string() && sample["state"] != "?" && sample["state"] != "") << sample;
    ASSERT_EQ(sample["workers"].size(), 2U) << sample;
    EXPECT_TRUE(sample["total"].contains("busy_percent")) << sample;
    if (i == 0) continue;
    const double seconds = sample["interval_s"].get<double>();
    EXPECT_GE(seconds, 0.2) << "top sleeps 200 ms between samples: " << sample;
    for (const auto& [rate, count] :
         {std::pair{"ids_per_s", "ids_issued"}, std::pair{"requests_per_s", "requests"}}) {
      const std::uint64_t now = sample["counts"][count].get<std::uint64_t>();
      const std::uint64_t before = samples[i - 1]["counts"][count].get<std::uint64_t>();
      ASSERT_GE(now, before) << count << " went down without a restart";
      EXPECT_NEAR(sample["total"][rate].get<double>() * seconds, static_cast<double>(now - before),
                  1e-6 * static_cast<double>(now - before) + 1e-6)
          << rate << " is not the interval's " << count << ": " << sample;
    }
  }
  std::sort(fetched.begin(), fetched.end());
  EXPECT_EQ(std::adjacent_find(fetched.begin(), fetched.end()), fetched.end()) << "an ID was issued twice";
  server.stop();
}

TEST(Flurryd, JsonLogsAreOneObjectALine) {
  Server server;
  server.start({"--log-format", "json"});
  testing::TempDir other("flurry-it-json-");  // a second instance on the same address: refused
  const testing::RunResult refused = testing::run_to_end(
      server.flurryd,
      {"--log-format", "json", "--state-dir", other.path(), "--listen", server.address(), "--init"});
  server.stop();
  std::size_t events = 0;
  std::istringstream lines(server.daemon.log());
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(event.is_object()) << "not a JSON object: " << line;
    for (const char* key : {"time", "level", "msg", "service", "pid"})
      EXPECT_TRUE(event.contains(key)) << line;
    EXPECT_EQ(event.value("service", ""), "flurryd");
    ++events;
  }
  EXPECT_GE(events, 3U);
  EXPECT_NE(server.daemon.log().find("effective configuration:\\nbackend = "), std::string::npos)
      << "the configuration is one event, its lines escaped";

  EXPECT_NE(refused.exit_code, 0);
  const auto last = refused.output.substr(refused.output.rfind('{'));
  const auto event = nlohmann::json::parse(last, nullptr, false);
  ASSERT_TRUE(event.is_object()) << refused.output;
  EXPECT_EQ(event.value("level", ""), "error");
  EXPECT_NE(event.value("msg", "").find("already served"), std::string::npos) << refused.output;
  EXPECT_NE(testing::run_to_end(server.flurryd, {"--log-format", "xml"}).output.find("--log-format 'xml'"),
            std::string::npos);
}

TEST(Flurryd, SystemdNotifyReadyOnlyWhenServingWatchdogAndStoppingOnSigterm) {
  Server server;
  testing::NotifySocket notify(server.state_dir + "/notify.sock");
  ASSERT_TRUE(notify.bound()) << std::strerror(errno);
  ASSERT_TRUE(server.daemon.spawn(server.flurryd, server.args({"--init"}),
                                  server.state_dir + "/flurryd-0.log",
                                  {notify.env(), "WATCHDOG_USEC=400000"}));
  std::vector<std::string> seen;
  ASSERT_TRUE(notify.wait_for("READY=1", 60'000, &seen)) << server.daemon.log();  // bounds a start that hangs
  // At READY=1 the node serves already: the workers were started (flurryd logs that before its
  // control loop runs) and the first request is answered.
  EXPECT_NE(server.daemon.log().find("serving IDs on udp"), std::string::npos) << server.daemon.log();
  auto client = make_client(server.address(), 5000ms);
  ASSERT_TRUE(client);
  client::Error error;
  std::vector<std::uint64_t> ids;
  EXPECT_TRUE(client->get(1, ids, &error)) << "READY=1 before serving: " << error.message;
  EXPECT_NE(seen.back().find("STATUS=serving IDs on udp " + server.address()), std::string::npos)
      << seen.back();
  // WATCHDOG_USEC=400000: WATCHDOG=1 every 200 ms from the control loop; two arrive (the
  // bound only guards against none at all: a loaded machine may delay the loop).
  std::vector<std::string> watchdogs;
  ASSERT_TRUE(notify.wait_for("WATCHDOG=1", 30'000, &watchdogs));
  ASSERT_TRUE(notify.wait_for("WATCHDOG=1", 30'000, &watchdogs));
  for (const std::string& message : watchdogs)
    EXPECT_EQ(message.find("READY=1"), std::string::npos) << "READY=1 twice";
  server.daemon.signal(SIGTERM);
  std::vector<std::string> last;
  EXPECT_TRUE(notify.wait_for("STOPPING=1", 30'000, &last)) << server.daemon.log();
  EXPECT_EQ(server.daemon.wait(testing::exit_timeout_ms), 0) << server.daemon.log();
}

// flurryctl finds its flurryd without flags (FLURRY_STATE_DIR, FLURRY_CONTROL_SOCKET, then
// the default places: docs/operations.md) and says which socket it asked; every binary and
// flurryd's status tell the one project version.
TEST(Flurryd, FlurryctlFindsTheServerAndEveryoneTellsTheVersion) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  const std::string flurryctl = testing::env_or_die("FLURRYCTL");
  testing::RunResult found = testing::run_to_end(
      "/usr/bin/env", {"-u", "FLURRY_CONTROL_SOCKET", "FLURRY_STATE_DIR=" + server.state_dir, flurryctl, "-v",
                       "--json", "status"});
  ASSERT_EQ(found.exit_code, 0) << found.output;
  EXPECT_NE(found.output.find("asking " + server.state_dir + "/flurryd.sock (from FLURRY_STATE_DIR)"),
            std::string::npos)
      << found.output;
  const nlohmann::json status =
      nlohmann::json::parse(found.output.substr(found.output.find('{')), nullptr, false);
  ASSERT_TRUE(status.is_object()) << found.output;
  EXPECT_EQ(status.value("version", ""), FLURRY_VERSION_FOR_TESTS);
  // The socket variable wins over the state dir's, and a wrong one is named in the error.
  const testing::RunResult wrong = testing::run_to_end(
      "/usr/bin/env", {"FLURRY_STATE_DIR=" + server.state_dir,
                       "FLURRY_CONTROL_SOCKET=" + server.state_dir + "/nope.sock", flurryctl, "status"});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find(server.state_dir + "/nope.sock"), std::string::npos) << wrong.output;
  for (const auto& [binary, name] :
       {std::pair{server.flurryd, "flurryd"}, std::pair{flurryctl, "flurryctl"}}) {
    const testing::RunResult version = testing::run_to_end(binary, {"--version"});
    EXPECT_EQ(version.exit_code, 0) << version.output;
    EXPECT_EQ(version.output, std::string(name) + " " + FLURRY_VERSION_FOR_TESTS + "\n");
  }
  server.stop();
}

}  // namespace
}  // namespace flurry
