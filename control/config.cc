// control/config.cc — flags (CLI11) and TOML file (toml++) into one validated Config.
#include "control/config.h"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "base/cli.h"
#include "core/backend_kind.h"

namespace flurry::control {
namespace {

// One setting: its flag / TOML key, how to read a TOML value into the Config, and how to
// write the Config's value as TOML (describe()). The one list of settings is add_settings().
struct Setting {
  std::string key;  // TOML key; the flag is --key with '_' as '-'
  cli::Option* option = nullptr;
  std::function<Status(const toml::node&)> from_toml;
  std::string range;  // numbers: "MIN..MAX"
  std::function<std::string()> to_toml;
};

// A TOML basic string: quoted, with quotes, backslashes and control characters escaped.
std::string toml_quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

template <typename T>
std::function<Status(const toml::node&)> toml_number(T* field, T min, T max) {
  return [field, min, max](const toml::node& node) -> Status {
    auto value = node.value<std::int64_t>();
    if (!value) return Error{"must be a whole number"};
    if (*value < static_cast<std::int64_t>(min) || *value > static_cast<std::int64_t>(max)) {
      return Error{fmt::format("{} is out of range {}..{}", *value, min, max)};
    }
    *field = static_cast<T>(*value);
    return {};
  };
}

std::function<Status(const toml::node&)> toml_string(std::string* field) {
  return [field](const toml::node& node) -> Status {
    auto value = node.value<std::string>();
    if (!value) return Error{"must be a string"};
    *field = *value;
    return {};
  };
}

std::function<Status(const toml::node&)> toml_bool(bool* field) {
  return [field](const toml::node& node) -> Status {
    auto value = node.value<bool>();
    if (!value) return Error{"must be true or false"};
    *field = *value;
    return {};
  };
}

std::function<Status(const toml::node&)> toml_strings(std::vector<std::string>* field) {
  return [field](const toml::node& node) -> Status {
    field->clear();
    if (auto text = node.value<std::string>()) {
      field->push_back(*text);
      return {};
    }
    const auto* array = node.as_array();
    if (array == nullptr) return Error{"must be a string or an array of strings"};
    for (const auto& item : *array) {
      auto text = item.value<std::string>();
      if (!text) return Error{"must be a string or an array of strings"};
      field->push_back(*text);
    }
    return {};
  };
}

std::string flag_of(const std::string& key) {
  std::string flag = "--" + key;
  for (auto& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

// The layout from --layout, --epoch, --time-unit-ms, --core-from and --workers, validated
// against --node-id and the clock.
Result<proto::Layout> derive_layout(const Config& config) {
  Result<proto::Layout> layout = proto::parse_layout(config.layout);
  if (!layout.ok()) return std::move(layout).status().context("--layout");
  auto epoch = proto::parse_epoch(config.epoch);
  if (!epoch) {
    return Error{"--epoch '" + config.epoch +
                 "' is neither Unix milliseconds nor a UTC date like 2024-01-01T00:00:00Z"};
  }
  layout->epoch_ms = *epoch;
  if (config.time_unit_ms != 0) layout->time_unit_ms = config.time_unit_ms;  // validate checks it
  if (config.core_from == "sequence") {
    layout->core_from = proto::CoreBitsFrom::sequence;
  } else if (config.core_from == "node") {
    layout->core_from = proto::CoreBitsFrom::node;
  } else {
    return Error{"--core-from '" + config.core_from + "' is not one of sequence, node"};
  }
  layout->core_bits = proto::core_bits_for(config.core_slices());
  const auto now_ms = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                     std::chrono::system_clock::now().time_since_epoch())
                                                     .count() +
                                                 config.clock_offset_ms);
  if (Status valid = proto::validate(*layout, config.node_id, now_ms); !valid.ok()) return valid;
  return *layout;
}

// --state-dir made absolute and normal; the control socket's default inside it.
Status derive_paths(Config* config) {
  if (config->state_dir.empty()) {
    return Error{"--state-dir is empty: give the directory of this node's watermark"};
  }
  std::error_code absolute_error;
  const auto absolute = std::filesystem::absolute(config->state_dir, absolute_error);
  if (absolute_error) {
    return Error{"--state-dir '" + config->state_dir +
                 "' cannot be made absolute: " + absolute_error.message()};
  }
  config->state_dir = absolute.lexically_normal().string();
  if (config->state_dir.size() > 1 && config->state_dir.back() == '/') config->state_dir.pop_back();
  if (config->control_socket.empty()) config->control_socket = config->state_dir + "/flurryd.sock";
  return {};
}

// --auth, --key-file: the mode, and the combinations that cannot work.
Status derive_auth(Config* config) {
  if (config->auth == "off") {
    config->auth_mode = core::AuthMode::off;
  } else if (config->auth == "optional") {
    config->auth_mode = core::AuthMode::optional;
  } else if (config->auth == "required") {
    config->auth_mode = core::AuthMode::required;
  } else {
    return Error{"--auth '" + config->auth + "' is not one of off, optional, required"};
  }
  if (config->auth_mode == core::AuthMode::off && !config->key_file.empty()) {
    return Error{"--key-file is given but --auth is off: add --auth optional or --auth required"};
  }
  if (config->auth_mode != core::AuthMode::off && config->key_file.empty()) {
    return Error{"--auth " + config->auth + " needs --key-file FILE (TOML keys, mode 0600; see README)"};
  }
  if (!config->key_file.empty()) {
    std::error_code error;
    config->key_file = std::filesystem::absolute(config->key_file, error).lexically_normal().string();
  }
  return {};
}

// --http-tls-cert and --http-tls-key: both or neither, only with --http-listen; paths made
// absolute. The files themselves are read (the key as a private file) by Node::check.
Status derive_http_tls(Config* config) {
  if (config->http_tls_cert.empty() && config->http_tls_key.empty()) return {};
  if (config->http_tls_cert.empty() || config->http_tls_key.empty()) {
    return Error{
        "--http-tls-cert and --http-tls-key come together (the certificate and its private key): "
        "give both or neither"};
  }
  if (!config->http_listen.enabled()) {
    return Error{
        "--http-tls-cert and --http-tls-key are for the HTTP front end: add --http-listen ADDR:PORT "
        "or drop them"};
  }
  for (std::string* path : {&config->http_tls_cert, &config->http_tls_key}) {
    std::error_code error;
    const auto absolute = std::filesystem::absolute(*path, error);
    if (!error) *path = absolute.lexically_normal().string();
  }
  return {};
}

// The etcd TLS and user flags: only with --etcd; paths made absolute. The rules between them
// (cert with key, user with password file, TLS files with https://, files that are there, the
// password file private) are cluster::check_config's, which flurryd runs right after this,
// before anything is opened.
Status derive_etcd(Config* config) {
  const std::pair<const char*, std::string*> settings[] = {
      {"--etcd-cacert", &config->etcd_cacert},
      {"--etcd-cert", &config->etcd_cert},
      {"--etcd-key", &config->etcd_key},
      {"--etcd-user", &config->etcd_user},
      {"--etcd-password-file", &config->etcd_password_file}};
  for (const auto& [flag, value] : settings) {
    if (value->empty()) continue;
    if (config->etcd.empty()) {
      return Error{std::string(flag) +
                   " is given without --etcd: it is for cluster mode; add --etcd URL or drop it"};
    }
    if (value == &config->etcd_user) continue;
    std::error_code error;
    const auto absolute = std::filesystem::absolute(*value, error);
    if (!error) *value = absolute.lexically_normal().string();
  }
  return {};
}

Status derive(Config* config) {
  const auto backend = core::parse_backend(config->backend);
  if (!backend) return Error{"--backend '" + config->backend + "' is not one of socket, dpdk"};
  config->backend_kind = *backend;
  if (config->log_format != "text" && config->log_format != "json") {
    return Error{"--log-format '" + config->log_format + "' is not one of text, json"};
  }
  // The front doors, each with the next core slice after the workers' (Config::front_ends).
  const struct {
    core::FrontEndKind kind;
    const char* flag;
    const Endpoint& endpoint;
  } front_ends[] = {{core::FrontEndKind::resp, "--resp-listen", config->resp_listen},
                    {core::FrontEndKind::http, "--http-listen", config->http_listen},
                    {core::FrontEndKind::memcache, "--memcache-listen", config->memcache_listen}};
  config->front_ends.clear();
  for (const auto& front_end : front_ends) {
    if (front_end.endpoint.enabled())
      config->front_ends.push_back({front_end.kind, front_end.flag, front_end.endpoint});
  }
  if (Status auth = derive_auth(config); !auth.ok()) return auth;
  if (Status tls = derive_http_tls(config); !tls.ok()) return tls;
  config->seq_auto_create_mode.reset();
  if (config->seq_auto_create != "off") {
    config->seq_auto_create_mode = core::parse_seq_mode(config->seq_auto_create);
    if (!config->seq_auto_create_mode) {
      return Error{"--seq-auto-create '" + config->seq_auto_create +
                   "' is not one of off, segment, monotonic"};
    }
  }
  if (config->request_timeout_s > config->idle_timeout_s) {
    return Error{fmt::format(
        "--request-timeout-s {} is above --idle-timeout-s {}: a request may not outlast the idle timeout; "
        "lower it or raise --idle-timeout-s",
        config->request_timeout_s, config->idle_timeout_s)};
  }
  if (config->peer_connections_max > config->connections_max) {
    return Error{
        fmt::format("--peer-connections-max {} is above --connections-max {}: one address could take every "
                    "connection; lower it or raise --connections-max",
                    config->peer_connections_max, config->connections_max)};
  }
  if (!config->lock_dir.empty() && config->lock_dir.front() != '/') {
    return Error{"--lock-dir '" + config->lock_dir + "' must be an absolute path (or empty: automatic)"};
  }
  Result<proto::Layout> layout = derive_layout(*config);
  if (!layout.ok()) return layout.status();
  config->id_layout = *layout;
  if (!config->etcd.empty() && config->cluster.empty()) {
    return Error{"--etcd needs --cluster NAME (the key prefix /flurry/NAME/ shared by the cluster)"};
  }
  // Every period and timeout the lead and the lease TTL imply, checked against each other
  // here, before the state dir is touched (control/timings.h).
  Result<Timings> timings =
      derive_timings(config->lead_ms, config->id_layout.time_unit_ms,
                     config->etcd.empty() ? std::nullopt : std::optional<std::uint32_t>(config->lease_ttl_s));
  if (!timings.ok()) return timings.status();
  config->timings = *timings;
  if (Status etcd = derive_etcd(config); !etcd.ok()) return etcd;
  return derive_paths(config);
}

// Declares every flag (and its TOML key) on `app`, bound to *config's fields.
std::vector<Setting> add_settings(cli::App& app, Config* config) {
  std::vector<Setting> settings;
  auto add_number = [&](const std::string& key, auto* field, auto min, auto max, const std::string& help) {
    using T = std::remove_pointer_t<decltype(field)>;
    auto* option = app.add_option(flag_of(key), *field, help)
                       ->check(cli::Range(static_cast<T>(min), static_cast<T>(max)));
    settings.push_back({key, option, toml_number<T>(field, static_cast<T>(min), static_cast<T>(max)),
                        fmt::format("{}..{}", static_cast<T>(min), static_cast<T>(max)),
                        [field] { return fmt::format("{}", *field); }});
  };
  auto add_string = [&](const std::string& key, std::string* field, const std::string& help) {
    settings.push_back({key, app.add_option(flag_of(key), *field, help), toml_string(field), "",
                        [field] { return toml_quoted(*field); }});
  };
  auto add_bool = [&](const std::string& key, bool* field, const std::string& help) {
    settings.push_back({key, app.add_flag(flag_of(key), *field, help), toml_bool(field), "",
                        [field] { return std::string(*field ? "true" : "false"); }});
  };
  // ADDR:PORT, parsed as it is read (a flag's value, or the file's), into a typed Endpoint. With
  // `may_be_off`, an empty value is none (port 0: that door is off).
  auto add_endpoint = [&](const std::string& key, Endpoint* field, bool may_be_off,
                          const std::string& example, const std::string& address_hint,
                          const std::string& help) {
    const std::string flag = flag_of(key);
    auto parse = [field, flag, may_be_off, example, address_hint](const std::string& text) -> Status {
      if (text.empty() && may_be_off) {
        *field = Endpoint{};
        return {};
      }
      Result<Endpoint> endpoint = parse_endpoint(text, flag, example, address_hint);
      if (!endpoint.ok()) return endpoint.status();
      *field = *endpoint;
      return {};
    };
    auto* option = app.add_option_function(
        flag,
        [parse](const std::string& text) {
          if (Status parsed = parse(text); !parsed.ok()) throw cli::ValidationError(parsed.message());
        },
        help);
    option->default_str(field->text());
    settings.push_back({key, option,
                        [parse](const toml::node& node) -> Status {
                          auto value = node.value<std::string>();
                          if (!value) return Error{"must be a string ADDR:PORT"};
                          return parse(*value);
                        },
                        "", [field] { return toml_quoted(field->text()); }});
  };

  add_string("backend", &config->backend, "packet backend: socket (kernel UDP, runs anywhere) or dpdk");
  add_string("log_format", &config->log_format,
             "log lines as text, or json (one object a line, for log shippers)");
  add_endpoint("listen", &config->listen, false, "127.0.0.1:7420",
               "e.g. 127.0.0.1, or the address the port owns",
               "UDP ADDR:PORT to serve on (dpdk: the IP the port owns)");
  add_number("workers", &config->workers, 1, 64,
             "worker threads / lcores, each owning a slice of the sequence");
  add_number("node_id", &config->node_id, 0, 65535,
             "node id in local mode (must fit the layout's node bits)");
  settings.push_back({"etcd",
                      app.add_option("--etcd", config->etcd, "cluster mode: etcd endpoints URL[,URL...]")
                          ->delimiter(',')
                          ->multi_option_policy(cli::MultiOptionPolicy::TakeAll),
                      toml_strings(&config->etcd), "", [field = &config->etcd] {
                        std::string out = "[";
                        for (const std::string& endpoint : *field) {
                          out += (out.size() > 1 ? ", " : "") + toml_quoted(endpoint);
                        }
                        return out + "]";
                      }});
  add_string("cluster", &config->cluster, "cluster mode: cluster name (etcd key prefix /flurry/NAME/)");
  add_string(
      "etcd_cacert", &config->etcd_cacert,
      "cluster mode, https:// endpoints: PEM file of the CA that signed etcd's certificate (only it is "
      "trusted; default empty: the system's CA bundle)");
  add_string("etcd_cert", &config->etcd_cert,
             "cluster mode, https:// endpoints: PEM client certificate for etcd's --client-cert-auth (with "
             "--etcd-key; its subject without a Common Name: etcd's JSON gateway refuses one with)");
  add_string("etcd_key", &config->etcd_key, "cluster mode: PEM private key of --etcd-cert");
  add_string(
      "etcd_user", &config->etcd_user,
      "cluster mode: authenticate to etcd as this user (etcd auth enabled; with --etcd-password-file)");
  add_string("etcd_password_file", &config->etcd_password_file,
             "cluster mode: file holding --etcd-user's password (mode 0600, owned by flurryd's user or root, "
             "not a symlink; read again at each authentication, so a new password needs no restart)");
  add_number("lease_ttl_s", &config->lease_ttl_s, 2, 300, "cluster mode: etcd lease TTL in seconds");
  add_number("clock_skew_ms_max", &config->clock_skew_ms_max, 10, 3'600'000,
             "cluster mode: refuse to start when this far from the peers' median clock");
  add_string("state_dir", &config->state_dir, "directory of the watermark and identity files");
  add_string("control_socket", &config->control_socket,
             "Unix socket for flurryctl (default <state-dir>/flurryd.sock)");
  add_endpoint("metrics_listen", &config->metrics_listen, true, "127.0.0.1:9420",
               "e.g. 127.0.0.1, or 0.0.0.0 for every interface",
               "TCP ADDR:PORT where Prometheus scrapes GET /metrics over HTTP (default empty: off)");
  add_endpoint("resp_listen", &config->resp_listen, true, "127.0.0.1:6379",
               "e.g. 127.0.0.1, or 0.0.0.0 for every interface",
               "TCP ADDR:PORT of a Redis-protocol front end (FLURRY.ID [n], PING, INFO; default empty: off)");
  add_endpoint("http_listen", &config->http_listen, true, "127.0.0.1:8080",
               "e.g. 127.0.0.1, or 0.0.0.0 for every interface",
               "TCP ADDR:PORT of an HTTP front end (GET /v1/ids?n=N, Leaf's /api/snowflake/get/KEY; default "
               "empty: off)");
  add_string("http_tls_cert", &config->http_tls_cert,
             "PEM certificate (its chain after it) for --http-listen: the HTTP front end speaks HTTPS (with "
             "--http-tls-key; default empty: plain HTTP)");
  add_string("http_tls_key", &config->http_tls_key,
             "PEM private key of --http-tls-cert (mode 0600 or stricter, not a symlink)");
  add_endpoint("memcache_listen", &config->memcache_listen, true, "127.0.0.1:11211",
               "e.g. 127.0.0.1, or 0.0.0.0 for every interface",
               "TCP ADDR:PORT of a memcached-protocol front end, katsubushi's (get KEY: a fresh ID a key, "
               "incr NAME N, stats, version; default empty: off)");
  add_number("idle_timeout_s", &config->idle_timeout_s, 1, 86'400,
             "front doors (RESP, HTTP, memcached, --metrics-listen, the control socket): close a "
             "connection with no request under way for this long (default 60)");
  add_number("request_timeout_s", &config->request_timeout_s, 1, 3600,
             "front doors: close a connection whose request (RESP command, HTTP request head, memcached "
             "line, control line) is still incomplete this long after it began, however slowly its bytes "
             "come (the slowloris bound; default 10, at most --idle-timeout-s)");
  add_number("connections_max", &config->connections_max, 1, 65'535,
             "RESP, HTTP and memcached front ends: connections at once, each; when full, a new client is "
             "served and the longest-idle connection closed for it (default 256; the metrics port keeps 16, "
             "the control socket 16)");
  add_number("peer_connections_max", &config->peer_connections_max, 1, 65'535,
             "RESP, HTTP and memcached front ends: connections at once from one source address; a new one "
             "closes that address's longest-idle or slowest (default 64, at most --connections-max; the "
             "metrics port keeps at most 8 from one address)");
  add_string(
      "lock_dir", &config->lock_dir,
      "directory of the host-wide lock files (one flurryd per UDP address and per local node id), "
      "owned by flurryd's user and writable by nobody else (default: /run/flurry for root, else systemd's "
      "$RUNTIME_DIRECTORY, else $XDG_RUNTIME_DIR/flurry, else <state dir's parent>/.flurry-locks; created "
      "mode 0700)");
  add_number("lead_ms", &config->lead_ms, 20, 600'000,
             "how far ahead of the clock the durable ceiling is set");
  add_string("epoch", &config->epoch, "ID epoch: Unix ms or a UTC date like 2024-01-01");
  add_string("layout", &config->layout,
             "ID layout: snowflake, js-safe, or TIME/NODE/SEQUENCE widths like 41/10/12");
  add_string("core_from", &config->core_from, "where worker core bits come from: sequence or node");
  add_number("time_unit_ms", &config->time_unit_ms, 0, 1000,
             "ID time unit: 1, 10 or 1000 ms; 0 keeps the layout's own (js-safe 10, others 1)");
  add_number("burst_size", &config->burst_size, 1, 256, "datagrams received and answered per burst");
  add_number("retry_hint_us", &config->retry_hint_us, 100, 1'000'000,
             "RETRY answers tell clients to wait this long");
  add_bool(
      "pin_workers", &config->pin_workers,
      "pin socket-backend worker i to the (i % n)-th of the n CPUs flurryd may run on (taskset, cpuset)");
  add_bool("udp_gso", &config->udp_gso,
           "socket backend: send a burst's answers to one client as one UDP GSO message (Linux 4.18+)");
  add_number(
      "poll_spin_us", &config->poll_spin_us, 0, 1000,
      "socket backend: after a burst, poll without sleeping up to this long before blocking, adapting to "
      "the gaps between bursts (0: off; trades CPU for the wakeup on a client's path while requests keep "
      "coming, none when idle; off anyway when the workers have no CPUs of their own or the cgroup has a CPU "
      "quota)");
  add_bool(
      "udp_gro", &config->udp_gro,
      "socket backend: receive a client's run of equal-size datagrams as one buffer (UDP_GRO, Linux 5.0+)");
  add_bool("accept_state_change", &config->accept_state_change,
           "start although the state file belongs to another node id or layout (keeps its watermark)");
  add_bool("accept_corrupt_state", &config->accept_corrupt_state,
           "start although both watermark slots are corrupt (DANGEROUS: may reissue IDs)");
  add_string("auth", &config->auth,
             "authenticated requests: off (default; signed requests answered UNAUTHORIZED), optional (signed "
             "and unsigned served), required (unsigned GET_IDS refused; the RESP, HTTP and memcached doors "
             "serve only callers logged in with a key's door password)");
  add_string(
      "key_file", &config->key_file,
      "TOML key file for --auth optional|required (mode 0600; reload: SIGHUP or flurryctl keys reload; a "
      "key's door_password_hash: flurryctl keys hash-password)");
  add_number("auth_window_ms", &config->auth_window_ms, 100, 600'000,
             "signed requests: largest distance of the client's timestamp from the server's clock");
  add_number("replay_slots", &config->replay_slots, 1024, 1U << 26,
             "signed requests: entries of the replay table shared by the workers (16 bytes each)");
  add_number(
      "source_share", &config->source_share, 0, 100,
      "unsigned GET_IDS / GET_SEQ: the most one client address (an IPv6 /64) may take of a core slice's "
      "capacity, in percent, refilled as it goes; over it: fewer IDs, then RETRY (counted in flurryctl stats "
      "source_limit). Signed requests have their key's rate instead. 0: off (docs/fairness.md)");
  add_number("source_burst_ms", &config->source_burst_ms, 1, 60'000,
             "unsigned requests: what one address may take at once, as this many ms of its --source-share");
  add_number("source_table", &config->source_table, 64, 1U << 24,
             "unsigned requests: client addresses tracked per core slice for --source-share (16 bytes each; "
             "rounded up to a power of two; when full, a new address takes the place of the one that owes "
             "least, counted as source_limit evicted)");
  add_string(
      "seq_auto_create", &config->seq_auto_create,
      "front doors (RESP INCR/INCRBY/FLURRY.SEQ, HTTP /v1/seq): an unknown sequence name is created on "
      "first use, durably as by flurryctl seq create NAME --start 1, in this mode: segment (increasing "
      "per core slice) or monotonic (one counter: 1, 2, 3 as Redis INCR); off (default): an error that "
      "says how to create it");
  add_number("seq_auto_create_max", &config->seq_auto_create_max, 1, 64,
             "--seq-auto-create creates names only while the node holds fewer sequences than this (every "
             "sequence counts, however created), so a client typing random keys cannot fill the store");
  add_number("door_sequence_wait_ms", &config->door_sequence_wait_ms, 1, 5000,
             "front doors: how long a door waits for a named sequence's next block (a new name's first, or "
             "the next when its blocks ran dry) before it answers TRYAGAIN (redis-benchmark and memcached "
             "clients stop at it); the door's other connections wait meanwhile (default 200)");
  add_number("clock_offset_ms", &config->clock_offset_ms, -86'400'000LL, 86'400'000LL,
             "testing only: shift this node's wall clock");
  return settings;
}

// The settings as the Markdown table of docs/configuration.md (`flurryd --settings-markdown`;
// the test configuration_doc checks that the file holds it).
std::string settings_markdown(const std::vector<Setting>& settings) {
  auto cell = [](std::string text) {
    std::string out;
    for (const char c : text) {
      if (c == '|') {
        out += "\\|";
      } else if (c == '\n') {
        out += ' ';
      } else {
        out += c;
      }
    }
    return out;
  };
  std::string table =
      "| flag | TOML key | default | range | what it does |\n"
      "|---|---|---|---|---|\n";
  for (const Setting& setting : settings) {
    std::string value = setting.option->get_default_str();
    if (value == "[]") value.clear();  // an empty list (--etcd)
    table += fmt::format("| `{}` | `{}` | {} | {} | {} |\n", flag_of(setting.key), setting.key,
                         value.empty() ? "(empty)" : "`" + cell(value) + "`", setting.range,
                         cell(setting.option->get_description()));
  }
  return table;
}

// Reads --config FILE: every key a setting's, values the flags' types; the command line wins.
Status apply_config_file(const std::string& file, const std::vector<Setting>& settings) {
  toml::table table;
  try {
    table = toml::parse_file(file);
  } catch (const toml::parse_error& error) {
    return Error{fmt::format("config file {}: {} at line {}", file, std::string(error.description()),
                             error.source().begin.line)};
  }
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    auto found =
        std::find_if(settings.begin(), settings.end(), [&](const Setting& s) { return s.key == name; });
    if (found == settings.end()) {
      return Error{fmt::format(
          "config file {}: unknown key '{}' (keys are the flag names with _, see --help)", file, name)};
    }
    if (found->option->count() > 0) continue;  // the command line wins
    if (Status read = found->from_toml(node); !read.ok()) {
      return Error{fmt::format("config file {}: {} {}", file, name, read.message())};
    }
  }
  return {};
}

}  // namespace

