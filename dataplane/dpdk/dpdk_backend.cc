// dataplane/dpdk/dpdk_backend.cc — the Backend: port set-up, worker launch and join, clock
// re-sync, counters. See dpdk_backend.h for the contract.
#include "dataplane/dpdk/dpdk_backend.h"

#include <arpa/inet.h>
#include <rte_alarm.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <cstdio>
#include <ctime>
#include <vector>

#include "base/log.h"
#include "dataplane/dpdk/port.h"
#include "dataplane/dpdk/tsc_clock.h"
#include "dataplane/dpdk/worker.h"

namespace flurry::dataplane {

namespace {

using dpdk::PortCounters;
using dpdk::WorkerContext;

// EAL's interrupt thread (the alarm) re-syncs the TSC calibration against CLOCK_REALTIME this often.
constexpr std::uint64_t clock_resync_us = 1'000'000;
// Workers check the stop flag, the assignment and the calibration this often.
constexpr std::uint64_t worker_tick_us = 1000;

std::int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

class DpdkBackend final : public Backend {
 public:
  DpdkBackend(const BackendConfig& config, core::Shared& shared) : config_(config), shared_(shared) {}
  ~DpdkBackend() override { stop(); }

  Status start() override;
  void stop() override;
  std::string_view name() const override { return "dpdk"; }
  void visit_counters(const CounterVisitor& visit) const override;

 private:
  Status fail(Status failure) {
    stop();
    return failure;
  }
  void resync_clock();
  Status check_config(std::uint32_t lcores, in_addr* address);
  void describe_port(std::uint32_t lcores) const;
  void make_contexts(const in_addr& address);
  static void resync_alarm(void* self);

