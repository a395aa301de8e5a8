// control/flurryd.cc — the appliance: parse config, open the durable watermark, start the
// workers, and run the control core (watermark scheduler, control socket, signals).
//
// Start order keeps the invariant: the watermark file is opened and the first watermark made
// durable *before* any ceiling is published; workers start above the durable watermark.
// SIGINT/SIGTERM stop the workers first; the watermark file stays valid (it only ever holds
// durable values above everything issued).
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "control/clock.h"
#include "control/cluster/cluster_mode.h"
#include "control/config.h"
#include "control/control_server.h"
#include "control/log.h"
#include "control/metrics_http.h"
#include "control/report.h"
#include "control/scheduler.h"
#include "dataplane/backend.h"
#ifdef FLURRY_HAVE_DPDK
#include "dataplane/dpdk/dpdk_backend.h"
#endif
#include "persist/identity.h"
#include "persist/watermark_store.h"

namespace flurry::control {
namespace {

// The layout as the watermark record stores it (persist/ does not depend on proto/).
persist::LayoutRecord persist_layout(const proto::Layout& layout) {
  persist::LayoutRecord out;
  out.epoch_ms = layout.epoch_ms;
  out.time_unit_ms = layout.time_unit_ms;
  out.time_bits = static_cast<std::uint8_t>(layout.time_bits);
  out.node_bits = static_cast<std::uint8_t>(layout.node_bits);
  out.sequence_bits = static_cast<std::uint8_t>(layout.sequence_bits);
  out.core_bits = static_cast<std::uint8_t>(layout.core_bits);
  out.core_from = layout.core_from == proto::CoreBitsFrom::node ? 1 : 0;
  return out;
}

// Local mode: the watermark file is the only place W must be durable.
class LocalDurability final : public Durability {
 public:
  explicit LocalDurability(persist::WatermarkStore& store) : store_(store) {}
  DurableResult make_durable(std::uint64_t watermark_t, std::string* error) override {
    return store_.store(watermark_t, error) ? DurableResult::ok : DurableResult::failed;
  }
  std::string_view failure_state() const override { return "degraded_disk"; }

 private:
  persist::WatermarkStore& store_;
};

int fail(const std::string& text, int code = 1) {
  std::fprintf(stderr, "flurryd: error: %s\n", text.c_str());
  return code;
}

int run(int argc, char** argv) {
  // EAL arguments (dpdk backend) come before `--`; flurryd's own after it.
  int own_begin = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      own_begin = i;
      break;
    }
  }
  std::vector<const char*> own_args = {argv[0]};
  for (int i = own_begin == 0 ? 1 : own_begin + 1; i < argc; ++i) own_args.push_back(argv[i]);

  Config config;
  const ParseResult parsed =
      parse_config(static_cast<int>(own_args.size()), own_args.data(), &config);
  if (parsed.kind == ParseResult::Kind::exit_ok) {
    std::fputs(parsed.message.c_str(), stdout);
    return 0;
  }
  if (parsed.kind == ParseResult::Kind::error) return fail(parsed.message, 2);
#ifndef FLURRY_HAVE_DPDK
  if (config.backend == "dpdk") {
    return fail("the dpdk backend is not part of this build (libdpdk-dev not found); use --backend socket", 2);
  }
#endif

  // Signals are taken by the control loop through a signalfd; block them before any worker
  // thread exists so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const int signal_fd = signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) return fail(std::string("signalfd: ") + std::strerror(errno));

  log_info("starting; effective configuration:\n{}", describe(config));

