// control/flurryd.cc — the appliance: the daemon shell that alone sees every part. It parses
// the config, takes the listen lock, opens the state dir, claims a node id (cluster mode),
// starts the scheduler and the workers, and runs the control loop (control socket, metrics,
// signals); the scheduler's writes run on the renew thread.
//
// Start order keeps the invariant: the watermark file is opened and the first watermark made
// durable *before* any ceiling is published; workers start above the durable watermark.
// SIGINT/SIGTERM stop the workers first; the watermark file stays valid (it only ever holds
// durable values above everything issued).
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/door.h"
#include "base/log.h"
#include "control/cluster/cluster_mode.h"
#include "control/commands.h"
#include "control/config.h"
#include "control/control_server.h"
#include "control/keys_file.h"
#include "control/listen_lock.h"
#include "control/metrics_http.h"
#include "control/renew_loop.h"
#include "control/report.h"
#include "control/scheduler.h"
#include "control/sequence_manager.h"
#include "control/service_notify.h"
#include "control/state_dir.h"
#include "dataplane/backend.h"
#include "dataplane/http_frontend.h"
#include "dataplane/resp_frontend.h"
#include "persist/identity.h"
#include "persist/sequence_store.h"
#include "persist/watermark_store.h"

namespace flurry::control {
namespace {

// Local mode: the watermark file is the only place W must be durable.
class LocalDurability final : public Durability {
 public:
  explicit LocalDurability(persist::WatermarkStore& store) : store_(store) {}
  Status make_durable(std::uint64_t watermark_t) override { return store_.store(watermark_t); }
  DegradedCause failure_cause() const override { return DegradedCause::disk; }

 private:
  persist::WatermarkStore& store_;
};

int fail(const std::string& text, int code = 1) {
  log_line("error", text);
  return code;
}

// EAL arguments (dpdk backend) come before `--`; flurryd's own after it. Returns the exit
// code when flurryd must not go on (help printed, or bad flags).
std::optional<int> parse_arguments(int argc, char** argv, Config* config, int* eal_argc) {
  int own_begin = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      own_begin = i;
      break;
    }
  }
  *eal_argc = own_begin == 0 ? 1 : own_begin;
  std::vector<const char*> own_args = {argv[0]};
  for (int i = own_begin == 0 ? 1 : own_begin + 1; i < argc; ++i) own_args.push_back(argv[i]);
  const Result<Parsed> parsed = parse_config(static_cast<int>(own_args.size()), own_args.data(), config);
  if (!parsed.ok()) return fail(parsed.message(), 2);
  set_log_format(config->log_format == "json" ? LogFormat::json : LogFormat::text);
  if (parsed->help_asked()) {
    std::fputs(parsed->help.c_str(), stdout);
    return 0;
  }
  const std::string missing = dataplane::backend_missing(config->backend_kind);
  if (!missing.empty()) return fail(missing, 2);
  return std::nullopt;
}

// Signals are taken by the control loop through a signalfd; block them before any worker
// thread exists so every thread (EAL's too) inherits the mask.
int block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // reloads the key file
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
}

