// control/node/node.cc — see node.h.
#include "control/node/node.h"

#include <sodium.h>

#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "control/keys_file.h"
#include "control/node/state_dir.h"
#include "control/private_file.h"
#include "dataplane/backend.h"
#include "persist/identity.h"
#include "proto/layout.h"

namespace flurry::control {
namespace {

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
  options.timings = config.timings;
  options.clock_skew_ms_max = config.clock_skew_ms_max;
  options.remake_instance_id = [state_dir = config.state_dir] {
    return persist::replace_instance_id(state_dir);
  };
  return cluster::ClusterMode::create(options, clock);
}

}  // namespace

Status Node::check(const Config& config) {
  if (const std::string missing = dataplane::backend_missing(config.backend_kind); !missing.empty()) {
    return Error{missing};
  }
  if (!config.key_file.empty()) {  // a bad key file stops the start before the state is touched
    KeySlots scratch;
    if (Result<std::unique_ptr<core::KeyTable>> keys = load_key_file(config.key_file, scratch); !keys.ok()) {
      return keys.status();
    }
  }
  if (!config.http_tls_key.empty()) {  // and an HTTPS certificate or key that cannot be read
    Result<TlsFiles> tls =
        read_tls_files(config.http_tls_cert, "--http-tls-cert", config.http_tls_key, "--http-tls-key");
    if (!tls.ok()) return tls.status();
    sodium_memzero(tls->key_pem.data(), tls->key_pem.size());
  }
  if (!config.etcd.empty()) {  // so does an etcd TLS or user setup that cannot work
    cluster::EtcdConfig access = etcd_access(config);
    std::string joined;
    for (const std::string& endpoint : config.etcd) joined += (joined.empty() ? "" : ",") + endpoint;
    Result<std::vector<std::string>> endpoints = cluster::parse_endpoints(joined);
    if (!endpoints.ok()) return endpoints.status();
    access.endpoints = *endpoints;
    if (Status usable = cluster::check_config(access); !usable.ok()) return usable;
    if (!config.etcd_user.empty() && config.etcd.front().rfind("http://", 0) == 0) {
      log_warn(
          "--etcd-user over http:// endpoints: the password and tokens cross the network unencrypted; use "
          "https:// endpoints");
    }
  }
  return {};
}

Result<std::unique_ptr<Node>> Node::open(const Config& config, const NodeOptions& options, int* exit_code) {
  int scratch = 0;
  int& code = exit_code != nullptr ? *exit_code : scratch;
  code = 1;
  const Clock& clock = *options.clock;
  // The state directory first: its lock (flock on the watermark file) keeps a second flurryd
  // on the same directory from going further — in cluster mode it would otherwise re-own the
  // running instance's node id with the shared instance id and fence it.
  Result<OpenedState> state = open_state(config, clock, options.io);
  if (!state.ok()) return state.status();
  if (options.lock != nullptr && !options.lock->holds_state_dir()) {
    if (Status taken = options.lock->acquire_state_dir(config.state_dir); !taken.ok()) return taken;
  }
  log_info("state {}: durable watermark {} ({}), written with {}", config.state_dir,
           state->store->durable_watermark_t(),
           proto::format_unix_ms(config.id_layout.epoch_ms +
                                 state->store->durable_watermark_t() * config.id_layout.time_unit_ms),
           state->store->method());
  std::unique_ptr<cluster::ClusterMode> cluster;
  if (!config.etcd.empty()) {
    Result<std::unique_ptr<cluster::ClusterMode>> created = cluster_mode(config, clock);
    if (!created.ok()) {
      code = 2;  // a configuration error
      return created.status();
    }
    // Cluster mode: hold a node id from etcd before serving anything.
    const int signal_fd = options.signal_fd;
    if (Status claimed =
            (*created)->claim_at_start([signal_fd] { return signal_fd >= 0 && signalled(signal_fd); });
        !claimed.ok()) {
      return Error{"cluster mode: " + claimed.message()};
    }
    cluster = std::move(created).value();
  }
  // Named sequences: their durable bounds live beside the watermark (the same directory lock).
  Result<std::unique_ptr<persist::SequenceStore>> sequence_store =
      persist::SequenceStore::open(config.state_dir, state->store->uses_io_uring(), options.io);
  if (!sequence_store.ok()) return sequence_store.status();
  return std::unique_ptr<Node>(new Node(config, options, std::move(state->store), state->floor_t,
                                        std::move(sequence_store).value(), std::move(cluster)));
}

Node::Node(const Config& config, const NodeOptions& options, std::unique_ptr<persist::WatermarkStore> store,
           std::uint64_t floor_t, std::unique_ptr<persist::SequenceStore> sequence_store,
           std::unique_ptr<cluster::ClusterMode> cluster)
    : options_(options),
      store_(std::move(store)),
      floor_t_(floor_t),
      sequence_store_(std::move(sequence_store)),
      cluster_(std::move(cluster)),
      shared_(config.core_slices()),
      renewal_(config, *options.clock, shared_, *store_, cluster_.get()),
      sequences_(shared_, *sequence_store_, cluster_.get(), *options.clock),
      issuing_(config, *options.clock, shared_, sources_),
      ops_(config, *options.clock, shared_, sources_,
           Ops::Parts{renewal_, sequences_, issuing_, cluster_.get()}, options.signal_fd) {
  // --seq-auto-create: the front doors create an unknown name through the sequences part.
  if (config.seq_auto_create_mode) {
    sequences_.set_auto_create(config.seq_auto_create_mode, config.seq_auto_create_max);
    issuing_.set_create_sequence([this](const std::string& name) { return sequences_.auto_create(name); });
  }
}

Node::~Node() { stop(); }

Status Node::start() {
  if (Status started = renewal_.start(floor_t_); !started.ok()) return started;
  if (Status made = issuing_.make(options_.eal_argc, options_.eal_argv); !made.ok()) return made;
  if (Status registered = ops_.register_telemetry(); !registered.ok()) return registered;
  if (Status opened = issuing_.open_front_ends(); !opened.ok()) return opened;
  renewal_.start_loop();
  sequences_.start();
  if (Status opened = ops_.open(); !opened.ok()) return opened;
  return issuing_.start();
}

void Node::run() { ops_.run(); }

void Node::stop_soon() { ops_.stop_soon(); }

void Node::stop() {
  if (stopped_) return;
  stopped_ = true;
  sequences_.stop();  // waits for a block reservation in flight
  renewal_.stop();    // waits for a write in flight: the watermark file stays consistent
  issuing_.stop();
  if (cluster_) cluster_->stop();  // revokes the lease: the node id is free at once
}

}  // namespace flurry::control
