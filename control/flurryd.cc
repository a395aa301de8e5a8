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
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "control/clock.h"
#include "control/commands.h"
#include "control/cluster/cluster_mode.h"
#include "control/config.h"
#include "control/control_server.h"
#include "control/log.h"
#include "control/metrics_http.h"
#include "control/renew_loop.h"
#include "control/report.h"
#include "control/scheduler.h"
#include "dataplane/backend.h"
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
  const core::BackendKind backend_kind = *core::parse_backend(config.backend);  // validated
  if (const std::string missing = dataplane::backend_missing(backend_kind); !missing.empty()) return fail(missing, 2);

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

  // Cluster mode: hold a node id from etcd before serving anything.
  std::unique_ptr<cluster::ClusterMode> cluster;
  std::uint32_t node_id = config.node_id;
  if (!config.etcd.empty()) {
    const auto instance_id = persist::load_or_create_instance_id(config.state_dir, &error);
    if (!instance_id) return fail(error);
    cluster::ClusterModeOptions cluster_options;
    cluster_options.endpoints = config.etcd;
    cluster_options.cluster = config.cluster;
    cluster_options.instance_id = *instance_id;
    cluster_options.layout = config.id_layout;
    cluster_options.lease_ttl_s = config.lease_ttl_s;
    cluster_options.max_clock_skew_ms = config.max_clock_skew_ms;
    cluster_options.lead_ms = config.lead_ms;
    cluster_options.remake_instance_id = [&config](std::string* why) {
      return persist::replace_instance_id(config.state_dir, why);
    };
    cluster = cluster::ClusterMode::create(cluster_options, clock, &error);
    if (!cluster) return fail(error, 2);
    const auto stop_requested = [&] {
      signalfd_siginfo info{};
      return read(signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info);
    };
    if (!cluster->claim_at_start(stop_requested, &error)) return fail("cluster mode: " + error);
    node_id = cluster->node_id();
  }

  core::Shared shared(config.workers);
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
  // After the signal mask, so EAL's threads inherit it. EAL's arguments: argv before `--`.
  std::unique_ptr<dataplane::Backend> backend = dataplane::make_backend(
      backend_kind, own_begin == 0 ? 1 : own_begin, argv, backend_config, shared, &error);
  if (!backend) return fail(error);
  if (!backend->start(&error)) return fail(error);

  // The store is written by the renew thread only; what the reports show of it is copied
  // here after each step, so the control loop never touches the store (or waits for it).
  struct StoreView {
    std::mutex mutex;
    std::string method;
    std::uint64_t writes = 0;
    std::uint64_t failures = 0;
    std::uint64_t durable_watermark_t = 0;
  } store_view;
  const auto copy_store_view = [&] {
    std::lock_guard lock(store_view.mutex);
    store_view.method = std::string(store->method());  // io_uring may fall back at run time
    store_view.writes = store->stores();
    store_view.failures = store->store_failures();
    store_view.durable_watermark_t = store->durable_watermark_t();
  };
  copy_store_view();
  RenewLoop renew_loop(scheduler.tick_ms(), [&] {
    scheduler.tick();
    if (cluster) cluster->tick(scheduler, store->durable_watermark_t());
    copy_store_view();
  });
  renew_loop.start();

  ReportSources sources;
  sources.config = &config;
  sources.shared = &shared;
  sources.backend = backend.get();
  sources.started_unix_ms = clock.wall_ms();
  auto refresh = [&] {
    sources.scheduler = scheduler.snapshot();
    {
      std::lock_guard lock(store_view.mutex);
      sources.store_method = store_view.method;
      sources.store_writes = store_view.writes;
      sources.store_failures = store_view.failures;
      sources.durable_watermark_t = store_view.durable_watermark_t;
    }
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
      [&](const std::string& name, const nlohmann::json&, nlohmann::json* reply) -> std::string {
        const std::optional<Command> command = parse_command(name);
        if (!command) return "unknown command '" + name.substr(0, 64) + "'; commands: " + command_names();
        refresh();
        sources.control_bad_requests = control.bad_requests();
        switch (*command) {
          case Command::status: *reply = status_json(sources); break;
          case Command::stats: *reply = stats_json(sources); break;
          case Command::watermark: *reply = watermark_json(sources); break;
          case Command::lease: *reply = sources.lease; break;
          case Command::health: *reply = health_json(sources); break;
          case Command::config: *reply = {{"config", describe(config)}}; break;
          case Command::metrics: *reply = {{"metrics", metrics_reply()}}; break;
          case Command::drain:
            scheduler.drain();
            *reply = {{"state", scheduler.state_name()}};
            break;
        }
        return {};
      },
      &error);
  if (!control_open) {
    renew_loop.stop();
    backend->stop();
    return fail(error);
  }
  MetricsHttp metrics_http;  // served by the loop below, never by a thread of its own
  if (!config.metrics_listen.empty()) {
    if (!metrics_http.open(config.metrics_address, config.metrics_port, metrics_reply, &error)) {
      renew_loop.stop();
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
    // A lease whose deadline passed fences here, on the control loop, even while the renew
    // thread is stuck in an etcd call or a disk sync.
    if (cluster) cluster->fence_if_lease_expired(scheduler);
    control.serve();
    metrics_http.serve();
  }
  renew_loop.stop();  // waits for a write in flight: the watermark file stays consistent
  backend->stop();
  if (cluster) cluster->stop();  // revokes the lease: the node id is free at once
  log_info("stopped; durable watermark {} stays valid, the next start issues above it",
           store->durable_watermark_t());
  return 0;
}

}  // namespace
}  // namespace flurry::control

int main(int argc, char** argv) { return flurry::control::run(argc, argv); }
