// tests/integration/front_doors_test.cc — issue 24 items 4 and 5 against a real flurryd: the
// front doors stay open, and only the owner touches the node.
//
//   * RESP: a new client is served while idle connections fill every slot; a new connection
//     from an address at --peer-connections-max is served and closes that address's oldest
//     idle one; an idle connection and one trickling an endless command are closed;
//   * HTTP: a new client is served while trickling connections (slowloris) fill every slot;
//   * the metrics port: /livez and /readyz are answered while trickling connections hold it;
//   * the control socket: idle clients do not lock flurryctl out; the socket is mode 0600
//     under umask 000; a client of another uid (nobody, in a forked child) is refused, its
//     drain not done, and counted;
//   * locks: a lock file held by another process refuses the start, naming the file and not
//     the holder's text; a user (nobody) squatting the old abstract lock names neither stops
//     flurryd nor speaks in its log, and cannot create a lock file;
//   * key files: a symlink or another user's file is refused; 200 key rotations through reload
//     all succeed, each new key is served at once, and a recycled slot counts nothing of the
//     key before it.
// Every wait polls with a generous bound; every load loop is bounded in count and time; the
// tests run as root (CI does), and drop to nobody only in forked children they wait for.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
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

constexpr uid_t nobody = 65534;

// A TCP connection to 127.0.0.1:port from `from` (any 127.0.0.0/8 address: each is its own
// peer for the per-address limits); -1 when it cannot connect within 5 s.
int connect_from(const std::string& from, std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, from.c_str(), &local.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0 ||
      connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& text) {
  return send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

// What the peer sends until it closes or `timeout_ms` passes with nothing more.
std::string read_some(int fd, int timeout_ms, std::size_t enough = 1) {
  std::string text;
  char chunk[4096];
  while (text.size() < enough) {
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, timeout_ms) <= 0) break;
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    text.append(chunk, static_cast<std::size_t>(n));
  }
  return text;
}

// True once the peer closed (EOF or reset) within timeout_ms; whatever it sent first is read.
bool closed_by_peer(int fd, std::uint64_t timeout_ms) {
  const std::uint64_t until = testing::now_ms() + timeout_ms;
  char chunk[4096];
  while (testing::now_ms() < until) {
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, 200) <= 0) continue;
    const ssize_t n = recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

// One RESP FLURRY.ID from a new connection from `from`: the answer's first line.
std::string resp_id(std::uint16_t port, const std::string& from = "127.0.0.1") {
  const int fd = connect_from(from, port);
  if (fd < 0) return "(cannot connect)";
  send_all(fd, "*1\r\n$9\r\nFLURRY.ID\r\n");
  const std::string answer = read_some(fd, 3000, 3);
  close(fd);
  return answer.substr(0, answer.find("\r\n"));
}