  std::string error;
  SystemClock clock(config.clock_offset_ms);
  // The state directory first: its lock (flock on the watermark file) is what keeps a second
  // flurryd on the same directory from going further — in cluster mode it would otherwise
  // re-own the running instance's node id with the shared instance id and fence it.
  // Nothing is ever issued at or below the durable watermark it holds.
  persist::OpenOptions store_options;
  // Cluster mode: the node id comes from etcd and may change from run to run; the file's
  // watermark stays a valid lower bound for any node id (the floor is the max of both).
  store_options.accept_identity_change = config.accept_state_change || !config.etcd.empty();
  store_options.accept_corrupt = config.accept_corrupt_state;
  auto store = persist::WatermarkStore::open(
      config.state_dir,
      persist::Identity{config.node_id, config.id_layout.fingerprint(),
                        persist_layout(config.id_layout)},
      store_options, &error);
  if (!store) return fail(error);
  if (!config.etcd.empty() && store->loaded() && store->loaded()->layout_fingerprint != config.id_layout.fingerprint() &&
      !config.accept_state_change) {
    return fail(config.state_dir + " holds a watermark written under another ID layout; "
                "pass --accept-state-change to adopt this layout");
  }
  for (const auto& warning : store->take_warnings()) log_warn("{}", warning);
  log_info("state {}: durable watermark {} ({}), written with {}", config.state_dir,
           store->durable_watermark_t(),
           proto::format_unix_ms(config.id_layout.epoch_ms +
                                 store->durable_watermark_t() * config.id_layout.time_unit_ms),
           store->method());

  // Cluster mode (issue 4): hold a node id from etcd before serving anything.
  std::unique_ptr<cluster::ClusterMode> cluster;
  std::uint32_t node_id = config.node_id;
  if (!config.etcd.empty()) {
    const auto instance_id = persist::load_or_create_instance_id(config.state_dir, &error);
    if (!instance_id) return fail(error);
    cluster = cluster::ClusterMode::create({config.etcd, config.cluster, *instance_id, config.id_layout,
                                            config.lease_ttl_s, config.max_clock_skew_ms, config.lead_ms},
                                           clock, &error);
    if (!cluster) return fail(error, 2);
    const auto stop_requested = [&] {
      signalfd_siginfo info{};
      return read(signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info);
    };
    if (!cluster->claim_at_start(stop_requested, &error)) return fail("cluster mode: " + error);
    node_id = cluster->node_id();
  }

  dataplane::Shared shared(config.workers);
  LocalDurability local_durability(*store);
  Durability& durability = cluster ? cluster->durability(&local_durability) : local_durability;
  WatermarkScheduler scheduler(config.id_layout, config.lead_ms, durability, shared, clock);
  const std::uint64_t floor_t =
      std::max(store->durable_watermark_t(), cluster ? cluster->floor_t() : std::uint64_t{0});
  if (cluster) cluster->start_keepalive();
  if (!scheduler.start(node_id, floor_t, &error)) {
    // Cluster mode: etcd going away right after the claim is not fatal; nothing is served
    // until the scheduler's retries (or a re-claim, if fenced) succeed.
    if (!cluster || (scheduler.state() != ServeState::fenced && scheduler.state_name() != "degraded_etcd")) {
      return fail("cannot make the first watermark durable in " + config.state_dir + ": " + error);
    }
    log_warn("cluster mode: first watermark not acknowledged by etcd yet ({}); serving nothing until it is", error);
  }

  dataplane::BackendConfig backend_config;
  backend_config.listen_address = config.listen_address;
  backend_config.listen_port = config.listen_port;
  backend_config.workers = config.workers;
  backend_config.burst_size = config.burst_size;
  backend_config.pin_workers = config.pin_workers;
  backend_config.layout = config.id_layout;
  backend_config.retry_hint_us = config.retry_hint_us;
  backend_config.clock_offset_ms = config.clock_offset_ms;
#ifdef FLURRY_HAVE_DPDK
  // After the signal mask, so EAL's threads inherit it. EAL's arguments: argv before `--`.
  std::unique_ptr<dataplane::Backend> backend =
      config.backend == "dpdk"
          ? dataplane::init_eal_and_make_dpdk_backend(own_begin == 0 ? 1 : own_begin, argv,
                                                      backend_config, shared, &error)
          : dataplane::make_socket_backend(backend_config, shared);
  if (!backend) return fail(error);
#else
  std::unique_ptr<dataplane::Backend> backend = dataplane::make_socket_backend(backend_config, shared);
#endif
  if (!backend->start(&error)) return fail(error);