bool signalled(int signal_fd, int* signal_number = nullptr) {
  signalfd_siginfo info{};
  if (read(signal_fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return false;
  if (signal_number != nullptr) *signal_number = static_cast<int>(info.ssi_signo);
  return true;
}

// How flurryd reaches etcd: endpoints, TLS files and user (timeouts are ClusterMode's).
cluster::EtcdConfig etcd_access(const Config& config) {
  cluster::EtcdConfig access;
  access.endpoints = config.etcd;
  access.ca_file = config.etcd_cacert;
  access.cert_file = config.etcd_cert;
  access.key_file = config.etcd_key;
  access.user = config.etcd_user;
  access.password_file = config.etcd_password_file;
  return access;
}

// Cluster mode: the etcd clients and the lease protocol, configured; contacts nothing yet.
Result<std::unique_ptr<cluster::ClusterMode>> cluster_mode(const Config& config, const Clock& clock) {
  Result<std::string> instance_id = persist::load_or_create_instance_id(config.state_dir);
  if (!instance_id.ok()) return instance_id.status();
  cluster::ClusterModeOptions options;
  options.endpoints = config.etcd;
  options.access = etcd_access(config);
  options.cluster = config.cluster;
  options.instance_id = *instance_id;
  options.layout = config.id_layout;
  options.lease_ttl_s = config.lease_ttl_s;
  options.clock_skew_ms_max = config.clock_skew_ms_max;
  options.lead_ms = config.lead_ms;
  options.remake_instance_id = [state_dir = config.state_dir] {
    return persist::replace_instance_id(state_dir);
  };
  return cluster::ClusterMode::create(options, clock);
}

// The first line of a file, or "" if it cannot be read.
std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A CPU quota on this process's cgroup ("cpu.max 50000 100000" or cgroup v1's
// "cpu.cfs_quota_us 50000"), or "" when it has none.
std::string cpu_quota() {
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    // "0::/path" (v2) or "N:cpu,cpuacct:/path" (v1).
    const std::size_t first = line.find(':');
    const std::size_t second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (path == "/") path.clear();
    if (controllers.empty()) {
      const std::string max = first_line("/sys/fs/cgroup" + path + "/cpu.max");
      if (!max.empty() && max.rfind("max", 0) != 0) return "cpu.max " + max;
    } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
      const std::string quota = first_line("/sys/fs/cgroup/" + controllers + path + "/cpu.cfs_quota_us");
      if (!quota.empty() && quota[0] != '-' && quota != "0") return "cpu.cfs_quota_us " + quota;
    }
  }
  return "";
}

// Why the socket workers must not poll on this machine (--poll-spin-us), or "": a polling
// worker needs a CPU of its own, the machine a CPU beyond the workers' for everything else
// (the clients on it, the control thread), and a CPU quota would be spent on polling. A
// process pinned to as many CPUs as it has workers on a larger machine (taskset, cpuset) is
// a deliberate placement: it polls.
std::string poll_off_reason(const Config& config) {
  if (config.backend_kind != core::BackendKind::socket || config.poll_spin_us == 0) return "";
  const auto plural = [](long n) { return n == 1 ? "" : "s"; };
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online > 0 && static_cast<std::uint64_t>(online) <= config.workers) {
    return fmt::format("{} CPU{} online for {} worker{}: a polling worker would hold up everything else here",
                       online, plural(online), config.workers, plural(config.workers));
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 &&
      static_cast<std::uint32_t>(CPU_COUNT(&allowed)) < config.workers) {
    return fmt::format("{} CPU{} allowed for {} workers: polling workers would hold each other up",
                       CPU_COUNT(&allowed), plural(CPU_COUNT(&allowed)), config.workers);
  }
  if (const std::string quota = cpu_quota(); !quota.empty()) {
    return "this cgroup has a CPU quota (" + quota + "): polling would spend it";
  }
  return "";
}

dataplane::BackendConfig backend_config_of(const Config& config) {
  dataplane::BackendConfig out;
  out.listen_address = config.listen_address;
  out.listen_port = config.listen_port;
  out.workers = config.workers;
  out.burst_size = config.burst_size;
  out.pin_workers = config.pin_workers;
  out.udp_gso = config.udp_gso;
  out.udp_gro = config.udp_gro;
  out.poll_spin_us = config.poll_spin_us;
  out.layout = config.id_layout;
  out.retry_hint_us = config.retry_hint_us;
  out.clock_offset_ms = config.clock_offset_ms;
  return out;
}

// Everything the running daemon holds, and the control loop over it.
class Daemon {
 public:
  Daemon(const Config& config, const SystemClock& clock, int signal_fd, persist::WatermarkStore& store,
         persist::SequenceStore& sequence_store, std::unique_ptr<cluster::ClusterMode> cluster)
      : config_(config),
        clock_(clock),
        signal_fd_(signal_fd),
        store_(store),
        cluster_(std::move(cluster)),
        shared_(config.core_slices()),
        local_durability_(store),
        scheduler_(config.id_layout, config.lead_ms,
                   cluster_ ? cluster_->durability(&local_durability_) : local_durability_, shared_, clock),
        renew_loop_(scheduler_.tick_ms(), [this] { renew_step(); }),
        sequences_(shared_.sequences, sequence_store, SequenceOptions{},
                   cluster_ ? &cluster_->sequence_blocks() : nullptr, &clock),
        sequence_loop_(
            SequenceOptions{}.refill_ms, [this] { sequences_.step(); }, "flurry-seq") {}

