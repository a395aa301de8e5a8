// control/node/ops.cc — see ops.h.
#include "control/node/ops.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/log.h"
#include "control/commands.h"
#include "control/keys_file.h"
#include "dataplane/backend.h"

namespace flurry::control {

bool signalled(int signal_fd, int* signal_number) {
  signalfd_siginfo info{};
  if (read(signal_fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return false;
  if (signal_number != nullptr) *signal_number = static_cast<int>(info.ssi_signo);
  return true;
}

Ops::Ops(const Config& config, const Clock& clock, core::Shared& shared, ReportSources& sources, Parts parts,
         int signal_fd)
    : config_(config),
      clock_(clock),
      shared_(shared),
      sources_(sources),
      renewal_(parts.renewal),
      sequences_(parts.sequences),
      issuing_(parts.issuing),
      cluster_(parts.cluster),
      signal_fd_(signal_fd),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

Ops::~Ops() {
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Ops::stop_soon() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = write(wake_fd_, &one, sizeof one);
}

Status Ops::open() {
  sources_.config = &config_;
  sources_.shared = &shared_;
  sources_.backend = issuing_.backend();
  sources_.started_unix_ms = clock_.wall_ms();
  for (const auto& front_end : issuing_.front_ends())
    sources_.doors.emplace_back(front_end->name(), &front_end->door());
  sources_.doors.emplace_back("control", &control_.door());
  if (config_.metrics_listen.enabled()) sources_.doors.emplace_back("metrics", &metrics_http_.door());
  // The control socket: one uid may talk to it, so no per-peer limit below its size.
  const auto control_max = static_cast<std::uint32_t>(ControlServer::clients_max);
  if (Status opened = control_.open(
          config_.control_socket,
          [this](const std::string& name, const nlohmann::json& request, nlohmann::json* reply) {
            return answer(name, request, reply);
          },
          door_limits(config_, control_max, control_max));
      !opened.ok()) {
    return opened;
  }
  if (config_.metrics_listen.enabled()) {
    // Half of the metrics port's connections at most from one address: a prober elsewhere
    // always finds room, and a full door sheds the longest-idle for it anyway.
    const std::uint32_t metrics_max = MetricsHttp::connections_max;
    if (Status opened = metrics_http_.open(
            config_.metrics_listen.address, config_.metrics_listen.port, [this] { return metrics_reply(); },
            [this](MetricsHttp::ProbeKind kind, bool verbose) { return probe(kind, verbose); },
            door_limits(config_, metrics_max, std::min(config_.peer_connections_max, metrics_max / 2)));
        !opened.ok()) {
      return opened;
    }
    log_info("Prometheus metrics on http://{}/metrics", config_.metrics_listen.text());
  }
  return {};
}

void Ops::refresh() {
  sources_.scheduler = renewal_.scheduler().snapshot();
  const StoreView store = renewal_.store_view();
  sources_.store_method = store.method;
  sources_.store_writes = store.writes;
  sources_.store_failures = store.failures;
  sources_.durable_watermark_t = store.durable_watermark_t;
  if (cluster_) sources_.lease = cluster_->lease_json();
  sources_.control_bad_requests = control_.bad_requests();
  sources_.sequences_exhausted = sequences_.manager().exhausted();
  sources_.seq_auto_created = sequences_.auto_created();
  sources_.seq_auto_create_refused = sequences_.auto_refused();
  sources_.control_refused_peers = control_.refused_peers();
}

// The `metrics` command and GET /metrics (--metrics-listen) render the same text.
std::string Ops::metrics_reply() {
  refresh();
  return metrics_text(sources_) + (cluster_ ? cluster_->metrics_text() : std::string()) +
         sequences_.manager().metrics_text();
}

// /livez: the process and its loops are alive (this answer comes from the control loop; the
// workers have not been told to stop). /readyz: serving, i.e. what `flurryctl health` calls
// healthy: not starting, drained, fenced, exhausted or degraded beyond the held ceiling.
MetricsHttp::Probed Ops::probe(MetricsHttp::ProbeKind kind, bool verbose) {
  struct Check {
    const char* name;
    bool ok;
    std::string why;
  };
  std::vector<Check> checks;
  if (kind == MetricsHttp::ProbeKind::livez) {
    checks.push_back({"control_loop", true, ""});
    checks.push_back(
        {"workers", !shared_.stop.load(std::memory_order_relaxed), "the workers were told to stop"});
  } else {
    refresh();
    const nlohmann::json health = health_json(sources_);
    checks.push_back(
        {"serving", health["healthy"].get<bool>(),
         "state " + health["state"].get<std::string>() + ": " + health["cause"].get<std::string>()});
  }
  const char* what = kind == MetricsHttp::ProbeKind::livez ? "livez" : "readyz";
  bool all_ok = true;
  std::string lines;
  for (const Check& check : checks) {
    all_ok = all_ok && check.ok;
    lines += check.ok ? fmt::format("[+]{} ok\n", check.name)
                      : fmt::format("[-]{} failed: {}\n", check.name, check.why);
  }
  MetricsHttp::Probed out;
  out.status = all_ok ? 200 : 503;
  if (verbose) {
    out.body = lines + fmt::format("{} check {}\n", what, all_ok ? "passed" : "failed");
  } else {
    out.body = all_ok ? "ok\n" : lines;
  }
  return out;
}

Status Ops::answer(const std::string& name, const nlohmann::json& request, nlohmann::json* reply) {
  const std::optional<Command> command = parse_command(name);
  if (!command) return Error{"unknown command '" + name.substr(0, 64) + "'; commands: " + command_names()};
  refresh();
  switch (*command) {
    case Command::status:
      *reply = status_json(sources_);
      break;
    case Command::stats:
      *reply = stats_json(sources_);
      break;
    case Command::watermark:
      *reply = watermark_json(sources_);
      break;
    case Command::lease:
      *reply = sources_.lease;
      break;
    case Command::health:
      *reply = health_json(sources_);
      break;
    case Command::config:
      *reply = {{"config", describe(config_)}};
      break;
    case Command::metrics:
      *reply = {{"metrics", metrics_reply()}};
      break;
    case Command::drain:
      renewal_.scheduler().drain();
      *reply = {{"state", renewal_.scheduler().state_name()}};
      // A STATUS line, not STOPPING=1: systemd takes STOPPING=1 as the start of a stop and
      // kills the process after TimeoutStopSec; a drained node waits for the operator.
      notify_.status("drained: issuing no IDs; stop the unit when clients have moved");
      break;
    case Command::keys_list:
      *reply = {
          {"auth", config_.auth}, {"key_file", config_.key_file}, {"keys", keys_json(shared_.keys.load())}};
      break;
    case Command::keys_reload:
      if (Status reloaded = issuing_.reload_keys(); !reloaded.ok()) return reloaded;
      *reply = {{"keys", keys_json(shared_.keys.load())}};
      break;
    case Command::seq:
      return sequences_.manager().command(request, reply);  // cluster mode: in etcd
  }
  return {};
}

// dpdk backend: /flurry/status, /flurry/stats, /flurry/watermark and /flurry/lease in DPDK's
// telemetry (dpdk-telemetry.py). DPDK's telemetry thread asks the control socket, so the
// answers are the control loop's, the same as flurryctl's, and nothing here is shared with it.
Status Ops::register_telemetry() {
  if (config_.backend_kind != core::BackendKind::dpdk) return {};
  std::vector<dataplane::TelemetryCommand> commands;
  for (const CommandInfo& info : control::commands) {
    if (info.command == Command::status || info.command == Command::stats ||
        info.command == Command::watermark || info.command == Command::lease) {
      commands.push_back({std::string(info.name), "flurryctl " + std::string(info.name) + " (read-only)"});
    }
  }
  return dataplane::register_dpdk_telemetry(
      commands, [socket = config_.control_socket](const std::string& name) -> Result<std::string> {
        Result<nlohmann::json> answered = control_request(socket, name);
        if (!answered.ok()) return answered.status();
        return answered->dump();
      });
}

// systemd: WATCHDOG=1 while the control loop turns; READY=1 once the node serves IDs, the
// condition /readyz reports (until then systemd keeps the unit "activating").
void Ops::notify_service() {
  notify_.watchdog(std::chrono::steady_clock::now());
  if (notify_.ready_sent()) return;
  refresh();
  const nlohmann::json health = health_json(sources_);
  if (!health["healthy"].get<bool>()) return;
  notify_.ready(fmt::format("serving IDs on udp {}, node {}", config_.listen.text(),
                            shared_.assignment.node_id.load()));
}

void Ops::run() {
  std::vector<pollfd> fds;
  for (;;) {
    notify_service();
    fds.clear();
    fds.push_back({signal_fd_, POLLIN, 0});  // a negative fd is skipped by poll
    fds.push_back({wake_fd_, POLLIN, 0});
    control_.poll_fds(&fds);
    metrics_http_.poll_fds(&fds);
    poll(fds.data(), fds.size(),
         notify_.poll_timeout_ms(metrics_http_.poll_timeout_ms(static_cast<int>(config_.timings.tick_ms))));
    if (std::uint64_t wakes = 0; read(wake_fd_, &wakes, sizeof wakes) == static_cast<ssize_t>(sizeof wakes)) {
      log_info("stopping workers");
      notify_.stopping("stopping");
      return;
    }
    if (int signal_number = 0; signal_fd_ >= 0 && signalled(signal_fd_, &signal_number)) {
      if (signal_number == SIGHUP) {
        if (Status reloaded = issuing_.reload_keys(); !reloaded.ok())
          log_warn("SIGHUP: keys not reloaded: {}", reloaded.message());
      } else {
        log_info("signal {}: stopping workers", signal_number);
        notify_.stopping(fmt::format("signal {}: stopping", signal_number));
        return;
      }
    }
    shared_.keys.reclaim();  // tables retired by a reload, once every worker passed a burst
    // A lease whose deadline passed fences here, on the control loop, even while the renew
    // thread is stuck in an etcd call or a disk sync.
    if (cluster_) cluster_->fence_if_lease_expired(renewal_.scheduler());
    control_.serve();
    metrics_http_.serve();
  }
}

}  // namespace flurry::control
