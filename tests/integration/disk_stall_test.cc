// tests/integration/disk_stall_test.cc — a real flurryd whose state dir lives on a small ext4
// file system (a loop file) that the test freezes with fsfreeze: every watermark fsync then
// hangs in the kernel. While it hangs, the control socket (on another file system) must keep
// answering `status` and `health`, name the degraded state and its cause, and say unhealthy;
// after the thaw the node serves again and the stall stays on record. IDs fetched before,
// during (up to the held ceiling) and after are all unique.
//
// Needs root (losetup/mount/fsfreeze): CI runs as root. Without root the test fails, it does
// not skip: the suite is promised.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "client/client.h"
#include "control/control_server.h"
#include "serving.h"
#include "tests/support/child_process.h"
#include "tests/support/ports.h"
#include "tests/support/status.h"
#include "tests/support/temp_dir.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;

int shell(const std::string& command) { return std::system(command.c_str()); }

// A 64 MiB ext4 file system on a loop file, mounted under a temporary directory; unmounted
// (thawed first) by the destructor, whatever happened.
struct LoopFs {
  testing::TempDir dir{"flurry-stall-"};  // removed after the destructor unmounted it
  std::string image = dir.sub("fs.img");
  std::string mount_point = dir.sub("mnt");
  bool mounted = false;
  bool frozen = false;

  bool make() {
    if (shell("truncate -s 64M " + image + " && mkfs.ext4 -q -F " + image + " >/dev/null 2>&1 && mkdir -p " +
              mount_point + " && mount -o loop " + image + " " + mount_point) != 0) {
      return false;
    }
    mounted = true;
    return true;
  }
  bool freeze() { return (frozen = shell("fsfreeze --freeze " + mount_point) == 0); }
  bool thaw() {
    if (!frozen) return true;
    frozen = shell("fsfreeze --unfreeze " + mount_point) != 0;
    return !frozen;
  }
  ~LoopFs() {
    thaw();
    if (mounted) shell("umount " + mount_point);  // also frees the loop device (autoclear)
  }
};

std::uint64_t fetch_unique(client::Client& client, std::set<std::uint64_t>& seen, int requests) {
  std::uint64_t fetched = 0;
  std::vector<std::uint64_t> ids;
  client::Error error;
  for (int i = 0; i < requests; ++i) {
    ids.clear();  // get() appends
    if (!client.get(100, ids, &error)) continue;
    for (const std::uint64_t id : ids) {
      EXPECT_TRUE(seen.insert(id).second) << "duplicate ID " << id;
      ++fetched;
    }
  }
  return fetched;
}

TEST(DiskStall, ControlSocketAnswersAndNamesTheStallWhileTheStateDiskIsFrozen) {
  ASSERT_EQ(geteuid(), 0U) << "this test mounts a loop file system and freezes it: run as root";
  LoopFs fs;
  ASSERT_TRUE(fs.make()) << "cannot make and mount an ext4 loop file system under " << fs.dir.path();
  const std::string state_dir = fs.mount_point + "/state";
  const std::string control_socket = fs.dir.sub("flurryd.sock");  // not on the frozen file system
  const std::uint16_t port = testing::free_udp_port();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  testing::ChildProcess daemon;
  ASSERT_TRUE(daemon.spawn(testing::env_or_die("FLURRYD"),
                           {"--state-dir", state_dir, "--init", "--control-socket", control_socket,
                            "--listen", address, "--lead-ms", "1000", "--workers", "1"},
                           fs.dir.sub("flurryd.log")));
  testing::wait_serving(daemon, address);

  client::Options options;
  options.servers = {address};
  options.timeout = 2000ms;  // flurryd answers (RETRY at the held ceiling) even while frozen
  options.attempts = 1;
  options.retry_budget = 50ms;  // at the held ceiling the answer is RETRY: do not wait long
  client::Error error;
  auto client = client::Client::create(options, &error);
  ASSERT_TRUE(client) << error.message;
  std::set<std::uint64_t> seen;
  EXPECT_GT(fetch_unique(*client, seen, 50), 0U);

  ASSERT_TRUE(fs.freeze()) << "fsfreeze failed on " << fs.mount_point;
  // A renewal is due every lead/4; once one hangs longer than the stall threshold the node
  // says so. Asked until it does (bounded): how soon is the scheduler's and the machine's
  // business. Each answer must come while the disk stays frozen: that is the property (10 s
  // per question is far beyond a control loop that does not wait for the disk).
  nlohmann::json status;
  long long answered_ms = 0;
  for (const auto until = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < until;) {
    const auto asked = std::chrono::steady_clock::now();
    const Status answered =
        flurry::testing::take(control::control_request(control_socket, "status", 10000), &status);
    ASSERT_TRUE(answered.ok()) << "the control socket did not answer while the disk was frozen: "
                               << answered.message() << "\n"
                               << daemon.log();
    answered_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - asked)
            .count();
    if (status.value("state", "") == "degraded_disk") break;
    std::this_thread::sleep_for(100ms);
  }
  std::printf("status answered in %lld ms during the stall: %s\n", answered_ms, status.dump().c_str());
  EXPECT_EQ(status.value("state", ""), "degraded_disk") << status.dump();
  EXPECT_FALSE(status.value("healthy", true)) << status.dump();
  EXPECT_NE(status.value("cause", "").find("pending"), std::string::npos) << status.dump();

  nlohmann::json health;
  ASSERT_TRUE(flurry::testing::is_ok(
      flurry::testing::take(control::control_request(control_socket, "health", 10000), &health)));
  EXPECT_FALSE(health.value("healthy", true)) << health.dump();
  EXPECT_EQ(health.value("state", ""), "degraded_disk") << health.dump();
  EXPECT_GE(health.value("pending_ms", 0), 100) << health.dump();
  // Whatever is served meanwhile (up to the held ceiling) is unique too.
  fetch_unique(*client, seen, 20);

  ASSERT_TRUE(fs.thaw());
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  bool healthy_again = false;
  while (std::chrono::steady_clock::now() < deadline && !healthy_again) {
    nlohmann::json again;
    healthy_again =
        flurry::testing::take(control::control_request(control_socket, "health", 10000), &again).ok() &&
        again.value("healthy", false);
    if (!healthy_again) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(healthy_again) << daemon.log();
  nlohmann::json watermark;
  ASSERT_TRUE(flurry::testing::is_ok(
      flurry::testing::take(control::control_request(control_socket, "watermark", 10000), &watermark)));
  EXPECT_GE(watermark.value("stalled_writes", 0), 1) << watermark.dump();
  EXPECT_GT(fetch_unique(*client, seen, 50), 0U);
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait(testing::exit_timeout_ms), 0) << daemon.log();
}

}  // namespace
}  // namespace flurry
