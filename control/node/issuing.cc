// control/node/issuing.cc — see issuing.h.
#include "control/node/issuing.h"

#include <fmt/format.h>
#include <sodium.h>

#include <random>
#include <utility>

#include "base/log.h"
#include "control/node/cpu_policy.h"
#include "control/private_file.h"
#include "proto/layout.h"

namespace flurry::control {

dataplane::BackendConfig backend_config_of(const Config& config) {
  dataplane::BackendConfig out;
  out.listen = config.listen;
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

Issuing::Issuing(const Config& config, const Clock& clock, core::Shared& shared, ReportSources& sources)
    : config_(config), clock_(clock), shared_(shared), sources_(sources) {}

Status Issuing::make(int eal_argc, char** eal_argv) {
  dataplane::BackendConfig backend_config = backend_config_of(config_);
  backend_config.clock = &clock_;  // the node's (flurryd: the system clock shifted by --clock-offset-ms)
  if (const std::string reason = poll_off_reason(config_); !reason.empty()) {
    log_warn("socket workers will not poll (--poll-spin-us {} ignored): {}", config_.poll_spin_us, reason);
    backend_config.poll_spin_us = 0;
  }
  if (Status auth = start_auth(&backend_config); !auth.ok()) return auth;
  start_source_limit();
  // After the signal mask, so EAL's threads inherit it. EAL's arguments: argv before `--`.
  Result<std::unique_ptr<dataplane::Backend>> backend =
      dataplane::make_backend(config_.backend_kind, eal_argc, eal_argv, backend_config, shared_);
  if (!backend.ok()) return backend.status();
  backend_ = std::move(backend).value();
  return {};
}

// --auth optional|required: libsodium, the replay table and the first key table, before any
// worker runs (a bad key file stops the start with its reason).
Status Issuing::start_auth(dataplane::BackendConfig* backend_config) {
  if (config_.auth_mode == core::AuthMode::off) return {};
  if (sodium_init() < 0) return Error{"libsodium failed to initialise (sodium_init)"};
  replay_ = std::make_unique<core::ReplayFilter>(config_.replay_slots);
  backend_config->auth =
      core::AuthConfig{config_.auth_mode, config_.auth_window_ms, crypto_shorthash, replay_.get()};
  return reload_keys();
}

// --source-share: every slice (workers, DPDK lcores, front doors) builds its own table from
// this when it is built, after here. The hash keys are random per process: which addresses
// share a set of the table cannot be known, so not aimed (core/source_limit.h).
void Issuing::start_source_limit() {
  core::SourceLimitConfig limit = core::source_limit_for(config_.id_layout, config_.source_share,
                                                         config_.source_burst_ms, config_.source_table);
  std::random_device random;
  for (std::uint64_t& key : limit.seed) key = std::uint64_t{random()} << 32 | random();
  shared_.source_limit = limit;
  if (!limit.enabled()) {
    log_info(
        "per-source bound off (--source-share 0): one unsigned client may take a slice's whole capacity");
    return;
  }
  log_info(
      "per-source bound: an unsigned client address may take {} numbers/s of each of the {} core slices "
      "(--source-share {} %), {} at once (--source-burst-ms {}); {} addresses tracked per slice",
      limit.ids_per_s, config_.core_slices(), config_.source_share, limit.burst_ids, config_.source_burst_ms,
      config_.source_table);
}

// SIGHUP and `flurryctl keys reload`: the whole file or nothing; the workers switch at their
// next burst and the old table is freed once each has (KeyTableSlot).
Status Issuing::reload_keys() {
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

Status Issuing::start() {
  // The workers last: once a client gets an ID, the control socket answers too.
  if (Status started = backend_->start(); !started.ok()) return started;
  for (const auto& front_end : front_ends_) {
    if (Status started = front_end->start(); !started.ok()) return started;
    log_info("{}", front_end->describe());
  }
  log_info("serving IDs on udp {} ({} backend, {} worker{}), node {}; control socket {}",
           config_.listen.text(), backend_->name(), config_.workers, config_.workers == 1 ? "" : "s",
           shared_.assignment.node_id.load(), config_.control_socket);
  log_info("try: flurry get -n 5 --server {}   |   flurryctl --control-socket {} status",
           config_.listen.text(), config_.control_socket);
  return {};
}

void Issuing::stop() {
  if (backend_) backend_->stop();
  for (const auto& front_end : front_ends_) front_end->stop();
}

dataplane::FrontendConfig Issuing::front_end_config(std::uint32_t core,
                                                    const Config::FrontEnd& front_end) const {
  dataplane::FrontendConfig out;
  out.endpoint = front_end.endpoint;
  out.slice.layout = config_.id_layout;
  out.slice.core = core;
  out.slice.workers = config_.core_slices();
  out.slice.retry_hint_us = config_.retry_hint_us;
  out.clock = &clock_;
  out.door = door_limits(config_, config_.connections_max, config_.peer_connections_max);
  // The doors' login (dataplane/door_auth.h): the keys of --key-file, their door passwords.
  out.auth = config_.auth_mode;
  out.verify_password = &verify_door_password;
  out.create_sequence = create_sequence_;
  out.sequence_wait = std::chrono::milliseconds(config_.door_sequence_wait_ms);
  out.info = fmt::format("# Server\r\nflurry_version:{}\r\nlayout:{}\r\ncore:{}\r\nids_per_call_max:{}\r\n",
                         FLURRY_VERSION, proto::describe(config_.id_layout), core, out.ids_per_call_max);
  return out;
}

// Bound before the workers serve, so a taken port stops flurryd at start with its name. The
// one loop that hands out the front ends' core slices: the workers', then one each in the
// order of Config::front_ends (which core_slices() counts).
Status Issuing::open_front_ends() {
  for (std::size_t i = 0; i < config_.front_ends.size(); ++i) {
    const Config::FrontEnd& front_end = config_.front_ends[i];
    const auto core = static_cast<std::uint32_t>(config_.workers + i);
    dataplane::FrontendConfig door = front_end_config(core, front_end);
    if (front_end.kind == core::FrontEndKind::http && !config_.http_tls_key.empty()) {
      // HTTPS: the certificate and its key, read (the key as a private file) once, here.
      Result<TlsFiles> tls =
          read_tls_files(config_.http_tls_cert, "--http-tls-cert", config_.http_tls_key, "--http-tls-key");
      if (!tls.ok()) return tls.status();
      door.tls_cert_pem = std::move(tls->cert_pem);
      door.tls_key_pem = std::move(tls->key_pem);
    }
    auto opened = dataplane::open_frontend(front_end.kind, door, shared_);
    sodium_memzero(door.tls_key_pem.data(), door.tls_key_pem.size());  // the door keeps its own copy
    if (!opened.ok()) return opened.status();
    front_ends_.push_back(std::move(opened).value());
    sources_.front_ends.push_back(front_ends_.back().get());
  }
  return {};
}

}  // namespace flurry::control