  ReportSources sources;
  sources.config = &config;
  sources.shared = &shared;
  sources.backend = backend.get();
  sources.scheduler = &scheduler;
  sources.started_unix_ms = clock.wall_ms();
  auto refresh = [&] {
    sources.store_method = std::string(store->method());  // io_uring may fall back at run time
    sources.store_writes = store->stores();
    sources.store_failures = store->store_failures();
    sources.durable_watermark_t = store->durable_watermark_t();
    if (cluster) sources.lease = cluster->lease_json();
  };

  ControlServer control;
  // The `metrics` command and GET /metrics (--metrics-listen) render the same text, both on
  // this thread (the scheduler's stats are plain data owned by it).
  auto metrics_reply = [&] {
    refresh();
    sources.control_bad_requests = control.bad_requests();
    return metrics_text(sources) + (cluster ? cluster->metrics_text() : std::string());
  };
  const bool control_open = control.open(
      config.control_socket,
      [&](const std::string& cmd, const nlohmann::json&, nlohmann::json* reply) -> std::string {
        refresh();
        sources.control_bad_requests = control.bad_requests();
        if (cmd == "status") {
          *reply = status_json(sources);
        } else if (cmd == "stats") {
          *reply = stats_json(sources);
        } else if (cmd == "watermark") {
          *reply = watermark_json(sources);
        } else if (cmd == "lease") {
          *reply = sources.lease;
        } else if (cmd == "health") {
          *reply = health_json(sources);
        } else if (cmd == "config") {
          *reply = {{"config", describe(config)}};
        } else if (cmd == "metrics") {
          *reply = {{"metrics", metrics_reply()}};
        } else if (cmd == "drain") {
          scheduler.drain();
          *reply = {{"state", std::string(scheduler.state_name())}};
        } else {
          return "unknown command '" + cmd.substr(0, 64) +
                 "'; commands: status, stats, lease, watermark, config, health, metrics, drain";
        }
        return {};
      },
      &error);
  if (!control_open) {
    backend->stop();
    return fail(error);
  }
  MetricsHttp metrics_http;  // served by the loop below, never by a thread of its own
  if (!config.metrics_listen.empty()) {
    if (!metrics_http.open(config.metrics_address, config.metrics_port, metrics_reply, &error)) {
      backend->stop();
      return fail(error);
    }
    log_info("Prometheus metrics on http://{}/metrics", config.metrics_listen);
  }

  log_info("serving IDs on udp {} ({} backend, {} worker{}), node {}; control socket {}",
           config.listen, backend->name(), config.workers, config.workers == 1 ? "" : "s",
           node_id, config.control_socket);
  log_info("try: flurry get -n 5 --server {}   |   flurryctl --control-socket {} status", config.listen,
           config.control_socket);

  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({signal_fd, POLLIN, 0});
    control.poll_fds(&fds);
    metrics_http.poll_fds(&fds);
    poll(fds.data(), fds.size(), metrics_http.poll_timeout_ms(static_cast<int>(scheduler.tick_ms())));
    signalfd_siginfo info{};
    if (read(signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      log_info("signal {}: stopping workers", info.ssi_signo);
      break;
    }
    scheduler.tick();
    if (cluster) cluster->tick(scheduler, store->durable_watermark_t());
    control.serve();
    metrics_http.serve();
  }
  backend->stop();
  if (cluster) cluster->stop();  // revokes the lease: the node id is free at once
  log_info("stopped; durable watermark {} stays valid, the next start issues above it",
           store->durable_watermark_t());
  return 0;
}

}  // namespace
}  // namespace flurry::control

int main(int argc, char** argv) { return flurry::control::run(argc, argv); }