  // The first durable watermark, the backend (not serving yet), the renew thread.
  Status start(std::uint64_t floor_t, int eal_argc, char** argv);
  // The control socket and /metrics, then the workers.
  Status open_endpoints();
  void run();
  void stop();

 private:
  Status start_auth(dataplane::BackendConfig* backend_config);
  Status reload_keys();
  void renew_step();
  void copy_store_view();
  void refresh();
  Status answer(const std::string& name, const nlohmann::json& request, nlohmann::json* reply);
  Status open_front_ends();
  dataplane::FrontendConfig front_end_config(std::uint32_t core, const std::string& address,
                                             std::uint16_t port) const;
  std::optional<SequenceManager::Holder> sequence_holder() const;
  std::string metrics_reply();
  MetricsHttp::Probed probe(MetricsHttp::ProbeKind kind, bool verbose);
  void notify_service();
  Status register_telemetry();

  const Config& config_;
  const SystemClock& clock_;
  int signal_fd_;
  persist::WatermarkStore& store_;
  std::unique_ptr<cluster::ClusterMode> cluster_;
  core::Shared shared_;
  LocalDurability local_durability_;
  WatermarkScheduler scheduler_;
  RenewLoop renew_loop_;
  SequenceManager sequences_;  // local store, or etcd in cluster mode
  RenewLoop sequence_loop_;    // refills the workers' sequence blocks; its writes block only it
  std::unique_ptr<dataplane::Backend> backend_;
  std::unique_ptr<dataplane::RespFrontend> resp_;  // --resp-listen, core slice `workers`
  std::unique_ptr<dataplane::HttpFrontend> http_;  // --http-listen, the slice after it
  ControlServer control_;
  MetricsHttp metrics_http_;  // served by the control loop, never by a thread of its own
  ServiceNotify notify_;      // systemd (Type=notify): READY once serving, STOPPING, WATCHDOG
  ReportSources sources_;
  KeySlots key_slots_;                          // key id -> counter slot, kept across reloads
  std::unique_ptr<core::ReplayFilter> replay_;  // --auth optional|required: shared by the workers
  // The store is written by the renew thread only; what the reports show of it is copied
  // here after each step, so the control loop never touches the store (or waits for it).
  struct StoreView {
    std::mutex mutex;
    std::string method;
    std::uint64_t writes = 0;
    std::uint64_t failures = 0;
    std::uint64_t durable_watermark_t = 0;
  } store_view_;
};

Status Daemon::start(std::uint64_t floor_t, int eal_argc, char** argv) {
  const std::uint32_t node_id = cluster_ ? cluster_->node_id() : config_.node_id;
  if (cluster_) {
    floor_t = std::max(floor_t, cluster_->floor_t());
    cluster_->start_keepalive();
  }
  if (Status started = scheduler_.start(node_id, floor_t); !started.ok()) {
    // Cluster mode: etcd going away right after the claim is not fatal; nothing is served
    // until the scheduler's retries (or a re-claim, if fenced) succeed.
    if (!cluster_ ||
        (scheduler_.state() != ServeState::fenced && scheduler_.degraded_cause() != DegradedCause::etcd)) {
      return std::move(started).context("cannot make the first watermark durable in " + config_.state_dir);
    }
    log_warn("cluster mode: first watermark not acknowledged by etcd yet ({}); serving nothing until it is",
             started.message());
  }
  dataplane::BackendConfig backend_config = backend_config_of(config_);
  if (const std::string reason = poll_off_reason(config_); !reason.empty()) {
    log_warn("socket workers will not poll (--poll-spin-us {} ignored): {}", config_.poll_spin_us, reason);
    backend_config.poll_spin_us = 0;
  }
  if (Status auth = start_auth(&backend_config); !auth.ok()) return auth;
  // After the signal mask, so EAL's threads inherit it. EAL's arguments: argv before `--`.
  Result<std::unique_ptr<dataplane::Backend>> backend =
      dataplane::make_backend(config_.backend_kind, eal_argc, argv, backend_config, shared_);
  if (!backend.ok()) return backend.status();
  backend_ = std::move(backend).value();
  if (Status registered = register_telemetry(); !registered.ok()) return registered;
  if (Status opened = open_front_ends(); !opened.ok()) return opened;
  copy_store_view();
  renew_loop_.start();
  if (!cluster_) sequences_.load();  // cluster mode: the sequence thread lists them in etcd
  if (cluster_) sequences_.set_holder([this] { return sequence_holder(); });
  sequence_loop_.start();
  sources_.config = &config_;
  sources_.shared = &shared_;
  sources_.backend = backend_.get();
  sources_.started_unix_ms = clock_.wall_ms();
  if (resp_) sources_.doors.emplace_back("resp", &resp_->door());
  if (http_) sources_.doors.emplace_back("http", &http_->door());
  sources_.doors.emplace_back("control", &control_.door());
  if (!config_.metrics_listen.empty()) sources_.doors.emplace_back("metrics", &metrics_http_.door());
  return {};
}

