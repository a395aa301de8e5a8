// tests/support/support_test.cc — the test-support library's own contract: TempDir makes a
// private directory and removes it with everything in it; free ports can be bound;
// ChildProcess captures output and exit status, passes env and stdin, bounds every wait,
// ends a child that ignores SIGTERM or is stopped, and reaps by PID in its destructor;
// run_to_end kills a child that outlives its bound.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "tests/support/child_process.h"
#include "tests/support/http_get.h"
#include "tests/support/ports.h"
#include "tests/support/temp_dir.h"

namespace flurry::testing {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(TempDir, IsPrivateUnderTmpAndRemovedWithItsContents) {
  std::string path;
  {
    const TempDir dir("flurry-support-test-");
    path = dir.path();
    EXPECT_EQ(path.rfind("/tmp/flurry-support-test-", 0), 0U) << path;
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700U);
    EXPECT_EQ(dir.sub("a"), path + "/a");
    std::filesystem::create_directories(dir.sub("a/b"));
    std::ofstream(dir.sub("a/b/file")) << "x";
    const TempDir other;
    EXPECT_NE(other.path(), path);
    EXPECT_NE(other.path().find(program_invocation_short_name), std::string::npos) << other.path();
  }
  EXPECT_FALSE(exists(path));
}

TEST(Ports, AreNonZeroAndBindable) {
  const std::uint16_t udp = free_udp_port();
  const std::uint16_t tcp = free_tcp_port();
  EXPECT_NE(udp, 0);
  EXPECT_NE(tcp, 0);
  EXPECT_TRUE(bindable(SOCK_DGRAM, udp));
  EXPECT_TRUE(bindable(SOCK_STREAM, tcp));
}

// Asked for many ports before any server binds one (as a test starting several servers does),
// random picks would repeat one (500 of about 22000: nearly always); handed out, none repeats,
// of either type.
TEST(Ports, AreNeverHandedOutTwiceInOneProcess) {
  std::set<std::uint16_t> seen;
  for (int i = 0; i < 250; ++i) {
    EXPECT_TRUE(seen.insert(free_udp_port()).second) << "a UDP port handed out twice";
    EXPECT_TRUE(seen.insert(free_tcp_port()).second) << "a TCP port handed out twice";
  }
}

// Outside the range the kernel takes ports from for port-0 binds and unbound client sockets,
// so what runs beside a test cannot be handed its port before its server binds it.
TEST(Ports, AreOutsideTheEphemeralRange) {
  int low = 0, high = 0;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  ASSERT_GT(low, 0);
  ASSERT_GE(high, low);
  for (int i = 0; i < 100; ++i) {
    for (const std::uint16_t port : {free_udp_port(), free_tcp_port()}) {
      EXPECT_TRUE(port < low || port > high) << port << " is in " << low << ".." << high;
    }
  }
}

// Test servers get the larger room outside the ephemeral range, never part of the range itself,
// and a range that leaves too little room is refused with what to change.
TEST(Ports, PickFromTheLargerRoomOutsideTheEphemeralRange) {
  EXPECT_EQ(pick_range(32768, 60999), std::make_pair(10000, 32767));  // Linux's default
  EXPECT_EQ(pick_range(12000, 50000), std::make_pair(50001, 65535));
  EXPECT_EQ(pick_range(40000, 64999), std::make_pair(10000, 39999));
  EXPECT_EQ(pick_range(10000, 64535), std::make_pair(64536, 65535));  // exactly 1000 above
  try {
    pick_range(1024, 65000);
    ADD_FAILURE() << "1024..65000 leaves 535 ports, yet a range was picked";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("ip_local_port_range"), std::string::npos) << e.what();
  }
  EXPECT_THROW(pick_range(10500, 65000), std::runtime_error);
}