Result<Parsed> parse_config(int argc, const char* const* argv, Config* config) {
  cli::App app{
      "flurryd — hands out unique 64-bit Snowflake IDs over UDP.\n"
      "DPDK EAL arguments, if any, come before `--`; flurryd's after it."};
  // A flag given twice: the later one wins (scripts append to a base command line).
  app.option_defaults()->always_capture_default()->multi_option_policy(cli::MultiOptionPolicy::TakeLast);
  const std::vector<Setting> settings = add_settings(app, config);
  app.add_option("--config", config->config_file, "TOML file with the same keys as the flags (node_id = 3)");
  app.add_flag(
      "--init", config->init,
      "local mode: this is a new node; create its state in --state-dir (refused if one is there). "
      "Without it, a state dir without a watermark is refused, so a lost or mistyped state dir never "
      "silently becomes a new node. Command line only");
  app.set_version_flag("--version", "flurryd " FLURRY_VERSION);
  bool settings_table = false;
  app.add_flag("--settings-markdown", settings_table,
               "print every setting as the Markdown table of docs/configuration.md, and exit");
  try {
    app.parse(argc, argv);
  } catch (const cli::ParseError& error) {
    if (error.help_requested()) return Parsed{app.help()};
    if (error.version_requested()) return Parsed{"flurryd " FLURRY_VERSION "\n"};
    return Error{std::string(error.what()) + " (see flurryd --help)"};
  }
  if (settings_table) return Parsed{settings_markdown(settings)};
  if (!config->config_file.empty()) {
    if (Status applied = apply_config_file(config->config_file, settings); !applied.ok()) return applied;
  }
  if (Status derived = derive(config); !derived.ok()) return derived;
  return Parsed{};
}

DoorLimits door_limits(const Config& config, std::uint32_t connections_max, std::uint32_t per_peer_max) {
  DoorLimits limits;
  limits.connections_max = connections_max;
  limits.per_peer_max = per_peer_max;
  limits.idle_timeout_ms = std::uint64_t{config.idle_timeout_s} * 1000;
  limits.request_timeout_ms = std::uint64_t{config.request_timeout_s} * 1000;
  return limits;
}

std::string describe(const Config& config) {
  // The same settings table the flags and the file are read with, bound to a copy.
  Config copy = config;
  cli::App app;
  std::string out;
  for (const Setting& setting : add_settings(app, &copy)) {
    out += setting.key + " = " + setting.to_toml();
    if (setting.key == "layout") out += "  # " + proto::describe(config.id_layout);
    out += "\n";
  }
  return out;
}

}  // namespace flurry::control