// Cluster mode: this node's node id and lease while it holds them (monotonic sequences'
// owner keys live under that lease); nullopt once the lease is known gone.
std::optional<SequenceManager::Holder> Daemon::sequence_holder() const {
  const cluster::LeaseStatus status = cluster_->status();
  if (!status.holds_node || cluster_->membership().lease_expired()) return std::nullopt;
  return SequenceManager::Holder{status.node_id, status.lease_id, cluster_->serve_until_unix_ms()};
}

// --auth optional|required: libsodium, the replay table and the first key table, before any
// worker runs (a bad key file stops the start with its reason).
Status Daemon::start_auth(dataplane::BackendConfig* backend_config) {
  if (config_.auth_mode == core::AuthMode::off) return {};
  if (sodium_init() < 0) return Error{"libsodium failed to initialise (sodium_init)"};
  replay_ = std::make_unique<core::ReplayFilter>(config_.replay_slots);
  backend_config->auth =
      core::AuthConfig{config_.auth_mode, config_.auth_window_ms, crypto_shorthash, replay_.get()};
  return reload_keys();
}

// SIGHUP and `flurryctl keys reload`: the whole file or nothing; the workers switch at their
// next burst and the old table is freed once each has (KeyTableSlot).
Status Daemon::reload_keys() {
  if (config_.auth_mode == core::AuthMode::off) return Error{"--auth is off: there is no key file to reload"};
  // Slots of keys removed by earlier reloads go to new key ids once no worker holds a table
  // that names the old keys (control/keys_file.h KeySlots).
  if (shared_.keys.reclaim() == 0) key_slots_.release_retired();
  Result<std::unique_ptr<core::KeyTable>> table = load_key_file(config_.key_file, key_slots_);
  if (!table.ok()) return table.status();
  const std::size_t count = (*table)->keys().size();
  shared_.keys.publish(std::move(table).value());
  log_info("keys: {} loaded from {}", count, config_.key_file);
  return {};
}

// The front doors' limits (base/door.h): the flags' timeouts, and each door's sizes.
DoorLimits door_limits(const Config& config, std::uint32_t connections_max, std::uint32_t per_peer_max) {
  DoorLimits limits;
  limits.connections_max = connections_max;
  limits.per_peer_max = per_peer_max;
  limits.idle_timeout_ms = std::uint64_t{config.idle_timeout_s} * 1000;
  limits.request_timeout_ms = std::uint64_t{config.request_timeout_s} * 1000;
  return limits;
}