TEST(ChildProcess, CapturesOutputExitStatusEnvAndStdin) {
  const TempDir dir;
  std::ofstream(dir.sub("input")) << "from stdin\n";
  ChildProcess child;
  ASSERT_TRUE(child.spawn("/bin/sh",
                          {"-c", "echo out; echo err >&2; echo \"$FLURRY_SUPPORT_TEST\"; cat; exit 3"},
                          dir.sub("log"), {"FLURRY_SUPPORT_TEST=from env"}, dir.sub("input")));
  EXPECT_GT(child.pid(), 0);
  EXPECT_EQ(child.wait(10'000), 3);
  EXPECT_FALSE(child.running());
  EXPECT_EQ(child.log(), "out\nerr\nfrom env\nfrom stdin\n");
  // The log is appended to, not replaced.
  ASSERT_TRUE(child.spawn("/bin/sh", {"-c", "echo again"}, dir.sub("log")));
  EXPECT_EQ(child.wait(10'000), 0);
  EXPECT_EQ(child.log(), "out\nerr\nfrom env\nfrom stdin\nagain\n");
}

TEST(ChildProcess, ReportsAnExecFailureAndAMissingLogOrStdin) {
  const TempDir dir;
  ChildProcess child;
  ASSERT_TRUE(child.spawn(dir.sub("no-such-binary"), {}, dir.sub("log")));
  EXPECT_EQ(child.wait(10'000), 127);
  EXPECT_NE(child.log().find("cannot exec " + dir.sub("no-such-binary")), std::string::npos) << child.log();
  EXPECT_FALSE(child.spawn("/bin/true", {}, dir.sub("missing/log")));
  EXPECT_FALSE(child.spawn("/bin/true", {}, dir.sub("log"), {}, dir.sub("missing-input")));
  EXPECT_FALSE(child.running());
}

TEST(ChildProcess, WaitIsBoundedAndSignalEndsTheChild) {
  const TempDir dir;
  ChildProcess child;
  ASSERT_TRUE(child.spawn("/bin/sleep", {"30"}, dir.sub("log")));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(child.wait(200));
  // Bounded: back long before the child's 30 s end (a loaded machine adds to the 200 ms, not 20 s).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_TRUE(child.running());
  child.signal(SIGKILL);
  EXPECT_EQ(child.wait(10'000), 128 + SIGKILL);
  EXPECT_FALSE(child.running());
}

TEST(ChildProcess, WaitForLogSeesTheTextAndGivesUpWhenTheChildEnds) {
  const TempDir dir;
  ChildProcess child;
  ASSERT_TRUE(child.spawn("/bin/sh", {"-c", "sleep 0.2; echo ready; exec sleep 30"}, dir.sub("log")));
  EXPECT_TRUE(child.wait_for_log("ready", 10'000)) << child.log();
  child.stop();
  ChildProcess quiet;
  ASSERT_TRUE(quiet.spawn("/bin/sh", {"-c", "echo something else"}, dir.sub("quiet.log")));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(quiet.wait_for_log("ready", 40'000));
  // The child ends at once: noticing that takes milliseconds, waiting the bound out 40 s.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "did not notice the exit";
}

TEST(ChildProcess, StopEndsAStoppedChildAndOneThatIgnoresSigterm) {
  const TempDir dir;
  ChildProcess stopped;
  ASSERT_TRUE(stopped.spawn("/bin/sleep", {"30"}, dir.sub("stopped.log")));
  stopped.signal(SIGSTOP);
  const pid_t stopped_pid = stopped.pid();
  stopped.stop(10'000);
  EXPECT_EQ(stopped.pid(), -1);
  EXPECT_FALSE(stopped.running());
  EXPECT_NE(::kill(stopped_pid, 0), 0) << "pid " << stopped_pid << " is still there (not reaped)";

  ChildProcess stubborn;
  ASSERT_TRUE(stubborn.spawn("/bin/sh", {"-c", "trap '' TERM; echo trapped; while :; do sleep 1; done"},
                             dir.sub("stubborn.log")));
  ASSERT_TRUE(stubborn.wait_for_log("trapped", 10'000));
  const pid_t stubborn_pid = stubborn.pid();
  const auto start = std::chrono::steady_clock::now();
  stubborn.stop(300);
  // 300 ms, then SIGKILL: a loaded machine adds to it, but a stop that waited for the child
  // (which never ends by itself) would never return.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_NE(::kill(stubborn_pid, 0), 0) << "pid " << stubborn_pid << " survived stop()";
}

TEST(ChildProcess, DestructorEndsAndReapsTheChild) {
  const TempDir dir;
  pid_t pid = -1;
  {
    ChildProcess child;
    ASSERT_TRUE(child.spawn("/bin/sleep", {"30"}, dir.sub("log")));
    pid = child.pid();
    ASSERT_GT(pid, 0);
  }
  EXPECT_NE(::kill(pid, 0), 0) << "pid " << pid << " is still there (not ended or not reaped)";
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, WNOHANG), -1) << "already reaped: no such child";
}

TEST(RunToEnd, ReturnsStatusAndOutputAndKillsAChildPastItsBound) {
  const RunResult done = run_to_end("/bin/sh", {"-c", "echo hello; exit 4"});
  EXPECT_EQ(done.exit_code, 4);
  EXPECT_EQ(done.output, "hello\n");
  const auto start = std::chrono::steady_clock::now();
  const RunResult killed = run_to_end("/bin/sleep", {"30"}, 200);
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL);
  // Killed at its 200 ms bound: back long before the child's own 30 s end.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// A forked child plays the server (no thread: this test is single-threaded, tests/meson.build):
// it answers with the request line as the body, so the path sent is checked too. Then, with
// nobody listening, the body is "".
TEST(HttpGet, ReturnsTheBodyAndNothingWithoutAServer) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<const sockaddr*>(&at), sizeof at), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t length = sizeof at;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&at), &length), 0);
  const std::uint16_t port = ntohs(at.sin_port);
  const pid_t server = ::fork();
  ASSERT_GE(server, 0);
  if (server == 0) {
    const int fd = ::accept(listener, nullptr, nullptr);
    char request[512] = {};
    const ssize_t n = fd < 0 ? -1 : ::recv(fd, request, sizeof request - 1, 0);
    const std::string line =
        n > 0 ? std::string(request, static_cast<std::size_t>(n)).substr(0, std::string(request).find("\r\n"))
              : "";
    const std::string answer = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + line + "\n";
    if (fd >= 0) (void)!::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
    ::_exit(0);
  }
  EXPECT_EQ(http_get_body(port, "/v1/x?n=3"), "GET /v1/x?n=3 HTTP/1.0\n");
  int status = 0;
  EXPECT_EQ(::waitpid(server, &status, 0), server);
  ::close(listener);
  EXPECT_EQ(http_get_body(port, "/"), "");
}

}  // namespace
}  // namespace flurry::testing