// GET `path` over HTTP/1.0 from a new connection from 127.0.0.1: status line and body.
std::string http_get(std::uint16_t port, const std::string& path) {
  const int fd = connect_from("127.0.0.1", port);
  if (fd < 0) return "(cannot connect)";
  send_all(fd, "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  const std::string answer = read_some(fd, 3000, 1 << 20);
  close(fd);
  return answer;
}

// Polls `attempt` (a fresh try each time) until it returns true, up to limit_ms.
template <typename Attempt>
bool eventually(Attempt attempt, std::uint64_t limit_ms) {
  const std::uint64_t until = testing::now_ms() + limit_ms;
  while (testing::now_ms() < until) {
    if (attempt()) return true;
    testing::sleep_ms(200);
  }
  return false;
}

// Slow clients: `per_address` connections from each of `addresses`, each sending `head` and
// then one byte of `trickle` a second, reopened when the server closes them, until stopped
// (at most 90 s and 20000 connections in all: bounded).
class Trickle {
 public:
  Trickle(std::uint16_t port, std::vector<std::string> addresses, int per_address, std::string head,
          char trickle = 'a')
      : port_(port),
        addresses_(std::move(addresses)),
        per_address_(per_address),
        head_(std::move(head)),
        trickle_(trickle) {
    for (const std::string& address : addresses_) {
      for (int i = 0; i < per_address_; ++i) fds_.push_back({address, open_one(address)});
    }
    thread_ = std::thread([this] { run(); });
  }
  ~Trickle() {
    stop_.store(true);
    thread_.join();
    for (const auto& [address, fd] : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  std::size_t opened() const { return opened_.load(); }

 private:
  int open_one(const std::string& address) {
    if (opened_.load() >= 20'000) return -1;
    const int fd = connect_from(address, port_);
    if (fd < 0) return -1;
    ++opened_;
    if (!send_all(fd, head_)) {
      close(fd);
      return -1;
    }
    return fd;
  }
  void run() {
    const std::uint64_t until = testing::now_ms() + 90'000;
    while (!stop_.load() && testing::now_ms() < until) {
      for (auto& [address, fd] : fds_) {
        if (stop_.load()) break;
        if (fd >= 0 && !send_all(fd, std::string(1, trickle_))) {
          close(fd);
          fd = -1;
        }
        if (fd < 0) fd = open_one(address);
      }
      for (int i = 0; i < 10 && !stop_.load(); ++i) testing::sleep_ms(100);
    }
  }

  std::uint16_t port_;
  std::vector<std::string> addresses_;
  int per_address_;
  std::string head_;
  char trickle_;
  std::vector<std::pair<std::string, int>> fds_;
  std::atomic<std::size_t> opened_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::vector<std::string> loopback_addresses(int first, int count) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back("127.0.0." + std::to_string(first + i));
  return out;
}

struct Node : testing::LocalFlurryd {
  explicit Node(std::vector<std::string> flags = {"--lead-ms", "1000"})
      : LocalFlurryd("flurry-door-", std::move(flags)) {}
  std::string metrics() {
    Result<nlohmann::json> reply = control::control_request(control_socket(), "metrics", 5000);
    return reply.ok() ? reply->value("metrics", "") : "";
  }
};

// A counter's value in the Prometheus text (0 when absent).
std::uint64_t sample(const std::string& text, const std::string& name) {
  const std::size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return 0;
  return std::stoull(text.substr(at + name.size() + 2));
}

TEST(FrontDoors, RespServesANewClientWhileIdleConnectionsFillEverySlot) {
  Node node;
  const std::uint16_t port = testing::free_tcp_port();
  ASSERT_NO_FATAL_FAILURE(node.start({"--init", "--resp-listen", "127.0.0.1:" + std::to_string(port)}));
  // 256 idle connections (the default --connections-max), 32 from each of 8 addresses (under
  // the default 64 per address): every slot is taken by a client that sends nothing.
  std::vector<int> idle;
  for (const std::string& address : loopback_addresses(2, 8)) {
    for (int i = 0; i < 32; ++i) {
      const int fd = connect_from(address, port);
      ASSERT_GE(fd, 0) << "cannot open idle connection " << idle.size();
      idle.push_back(fd);
    }
  }
  // A new client sends its command at once: it is served (the longest-idle one is shed).
  std::string last;
  EXPECT_TRUE(eventually(
      [&] {
        last = resp_id(port);
        return !last.empty() && last[0] == ':';
      },
      30'000))
      << "last answer: " << last;
  EXPECT_TRUE(eventually(
      [&] {
        return sample(node.metrics(), "flurry_front_door_events_total{door=\"resp\",event=\"shed\"}") >= 1;
      },
      10'000))
      << node.metrics();
  for (const int fd : idle) close(fd);
  node.stop();
}

TEST(FrontDoors, RespAddressAtItsLimitLosesItsOwnIdleConnectionForANewOne) {
  Node node;
  const std::uint16_t port = testing::free_tcp_port();
  ASSERT_NO_FATAL_FAILURE(node.start({"--init", "--resp-listen", "127.0.0.1:" + std::to_string(port),
                                      "--peer-connections-max", "4", "--connections-max", "64"}));
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(connect_from("127.0.0.2", port));
    ASSERT_GE(held.back(), 0);
  }
  // A fifth from that address is served; one of the address's idle connections is closed for it.
  std::string served;
  EXPECT_TRUE(eventually(
      [&] {
        served = resp_id(port, "127.0.0.2");
        return !served.empty() && served[0] == ':';
      },
      20'000))
      << served;
  bool one_closed = false;
  for (int round = 0; round < 100 && !one_closed; ++round) {  // at most about 20 s
    for (const int fd : held) one_closed = one_closed || closed_by_peer(fd, 50);
  }
  EXPECT_TRUE(one_closed) << "none of the address's idle connections was closed for the new one";
  const std::string text = node.metrics();
  EXPECT_GE(sample(text, "flurry_front_door_events_total{door=\"resp\",event=\"shed_peer\"}"), 1U) << text;
  EXPECT_EQ(sample(text, "flurry_front_door_events_total{door=\"resp\",event=\"shed\"}"), 0U) << text;
  for (const int fd : held) close(fd);
  node.stop();
}

TEST(FrontDoors, RespClosesIdleConnectionsAndCommandsThatNeverComplete) {
  Node node;
  const std::uint16_t port = testing::free_tcp_port();
  ASSERT_NO_FATAL_FAILURE(node.start({"--init", "--resp-listen", "127.0.0.1:" + std::to_string(port),
                                      "--idle-timeout-s", "2", "--request-timeout-s", "1"}));
  const int idle = connect_from("127.0.0.1", port);
  ASSERT_GE(idle, 0);
  EXPECT_TRUE(closed_by_peer(idle, 30'000)) << "an idle connection stayed open";
  close(idle);
  // A command that never completes, one byte every 200 ms: closed while its bytes still come.
  const int slow = connect_from("127.0.0.1", port);
  ASSERT_GE(slow, 0);
  // A 500-byte argument (under the 512 allowed): at most 150 of its bytes come.
  ASSERT_TRUE(send_all(slow, "*2\r\n$4\r\nECHO\r\n$500\r\n"));
  bool closed = false;
  for (int i = 0; i < 150 && !closed; ++i) {  // at most 30 s
    closed = !send_all(slow, "x") || closed_by_peer(slow, 200);
  }
  EXPECT_TRUE(closed) << "a trickling command was never closed";
  close(slow);
  const std::string text = node.metrics();
  EXPECT_GE(sample(text, "flurry_front_door_events_total{door=\"resp\",event=\"idle_timeout\"}"), 1U) << text;
  EXPECT_GE(sample(text, "flurry_front_door_events_total{door=\"resp\",event=\"request_timeout\"}"), 1U)
      << text;
  node.stop();
}

TEST(FrontDoors, HttpServesANewClientWhileTricklingConnectionsFillEverySlot) {
  Node node;
  const std::uint16_t port = testing::free_tcp_port();
  ASSERT_NO_FATAL_FAILURE(node.start({"--init", "--http-listen", "127.0.0.1:" + std::to_string(port)}));
  // 300 connections (above the default 256), 30 from each of 10 addresses, each a request
  // head that grows by one byte a second.
  Trickle trickle(port, loopback_addresses(2, 10), 30, "GET /v1/ids HTTP/1.1\r\nHost: x\r\nX-Slow: ");
  std::string answer;
  EXPECT_TRUE(eventually(
      [&] {
        answer = http_get(port, "/v1/ids?n=2");
        return answer.rfind("HTTP/1.", 0) == 0 && answer.find(" 200 ") != std::string::npos &&
               answer.find("\"ids\":[") != std::string::npos;
      },
      30'000))
      << "last answer: " << answer.substr(0, 200) << " (trickling connections opened: " << trickle.opened()
      << ")";
  node.stop();
}

TEST(FrontDoors, ProbesAreAnsweredWhileSlowClientsHoldTheMetricsPort) {
  Node node;
  const std::uint16_t port = testing::free_tcp_port();
  ASSERT_NO_FATAL_FAILURE(node.start({"--init", "--metrics-listen", "127.0.0.1:" + std::to_string(port)}));
  // 24 slow scrapes (above the port's 16 connections), 12 from each of two addresses.
  Trickle trickle(port, loopback_addresses(2, 2), 12, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ");
  for (const char* path : {"/livez", "/readyz"}) {
    std::string answer;
    EXPECT_TRUE(eventually(
        [&] {
          answer = http_get(port, path);
          return answer.find(" 200 ") != std::string::npos && answer.find("\r\n\r\nok") != std::string::npos;
        },
        30'000))
        << path << ": " << answer.substr(0, 200);
  }
  node.stop();
}

TEST(FrontDoors, IdleControlClientsDoNotLockFlurryctlOut) {
  Node node;
  ASSERT_NO_FATAL_FAILURE(node.start({"--init"}));
  std::vector<int> idle;
  for (std::size_t i = 0; i < control::ControlServer::clients_max + 4; ++i) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, node.control_socket().c_str(), sizeof address.sun_path - 1);
    ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0)
        << std::strerror(errno);
    idle.push_back(fd);
  }
  testing::sleep_ms(500);  // the control loop has accepted them all (not needed for the check)
  testing::RunResult status;
  EXPECT_TRUE(eventually(
      [&] {
        status = testing::run_to_end(testing::env_or_die("FLURRYCTL"),
                                     {"--control-socket", node.control_socket(), "status"});
        return status.exit_code == 0;
      },
      20'000))
      << status.output;
  for (const int fd : idle) close(fd);
  node.stop();
}

// A control socket that takes the connection and never answers (a flurryd stopped with SIGSTOP,
// or too busy): flurryctl waits --timeout-ms, then says how long it waited and how to wait
// longer, and exits 1; a wait below 100 ms is refused as a bad flag (exit 2).
TEST(FrontDoors, FlurryctlNamesItsWaitWhenTheControlSocketDoesNotAnswer) {
  const testing::TempDir dir("flurry-silent-control-");
  const std::string path = dir.sub("flurryd.sock");
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0)
      << std::strerror(errno);
  ASSERT_EQ(listen(listener, 8), 0);  // the kernel completes connections; nothing is read
  const testing::RunResult silent = testing::run_to_end(
      testing::env_or_die("FLURRYCTL"), {"--control-socket", path, "--timeout-ms", "200", "status"});
  EXPECT_EQ(silent.exit_code, 1) << silent.output;
  EXPECT_NE(silent.output.find("no answer from " + path + " within 200 ms"), std::string::npos)
      << silent.output;
  EXPECT_NE(silent.output.find("--timeout-ms waits longer"), std::string::npos) << silent.output;
  const testing::RunResult too_short = testing::run_to_end(
      testing::env_or_die("FLURRYCTL"), {"--control-socket", path, "--timeout-ms", "50", "status"});
  EXPECT_EQ(too_short.exit_code, 2) << too_short.output;
  EXPECT_NE(too_short.output.find("--timeout-ms"), std::string::npos) << too_short.output;
  close(listener);
}

// In a forked child: become nobody, send `request` to the control socket, write the answer
// (or the errno text) to `out`. The child only makes system calls and _exits.
std::string as_nobody_on_socket(const std::string& socket_path, const std::string& request) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return "pipe failed";
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  const pid_t child = fork();
  if (child == 0) {
    close(pipe_fds[0]);
    if (setgroups(0, nullptr) != 0 || setgid(nobody) != 0 || setuid(nobody) != 0) _exit(3);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      const char* text = std::strerror(errno);
      [[maybe_unused]] const ssize_t written = write(pipe_fds[1], text, std::strlen(text));
      _exit(0);
    }
    timeval timeout{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    // MSG_NOSIGNAL: flurryd may have refused and closed already (EPIPE, not SIGPIPE).
    [[maybe_unused]] const ssize_t sent = send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    char answer[512];
    const ssize_t n = read(fd, answer, sizeof answer);
    if (n > 0) {
      [[maybe_unused]] const ssize_t written = write(pipe_fds[1], answer, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == ECONNRESET) {
      [[maybe_unused]] const ssize_t written = write(pipe_fds[1], "(reset)", 7);
    } else {
      const char* text = n == 0 ? "(closed without an answer)" : std::strerror(errno);
      [[maybe_unused]] const ssize_t written = write(pipe_fds[1], text, std::strlen(text));
    }
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string answer;
  char chunk[512];
  for (;;) {
    pollfd ready{pipe_fds[0], POLLIN, 0};
    if (poll(&ready, 1, 10'000) <= 0) break;
    const ssize_t n = read(pipe_fds[0], chunk, sizeof chunk);
    if (n <= 0) break;
    answer.append(chunk, static_cast<std::size_t>(n));
  }
  close(pipe_fds[0]);
  if (child > 0) {
    int status = 0;
    for (int i = 0; i < 100 && waitpid(child, &status, WNOHANG) == 0; ++i) testing::sleep_ms(50);
    if (waitpid(child, &status, WNOHANG) == 0) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
    }
  }
  return answer;
}

TEST(OwnerOnly, ControlSocketIsMode0600UnderUmask000AndRefusesOtherUsers) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to run a client as nobody)";
  Node node;
  const mode_t before = umask(0);
  node.start({"--init"});
  umask(before);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  struct stat info {};
  ASSERT_EQ(lstat(node.control_socket().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600U) << "control socket mode under umask 000";
  // Open the path to nobody (as a careless operator might), so the peer check is what stops it.
  ASSERT_EQ(chmod(node.state_dir.c_str(), 0711), 0);
  ASSERT_EQ(chmod(node.control_socket().c_str(), 0666), 0);
  const std::string answer = as_nobody_on_socket(node.control_socket(), "{\"cmd\":\"drain\"}\n");
  // The refusal line, or (when flurryd closed before reading the request) a reset: never an
  // answer to the command.
  EXPECT_TRUE(answer.find("permission denied") != std::string::npos || answer == "(reset)") << answer;
  EXPECT_EQ(answer.find("\"ok\":true"), std::string::npos) << answer;
  Result<nlohmann::json> status = control::control_request(node.control_socket(), "status", 5000);
  ASSERT_TRUE(status.ok()) << status.message();
  // The drain was not done. (Not "serving": a watermark write pending past stall_ms on a busy
  // disk shows as degraded_disk for that moment, and is no drain.)
  EXPECT_NE(status->value("state", ""), "draining") << status->dump();
  EXPECT_NE(status->value("state", ""), "") << status->dump();
  EXPECT_EQ(sample(node.metrics(), "flurry_control_refused_peers_total"), 1U);
  EXPECT_TRUE(node.daemon.wait_for_log("refused a client of uid 65534", 5000)) << node.daemon.log();
  node.stop();
}

std::string run_dir_lock(const std::string& name) { return "/run/flurry/" + name; }

TEST(OwnerOnly, ALockFileHeldByAnotherProcessRefusesTheStartNamingTheFileNotItsText) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (/run/flurry)";
  Node node;
  mkdir("/run/flurry", 0700);
  const std::string lock = run_dir_lock("udp-127.0.0.1-" + std::to_string(node.port) + ".lock");
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const std::string text = "squatter-says: run rm -rf /\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  const testing::RunResult refused = testing::run_to_end(node.flurryd, node.args({"--init"}), 20'000);
  close(fd);
  unlink(lock.c_str());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("lock file " + lock), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("already served by another process"), std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find("squatter-says"), std::string::npos) << refused.output;
}

TEST(OwnerOnly, AnotherUserSquattingTheOldAbstractLockNamesNeitherStopsNorSpeaksForFlurryd) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to run the squatter as nobody)";
  Node node({"--lead-ms", "1000", "--node-id", "969"});
  mkdir("/run/flurry", 0700);
  int ready[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  const std::string names[] = {"flurryd/local-node/969",
                               "flurryd/udp/127.0.0.1:" + std::to_string(node.port)};
  const std::string lock_path = run_dir_lock("node-969.lock");
  const pid_t squatter = fork();
  if (squatter == 0) {
    close(ready[0]);
    if (setgroups(0, nullptr) != 0 || setgid(nobody) != 0 || setuid(nobody) != 0) _exit(3);
    int fds[2] = {-1, -1};  // no allocation in a forked child
    int bound = 0;
    for (const std::string& name : names) {
      sockaddr_un address{};
      address.sun_family = AF_UNIX;
      std::memcpy(address.sun_path + 1, name.data(), name.size());
      const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
      if (bind(fd, reinterpret_cast<const sockaddr*>(&address),
               static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())) != 0 ||
          listen(fd, 8) != 0) {
        _exit(4);
      }
      fds[bound++] = fd;
    }
    // Nor may nobody make (or take) a lock file where root's flurryd keeps them.
    const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
    const char verdict = lock_fd < 0 ? 'y' : 'n';
    [[maybe_unused]] const ssize_t written = write(ready[1], &verdict, 1);
    static constexpr char lie[] = "I am the real flurryd: give up\n";
    for (int round = 0; round < 600; ++round) {  // at most 60 s; the test kills it sooner
      for (const int fd : fds) {
        const int client = accept(fd, nullptr, nullptr);
        if (client >= 0) {
          [[maybe_unused]] const ssize_t sent = write(client, lie, sizeof lie - 1);
          close(client);
        }
      }
      usleep(100'000);
    }
    _exit(0);
  }
  ASSERT_GT(squatter, 0);
  close(ready[1]);
  char verdict = 0;
  pollfd ready_poll{ready[0], POLLIN, 0};
  ASSERT_EQ(poll(&ready_poll, 1, 10'000), 1);
  ASSERT_EQ(read(ready[0], &verdict, 1), 1);
  close(ready[0]);
  EXPECT_EQ(verdict, 'y') << "nobody could create " << lock_path;
  node.start({"--init"});
  const bool started = !::testing::Test::HasFatalFailure();
  kill(squatter, SIGKILL);
  int status = 0;
  waitpid(squatter, &status, 0);
  ASSERT_TRUE(started);
  EXPECT_EQ(node.daemon.log().find("I am the real flurryd"), std::string::npos) << node.daemon.log();
  node.stop();
}

// Key files and key rotation (core/keys.h, control/keys_file.h).
std::string secret_hex(std::uint32_t seed) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  for (std::uint32_t i = 0; i < 16; ++i) {
    const auto byte = static_cast<std::uint8_t>(seed * 7 + i);
    hex += digits[byte >> 4];
    hex += digits[byte & 15];
  }
  return hex;
}

void write_key(const std::string& path, std::uint32_t id) {
  const std::string temporary = path + ".new";
  {
    std::ofstream file(temporary);
    file << "[[key]]\nname = \"key" << id << "\"\nid = " << id << "\nsecret = \"" << secret_hex(id) << "\"\n";
  }
  chmod(temporary.c_str(), 0600);
  ASSERT_EQ(std::rename(temporary.c_str(), path.c_str()), 0);
}

// One attempt, so a request the node counts is one the test made. Its answer must come (a late
// one would be a request counted with no answer taken, and the counts below are exact): the
// timeout is far beyond a loaded machine's delays; only the key rotated out waits it out.
std::unique_ptr<client::Client> signed_client(const std::string& address, std::uint32_t id,
                                              std::chrono::milliseconds timeout = 5000ms) {
  client::Options options;
  options.servers = {address};
  options.timeout = timeout;
  options.attempts = 1;
  client::Key key;
  key.id = id;
  for (std::uint32_t i = 0; i < 16; ++i) key.secret[i] = static_cast<std::uint8_t>(id * 7 + i);
  options.key = key;
  client::Error error;
  auto client = client::Client::create(options, &error);
  EXPECT_TRUE(client) << error.message;
  return client;
}

TEST(OwnerOnly, KeyFileThatIsASymlinkOrAnotherUsersIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to chown a file to nobody)";
  Node node({"--lead-ms", "1000", "--auth", "optional"});
  const std::string real = node.state_dir + "/real-keys.toml";
  const std::string link = node.state_dir + "/keys.toml";
  write_key(real, 7);
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  const testing::RunResult through_link =
      testing::run_to_end(node.flurryd, node.args({"--init", "--key-file", link}), 20'000);
  EXPECT_EQ(through_link.exit_code, 2) << through_link.output;
  EXPECT_NE(through_link.output.find("is a symlink"), std::string::npos) << through_link.output;
  ASSERT_EQ(chown(real.c_str(), nobody, nobody), 0);
  const testing::RunResult foreign =
      testing::run_to_end(node.flurryd, node.args({"--init", "--key-file", real}), 20'000);
  EXPECT_EQ(foreign.exit_code, 2) << foreign.output;
  EXPECT_NE(foreign.output.find("belongs to uid 65534"), std::string::npos) << foreign.output;
}

TEST(OwnerOnly, TwoHundredKeyRotationsThroughReloadEachServedWithFreshCounters) {
  Node node({"--lead-ms", "1000", "--auth", "optional"});
  const std::string key_file = node.state_dir + "/keys.toml";
  write_key(key_file, 1);
  ASSERT_NO_FATAL_FAILURE(node.start({"--init", "--key-file", key_file}));
  std::vector<std::uint64_t> ids;
  client::Error error;
  std::uint64_t client_overhead = 0;  // requests a client sends of its own, measured on key 2
  for (std::uint32_t id = 2; id <= 201; ++id) {
    write_key(key_file, id);
    Result<nlohmann::json> reloaded = Error{""};
    // A reload right after one that freed slots may be asked to wait a moment: bounded retries.
    for (int attempt = 0; attempt < 50; ++attempt) {
      reloaded = control::control_request(node.control_socket(), "keys-reload", 5000);
      if (reloaded.ok() && reloaded->value("ok", false)) break;
      testing::sleep_ms(100);
    }
    ASSERT_TRUE(reloaded.ok() && reloaded->value("ok", false))
        << "rotation to key " << id << ": " << (reloaded.ok() ? reloaded->dump() : reloaded.message());
    // The new key is served (the workers switch at their next burst): bounded attempts.
    auto client = signed_client(node.address(), id);
    bool served = false;
    for (int attempt = 0; attempt < 20 && !served; ++attempt) served = client->get(1, ids, &error);
    ASSERT_TRUE(served) << "key " << id << ": " << error.message;
    if (id != 2 && id != 201) continue;
    // Three more; then the key's counted requests: the IDs asked for plus what the client
    // adds of its own (an INFO, say) — measured on key 2, in a slot never used before. Key 201's
    // slot has held other keys by then (128 slots, 201 keys), each counted: its count must
    // hold none of theirs.
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(client->get(1, ids, &error)) << error.message;
    Result<nlohmann::json> stats = control::control_request(node.control_socket(), "stats", 5000);
    ASSERT_TRUE(stats.ok()) << stats.message();
    ASSERT_EQ((*stats)["keys"].size(), 1U) << stats->dump();
    EXPECT_EQ((*stats)["keys"][0].value("id", 0U), id);
    const auto counted = (*stats)["keys"][0].value("requests", std::uint64_t{0});
    if (id == 2) {
      ASSERT_GE(counted, 4U) << stats->dump();
      client_overhead = counted - 4;
    } else {
      EXPECT_EQ(counted, 4 + client_overhead) << stats->dump();
    }
  }
  // The keys rotated out are gone: key 200 is refused (an unknown key is dropped unanswered:
  // no answer is awaited, so the timeout is short).
  auto old = signed_client(node.address(), 200, 1000ms);
  EXPECT_FALSE(old->get(1, ids, &error));
  node.stop();
}

}  // namespace
}  // namespace flurry