Status Daemon::open_endpoints() {
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
  if (!config_.metrics_listen.empty()) {
    // Half of the metrics port's connections at most from one address: a prober elsewhere
    // always finds room, and a full door sheds the longest-idle for it anyway.
    const std::uint32_t metrics_max = MetricsHttp::connections_max;
    if (Status opened = metrics_http_.open(
            config_.metrics_address, config_.metrics_port, [this] { return metrics_reply(); },
            [this](MetricsHttp::ProbeKind kind, bool verbose) { return probe(kind, verbose); },
            door_limits(config_, metrics_max, std::min(config_.peer_connections_max, metrics_max / 2)));
        !opened.ok()) {
      return opened;
    }
    log_info("Prometheus metrics on http://{}/metrics", config_.metrics_listen);
  }
  // The workers last: once a client gets an ID, the control socket answers too.
  if (Status started = backend_->start(); !started.ok()) return started;
  if (resp_) {
    resp_->start();
    log_info("Redis protocol on tcp {} (try: redis-cli -p {} FLURRY.ID 5)", config_.resp_listen,
             config_.resp_port);
  }
  if (http_) {
    if (Status started = http_->start(); !started.ok()) return started;
    log_info("HTTP on tcp {} (try: curl 'http://{}/v1/ids?n=5')", config_.http_listen, config_.http_listen);
  }
  log_info("serving IDs on udp {} ({} backend, {} worker{}), node {}; control socket {}", config_.listen,
           backend_->name(), config_.workers, config_.workers == 1 ? "" : "s",
           shared_.assignment.node_id.load(), config_.control_socket);
  log_info("try: flurry get -n 5 --server {}   |   flurryctl --control-socket {} status", config_.listen,
           config_.control_socket);
  return {};
}

dataplane::FrontendConfig Daemon::front_end_config(std::uint32_t core, const std::string& address,
                                                   std::uint16_t port) const {
  dataplane::FrontendConfig out;
  out.address = address;
  out.port = port;
  out.slice.layout = config_.id_layout;
  out.slice.core = core;
  out.slice.slices = config_.core_slices();
  out.slice.retry_hint_us = config_.retry_hint_us;
  out.slice.clock = &clock_;
  out.door = door_limits(config_, config_.connections_max, config_.peer_connections_max);
  out.info = fmt::format("# Server\r\nflurry_version:{}\r\nlayout:{}\r\ncore:{}\r\nids_per_call_max:{}\r\n",
                         FLURRY_VERSION, proto::describe(config_.id_layout), core, out.ids_per_call_max);
  return out;
}

// Bound before the workers serve, so a taken port stops flurryd at start with its name.
Status Daemon::open_front_ends() {
  std::uint32_t core = config_.workers;
  if (!config_.resp_listen.empty()) {
    auto opened = dataplane::RespFrontend::open(
        front_end_config(core, config_.resp_address, config_.resp_port), shared_, shared_.stats[core]);
    if (!opened.ok()) return opened.status();
    resp_ = std::move(opened).value();
    sources_.front_ends.push_back(resp_.get());
    ++core;
  }
  if (!config_.http_listen.empty()) {
    auto opened = dataplane::HttpFrontend::open(
        front_end_config(core, config_.http_address, config_.http_port), shared_, shared_.stats[core]);
    if (!opened.ok()) return opened.status();
    http_ = std::move(opened).value();
    sources_.front_ends.push_back(http_.get());
  }
  return {};
}

void Daemon::renew_step() {
  scheduler_.tick();
  if (cluster_) cluster_->tick(scheduler_, store_.durable_watermark_t());
  copy_store_view();
}

void Daemon::copy_store_view() {
  std::lock_guard lock(store_view_.mutex);
  store_view_.method = std::string(store_.method());  // io_uring may fall back at run time
  store_view_.writes = store_.stores();
  store_view_.failures = store_.store_failures();
  store_view_.durable_watermark_t = store_.durable_watermark_t();
}

void Daemon::refresh() {
  sources_.scheduler = scheduler_.snapshot();
  {
    std::lock_guard lock(store_view_.mutex);
    sources_.store_method = store_view_.method;
    sources_.store_writes = store_view_.writes;
    sources_.store_failures = store_view_.failures;
    sources_.durable_watermark_t = store_view_.durable_watermark_t;
  }
  if (cluster_) sources_.lease = cluster_->lease_json();
  sources_.control_bad_requests = control_.bad_requests();
  sources_.sequences_exhausted = sequences_.exhausted();
  sources_.control_refused_peers = control_.refused_peers();
}

