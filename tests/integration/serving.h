// tests/integration/serving.h — wait (bounded) until a started flurryd answers GET_IDS, through
// the real client library. Fails the test, with the daemon's log, if it exits or never serves.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "tests/support/child_process.h"

namespace flurry::testing {

// How long a flurryd may take to end after SIGTERM or SIGKILL: generous, a bound only so
// that a flurryd that hangs fails its test instead of running into the suite's timeout.
inline constexpr std::uint64_t exit_timeout_ms = 20'000;

// `also_ready` (optional) is polled once IDs are served, e.g. for the metrics endpoint.
inline void wait_serving(ChildProcess& daemon, const std::string& address,
                         const std::function<bool()>& also_ready = {},
                         std::chrono::milliseconds limit = std::chrono::seconds(10)) {
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

}  // namespace flurry::testing