  BackendConfig config_;
  core::Shared& shared_;
  dpdk::Port port_;
  dpdk::TscClockSync clock_;
  std::unique_ptr<PortCounters[]> counters_;
  std::unique_ptr<WorkerContext[]> contexts_;
  std::vector<unsigned> launched_;  // lcore ids running a worker
  bool alarm_armed_ = false;
  bool stopped_ = true;
};

void DpdkBackend::resync_clock() {
  const std::uint64_t tsc = rte_rdtsc();
  const std::int64_t now_ns = realtime_ns() + config_.clock_offset_ms * 1'000'000;
  clock_.publish(dpdk::TscCalibration::make(tsc, now_ns, rte_get_tsc_hz()));
}

void DpdkBackend::resync_alarm(void* self) {
  auto* backend = static_cast<DpdkBackend*>(self);
  backend->resync_clock();
  rte_eal_alarm_set(clock_resync_us, &DpdkBackend::resync_alarm, self);
}

// Everything start() checks before it touches the port: EAL, worker and lcore counts, the
// burst size and the appliance's address.
Status DpdkBackend::check_config(std::uint32_t lcores, in_addr* address) {
  const std::uint32_t workers = config_.workers;
  if (!eal_initialized()) {
    return Error{
        "DPDK EAL is not initialised: put EAL arguments before `--` "
        "(flurryd -l 0-1 --vdev=... -- --backend dpdk ...)"};
  }
  if (workers == 0 || workers > dpdk::burst_size_max) {
    return Error{"--workers must be between 1 and " + std::to_string(dpdk::burst_size_max)};
  }
  if (workers > lcores) {
    return Error{std::to_string(workers) + " worker(s) need " + std::to_string(workers + 1) +
                 " lcores (the main lcore runs the control loop) but EAL has " + std::to_string(lcores + 1) +
                 ": pass -l 0-" + std::to_string(workers) + " before `--`, or --workers " +
                 std::to_string(lcores == 0 ? 1 : lcores) + (lcores == 0 ? " with at least -l 0-1" : "")};
  }
  if (shared_.workers < workers) {
    return Error{"Shared holds stats for " + std::to_string(shared_.workers) +
                 " workers, the backend was asked for " + std::to_string(workers)};
  }
  if (config_.burst_size == 0 || config_.burst_size > dpdk::burst_size_max) {
    return Error{"--burst-size must be between 1 and " + std::to_string(dpdk::burst_size_max)};
  }
  if (inet_pton(AF_INET, config_.listen.address.c_str(), address) != 1 || address->s_addr == 0) {
    return Error{"--listen " + config_.listen.address +
                 " is not an IPv4 address the appliance can own on its port: give the "
                 "port's address, e.g. --listen 10.77.0.1:7420"};
  }
  return {};
}

void DpdkBackend::describe_port(std::uint32_t lcores) const {
  const std::uint32_t workers = config_.workers;
  log_info("dpdk: {}; appliance {}:{}, {} worker(s)", port_.describe(), config_.listen.address,
           config_.listen.port, workers);
  if (workers < lcores) {
    log_warn("dpdk: EAL has {} worker lcores, --workers {} uses {} of them", lcores, workers, workers);
  }
  if (workers > 1 && !port_.rss) {
    log_warn(
        "dpdk: port {} has no IPv4/UDP RSS: unless its driver spreads flows itself (net_af_packet fanout), "
        "every request lands on worker 0",
        port_.name);
  }
}

// One context per worker, on the worker lcores in EAL order; all allocated before launch.
void DpdkBackend::make_contexts(const in_addr& address) {
  const std::uint32_t workers = config_.workers;
  counters_.reset(new PortCounters[workers]);
  contexts_.reset(new WorkerContext[workers]);
  unsigned lcore_id = rte_get_next_lcore(-1, 1, 0);
  for (std::uint32_t i = 0; i < workers; ++i, lcore_id = rte_get_next_lcore(lcore_id, 1, 0)) {
    WorkerContext& context = contexts_[i];
    context.index = i;
    context.lcore_id = lcore_id;
    context.port_id = port_.port_id;
    context.burst_size = config_.burst_size;
    context.tick_tsc = rte_get_tsc_hz() / 1'000'000 * worker_tick_us;
    context.identity.mac = port_.mac;
    context.identity.ip = ntohl(address.s_addr);
    context.identity.port = config_.listen.port;
    context.tx = port_.tx;
    context.rx_ip_checksum = port_.rx_ip_checksum;
    context.rx_udp_checksum = port_.rx_udp_checksum;
    context.rx_checksums_trusted = port_.rx_checksums_trusted;
    context.config = &config_;
    context.shared = &shared_;
    context.clock = &clock_;
    context.counters = &counters_[i];
  }
}

Status DpdkBackend::start() {
  if (!stopped_) return fail(Error{"the dpdk backend is already started"});
  stopped_ = false;
  const std::uint32_t lcores = eal_worker_lcores();
  in_addr address{};
  if (Status checked = check_config(lcores, &address); !checked.ok()) return fail(checked);
  dpdk::PortOptions options;
  options.queues = config_.workers;
  options.burst_size = config_.burst_size;
  if (Status opened = dpdk::open_port(options, &port_); !opened.ok()) return fail(opened);
  if (RTE_MBUF_DEFAULT_DATAROOM < frame::buffer_size_min) {
    return fail(Error{"mbuf data room too small for a full answer"});
  }
  describe_port(lcores);
  resync_clock();
  if (rte_eal_alarm_set(clock_resync_us, &DpdkBackend::resync_alarm, this) == 0) alarm_armed_ = true;
  make_contexts(address);
  shared_.stop.store(false);
  for (std::uint32_t i = 0; i < config_.workers; ++i) {
    const int rc = rte_eal_remote_launch(dpdk::worker_main, &contexts_[i], contexts_[i].lcore_id);
    if (rc != 0) {
      return fail(Error{"cannot launch worker " + std::to_string(i) + " on lcore " +
                        std::to_string(contexts_[i].lcore_id) + ": " + rte_strerror(-rc)});
    }
    launched_.push_back(contexts_[i].lcore_id);
  }
  return {};
}

void DpdkBackend::stop() {
  if (stopped_) return;
  stopped_ = true;
  shared_.stop.store(true);
  for (const unsigned lcore_id : launched_) rte_eal_wait_lcore(lcore_id);
  launched_.clear();
  if (alarm_armed_) {
    rte_eal_alarm_cancel(&DpdkBackend::resync_alarm, this);
    alarm_armed_ = false;
  }
  dpdk::close_port(&port_);
}

void DpdkBackend::visit_counters(const CounterVisitor& visit) const {
  if (!counters_) return;
  for (std::uint32_t w = 0; w < config_.workers; ++w) {
    const PortCounters& c = counters_[w];
    for (std::size_t d = 0; d < frame::drop_count; ++d) {
      visit("rx_dropped", frame::to_string(static_cast<frame::Drop>(d)), w, c.dropped[d].get());
    }
    visit("tx_dropped", "tx_queue_full", w, c.tx_refused.get());
  }
  // Port-wide counters kept by the driver (reported on worker 0).
  rte_eth_stats stats{};
  if (port_.started && rte_eth_stats_get(port_.port_id, &stats) == 0) {
    visit("port_dropped", "rx_missed", 0, stats.imissed);
    visit("port_dropped", "rx_errors", 0, stats.ierrors);
    visit("port_dropped", "rx_no_mbuf", 0, stats.rx_nombuf);
    visit("port_dropped", "tx_errors", 0, stats.oerrors);
  }
}

}  // namespace

std::unique_ptr<Backend> make_dpdk_backend(const BackendConfig& config, core::Shared& shared) {
  return std::make_unique<DpdkBackend>(config, shared);
}

Result<std::unique_ptr<Backend>> init_eal_and_make_dpdk_backend(int eal_argc, char** argv,
                                                                const BackendConfig& config,
                                                                core::Shared& shared) {
  if (Status started = eal_init(eal_argc, argv); !started.ok()) return started;
  return make_dpdk_backend(config, shared);
}

}  // namespace flurry::dataplane
