// tests/integration/serving.h — one flurryd under test on 127.0.0.1, and the bounded wait
// until a started flurryd answers GET_IDS through the real client library (the test fails,
// with the daemon's log, if it exits or never serves).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/client.h"
#include "tests/support/child_process.h"
#include "tests/support/ports.h"
#include "tests/support/temp_dir.h"

namespace flurry::testing {

// How long a flurryd may take to end after SIGTERM or SIGKILL: generous, a bound only so
// that a flurryd that hangs fails its test instead of running into the suite's timeout.
inline constexpr std::uint64_t exit_timeout_ms = 20'000;

// `also_ready` (optional) is polled once IDs are served, e.g. for the metrics endpoint. The
// limit only ends a wait for a flurryd that never serves: a sanitizer build on a loaded 2-CPU
// machine may take seconds to start, and a start that is merely slow must not fail the test.
// (The probe's short timeout costs nothing: a late answer is followed by another probe.)
inline void wait_serving(ChildProcess& daemon, const std::string& address,
                         const std::function<bool()>& also_ready = {},
                         std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  client::Options options;
  options.servers = {address};
  options.timeout = std::chrono::milliseconds(50);
  options.attempts = 1;
  client::Error error;
  auto probe = client::Client::create(options, &error);
  ASSERT_TRUE(probe) << error.message;
  std::vector<std::uint64_t> ids;
  bool serving = false;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(daemon.running()) << "flurryd exited during start:\n" << daemon.log();
    if (!serving) serving = probe->get(1, ids, &error);
    if (serving && (!also_ready || also_ready())) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL() << "flurryd did not get ready within " << limit.count() << " ms:\n" << daemon.log();
}

// $FLURRYD with its own state directory (removed at the end, after the daemon is stopped) on
// a free UDP port of 127.0.0.1. Every start runs `flurryd --state-dir D --listen A flags...
// extra...`, logging to D/flurryd-N.log (N counts the starts).
struct LocalFlurryd {
  LocalFlurryd(const std::string& dir_prefix, std::vector<std::string> flags_of_every_start,
               const std::string& base_dir = "/tmp")
      : dir(dir_prefix, base_dir), flags(std::move(flags_of_every_start)) {}

  TempDir dir;
  std::vector<std::string> flags;
  std::string state_dir = dir.path();
  std::uint16_t port = free_udp_port();
  std::string flurryd = env_or_die("FLURRYD");
  ChildProcess daemon;
  int starts = 0;

  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  std::string control_socket() const { return state_dir + "/flurryd.sock"; }

  // The arguments of a start; args()[3] is the listen address.
  std::vector<std::string> args(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> all = {"--state-dir", state_dir, "--listen", address()};
    all.insert(all.end(), flags.begin(), flags.end());
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
  }

  // Starts flurryd and waits (bounded) until it answers GET_IDS.
  void start(const std::vector<std::string>& extra = {}) {
    ASSERT_TRUE(
        daemon.spawn(flurryd, args(extra), state_dir + "/flurryd-" + std::to_string(starts++) + ".log"));
    wait_serving(daemon, address());
  }

  // SIGTERM: flurryd must exit 0 within exit_timeout_ms.
  void stop() {
    daemon.signal(SIGTERM);
    EXPECT_EQ(daemon.wait(exit_timeout_ms), 0) << daemon.log();
  }
};

}  // namespace flurry::testing