// The `metrics` command and GET /metrics (--metrics-listen) render the same text.
std::string Daemon::metrics_reply() {
  refresh();
  return metrics_text(sources_) + (cluster_ ? cluster_->metrics_text() : std::string()) +
         sequences_.metrics_text();
}

// /livez: the process and its loops are alive (this answer comes from the control loop; the
// workers have not been told to stop). /readyz: serving, i.e. what `flurryctl health` calls
// healthy: not starting, drained, fenced, exhausted or degraded beyond the held ceiling.
MetricsHttp::Probed Daemon::probe(MetricsHttp::ProbeKind kind, bool verbose) {
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

Status Daemon::answer(const std::string& name, const nlohmann::json& request, nlohmann::json* reply) {
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
      scheduler_.drain();
      *reply = {{"state", scheduler_.state_name()}};
      // A STATUS line, not STOPPING=1: systemd takes STOPPING=1 as the start of a stop and
      // kills the process after TimeoutStopSec; a drained node waits for the operator.
      notify_.status("drained: issuing no IDs; stop the unit when clients have moved");
      break;
    case Command::keys_list:
      *reply = {
          {"auth", config_.auth}, {"key_file", config_.key_file}, {"keys", keys_json(shared_.keys.load())}};
      break;
    case Command::keys_reload:
      if (Status reloaded = reload_keys(); !reloaded.ok()) return reloaded;
      *reply = {{"keys", keys_json(shared_.keys.load())}};
      break;
    case Command::seq:
      return sequences_.command(request, reply);  // cluster mode: in etcd
  }
  return {};
}

