// tests/cluster/cluster_bench.cc — cluster-mode figures against a local etcd (a benchmark()
// target, never a timed assertion):
//   * claim time: lease grant + layout check + owner listing + claim transaction;
//   * renew latency (the watermark transaction) and keep-alive latency, median and p99;
//   * flurryd's request rate in cluster mode vs local mode, with perf/flurry-bench.
// Starts its own etcd on loopback (free ports, temporary directory, stopped by PID).
//   meson test -C build --benchmark cluster_bench -v   (or run the executable directly)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/clock.h"
#include "control/cluster/etcd_client.h"
#include "control/cluster/membership.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/support/child_process.h"
#include "tests/support/ports.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace flurry;
using namespace flurry::control::cluster;

struct Stats {
  double median_us = 0, p99_us = 0, max_us = 0;
};

Stats stats_of(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  Stats s;
  if (us.empty()) return s;
  s.median_us = us[us.size() / 2];
  s.p99_us = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  s.max_us = us.back();
  return s;
}

double since_us(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

std::string run_bench(const std::string& bench, std::uint16_t port, const std::string& dir,
                      const std::string& label) {
  flurry::testing::ChildProcess p;
  const std::string log = dir + "/bench-" + label + ".log";
  if (!p.spawn(bench,
               {"--server", "127.0.0.1:" + std::to_string(port), "--threads", "1", "--window", "16",
                "--count", "1", "--duration-s", "3", "--label", label},
               log)) {
    return "cannot start " + bench + "\n";
  }
  p.wait(20000);
  return p.log();
}

}  // namespace

int main() {
  flurry::testing::TempDir dir("flurry-cluster-bench-");
  test::Etcd etcd(dir.path());
  std::string error;
  if (!etcd.start(&error)) {
    std::fprintf(stderr, "cluster_bench: %s\n", error.c_str());
    return 1;
  }
  EtcdConfig config;
  config.endpoints = {etcd.url()};
  auto client = EtcdClient::create(config);
  auto keeper_client = EtcdClient::create(config);
  if (!client.ok() || !keeper_client.ok()) {
    std::fprintf(stderr, "cluster_bench: %s\n", (client.ok() ? keeper_client : client).message().c_str());
    return 1;
  }
  SystemClock clock;

  constexpr int claims = 50;
  std::vector<double> claim_us;
  for (int i = 0; i < claims; ++i) {
    MembershipConfig m;
    m.cluster = "bench";
    m.instance_id = "bench-claim-" + std::to_string(i);
    Membership membership(**client, clock, m);
    const auto start = std::chrono::steady_clock::now();
    if (const Status claimed = membership.claim(); !claimed.ok()) {
      std::fprintf(stderr, "claim failed: %s\n", claimed.message().c_str());
      return 1;
    }
    claim_us.push_back(since_us(start));
    membership.release();
  }

  MembershipConfig m;
  m.cluster = "bench";
  m.instance_id = "bench-renew";
  Membership membership(**client, clock, m);
  if (!membership.claim().ok()) return 1;
  constexpr int renewals = 1000;
  std::vector<double> renew_us, keepalive_us;
  std::uint64_t w = membership.floor_t() + 1;
  for (int i = 0; i < renewals; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (const Status renewed = membership.renew(w += 750); !renewed.ok()) {
      std::fprintf(stderr, "renew failed: %s\n", renewed.message().c_str());
      return 1;
    }
    renew_us.push_back(since_us(start));
    start = std::chrono::steady_clock::now();
    (void)membership.keepalive(**keeper_client);
    keepalive_us.push_back(since_us(start));
  }
  membership.release();

  const Stats c = stats_of(claim_us), r = stats_of(renew_us), k = stats_of(keepalive_us);
  std::printf("etcd %s (local, one member, data on %s)\n", etcd.url().c_str(), dir.path().c_str());
  std::printf("claim time      (%4d claims):   median %8.0f us   p99 %8.0f us   max %8.0f us\n", claims,
              c.median_us, c.p99_us, c.max_us);
  std::printf("renew latency   (%4d renews):   median %8.0f us   p99 %8.0f us   max %8.0f us\n", renewals,
              r.median_us, r.p99_us, r.max_us);
  std::printf("keep-alive      (%4d calls):    median %8.0f us   p99 %8.0f us   max %8.0f us\n", renewals,
              k.median_us, k.p99_us, k.max_us);

  // Request rate: the same flurryd, local mode vs cluster mode, one after the other.
  const char* flurryd = std::getenv("FLURRYD");
  const char* bench = std::getenv("FLURRY_BENCH");
  if (flurryd == nullptr || bench == nullptr) {
    std::printf("request rate: skipped (set FLURRYD and FLURRY_BENCH)\n");
    return 0;
  }
  for (const bool cluster : {false, true}) {
    flurry::testing::ChildProcess server;
    const std::uint16_t port = flurry::testing::free_udp_port();
    const std::string name = cluster ? "cluster" : "local";
    std::vector<std::string> args = {"--state-dir", dir.path() + "/" + name,
                                     "--listen",    "127.0.0.1:" + std::to_string(port),
                                     "--workers",   "1"};
    if (cluster) {
      args.insert(args.end(), {"--etcd", etcd.url(), "--cluster", "bench-rate"});
    } else {
      args.insert(args.end(), {"--node-id", "7"});
    }
    if (!server.spawn(flurryd, args, dir.path() + "/" + name + ".log") ||
        !server.wait_for_log("serving IDs on udp", 15000)) {
      std::fprintf(stderr, "%s flurryd did not start:\n%s\n", name.c_str(), server.log().c_str());
      return 1;
    }
    const std::string out = run_bench(bench, port, dir.path(), name);
    std::printf(
        "--- %s mode (flurryd --workers 1, flurry-bench --threads 1 --window 16 --count 1 --duration-s "
        "3)\n%s",
        name.c_str(), out.c_str());
    server.stop();
  }
  return 0;
}