// dpdk backend: /flurry/status, /flurry/stats, /flurry/watermark and /flurry/lease in DPDK's
// telemetry (dpdk-telemetry.py). DPDK's telemetry thread asks the control socket, so the
// answers are the control loop's, the same as flurryctl's, and nothing here is shared with it.
Status Daemon::register_telemetry() {
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
void Daemon::notify_service() {
  notify_.watchdog(std::chrono::steady_clock::now());
  if (notify_.ready_sent()) return;
  refresh();
  const nlohmann::json health = health_json(sources_);
  if (!health["healthy"].get<bool>()) return;
  notify_.ready(
      fmt::format("serving IDs on udp {}, node {}", config_.listen, shared_.assignment.node_id.load()));
}

void Daemon::run() {
  std::vector<pollfd> fds;
  for (;;) {
    notify_service();
    fds.clear();
    fds.push_back({signal_fd_, POLLIN, 0});
    control_.poll_fds(&fds);
    metrics_http_.poll_fds(&fds);
    poll(fds.data(), fds.size(),
         notify_.poll_timeout_ms(metrics_http_.poll_timeout_ms(static_cast<int>(scheduler_.tick_ms()))));
    if (int signal_number = 0; signalled(signal_fd_, &signal_number)) {
      if (signal_number == SIGHUP) {
        if (Status reloaded = reload_keys(); !reloaded.ok())
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
    if (cluster_) cluster_->fence_if_lease_expired(scheduler_);
    control_.serve();
    metrics_http_.serve();
  }
}

void Daemon::stop() {
  sequence_loop_.stop();  // waits for a block reservation in flight
  renew_loop_.stop();     // waits for a write in flight: the watermark file stays consistent
  if (backend_) backend_->stop();
  if (resp_) resp_->stop();
  if (http_) http_->stop();
  if (cluster_) cluster_->stop();  // revokes the lease: the node id is free at once
}

// One state dir, one flurryd (first, when the directory exists: a second start on it is told
// so, with the holder's pid; a new one is locked right after open_state made it); one address,
// one flurryd; in local mode also one node id per host: taken before the state dir is opened,
// so a second instance is refused with the holder's pid whatever its state dir
// (control/listen_lock.h).
Status take_locks(const Config& config, ListenLock& lock) {
  struct stat info {};
  if (stat(config.state_dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    if (Status taken = lock.acquire_state_dir(config.state_dir); !taken.ok()) return taken;
  }
  Result<std::string> dir = lock_dir(config.lock_dir, config.state_dir);
  if (!dir.ok()) return dir.status();
  if (Status taken = lock.acquire(*dir, config.listen_address, config.listen_port); !taken.ok()) return taken;
  if (config.etcd.empty()) return lock.acquire_node(*dir, config.node_id);
  return {};
}

int run(int argc, char** argv) {
  Config config;
  int eal_argc = 1;
  if (const auto exit_code = parse_arguments(argc, argv, &config, &eal_argc)) return *exit_code;
  const int signal_fd = block_signals();
  if (signal_fd < 0) return fail(std::string("signalfd: ") + std::strerror(errno));
  log_info("starting; effective configuration:\n{}", describe(config));
  if (!config.key_file.empty()) {  // a bad key file stops the start before the state is touched
    KeySlots scratch;
    if (Result<std::unique_ptr<core::KeyTable>> keys = load_key_file(config.key_file, scratch); !keys.ok()) {
      return fail(keys.message(), 2);
    }
  }
  if (!config.etcd.empty()) {  // so does an etcd TLS or user setup that cannot work
    cluster::EtcdConfig access = etcd_access(config);
    std::string joined;
    for (const std::string& endpoint : config.etcd) joined += (joined.empty() ? "" : ",") + endpoint;
    Result<std::vector<std::string>> endpoints = cluster::parse_endpoints(joined);
    if (!endpoints.ok()) return fail(endpoints.message(), 2);
    access.endpoints = *endpoints;
    if (Status usable = cluster::check_config(access); !usable.ok()) return fail(usable.message(), 2);
    if (!config.etcd_user.empty() && config.etcd.front().rfind("http://", 0) == 0) {
      log_warn(
          "--etcd-user over http:// endpoints: the password and tokens cross the network unencrypted; use "
          "https:// endpoints");
    }
  }

  ListenLock lock;
  if (Status taken = take_locks(config, lock); !taken.ok()) return fail(taken.message());
  SystemClock clock(config.clock_offset_ms);
  // The state directory next: its lock (flock on the watermark file) keeps a second flurryd on
  // the same directory from going further — in cluster mode it would otherwise re-own the
  // running instance's node id with the shared instance id and fence it.
  Result<OpenedState> state = open_state(config, clock);
  if (!state.ok()) return fail(state.message());
  if (!lock.holds_state_dir()) {
    if (Status taken = lock.acquire_state_dir(config.state_dir); !taken.ok()) return fail(taken.message());
  }
  log_info("state {}: durable watermark {} ({}), written with {}", config.state_dir,
           state->store->durable_watermark_t(),
           proto::format_unix_ms(config.id_layout.epoch_ms +
                                 state->store->durable_watermark_t() * config.id_layout.time_unit_ms),
           state->store->method());
  std::unique_ptr<cluster::ClusterMode> cluster;
  if (!config.etcd.empty()) {
    Result<std::unique_ptr<cluster::ClusterMode>> created = cluster_mode(config, clock);
    if (!created.ok()) return fail(created.message(), 2);  // a configuration error
    // Cluster mode: hold a node id from etcd before serving anything.
    if (Status claimed = (*created)->claim_at_start([signal_fd] { return signalled(signal_fd); });
        !claimed.ok()) {
      return fail("cluster mode: " + claimed.message());
    }
    cluster = std::move(created).value();
  }
  // Named sequences: their durable bounds live beside the watermark (the same directory lock).
  Result<std::unique_ptr<persist::SequenceStore>> sequence_store =
      persist::SequenceStore::open(config.state_dir, state->store->method() == "io_uring");
  if (!sequence_store.ok()) return fail(sequence_store.message());
  Daemon daemon(config, clock, signal_fd, *state->store, **sequence_store, std::move(cluster));
  Status started = daemon.start(state->floor_t, eal_argc, argv);
  if (started.ok()) started = daemon.open_endpoints();
  if (!started.ok()) {
    daemon.stop();
    return fail(started.message());
  }
  daemon.run();
  daemon.stop();
  log_info("stopped; durable watermark {} stays valid, the next start issues above it",
           state->store->durable_watermark_t());
  return 0;
}

}  // namespace
}  // namespace flurry::control

int main(int argc, char** argv) { return flurry::control::run(argc, argv); }
