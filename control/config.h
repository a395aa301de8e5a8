// control/config.h — flurryd's configuration: one struct, parsed and validated once at start.
//
// Sources, later wins: built-in defaults < TOML file (--config FILE) < command-line flags.
// Every number has a default, a minimum and a maximum (shown by --help). Errors name the
// flag or key and say what to fix; parse_config never exits the process itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/door.h"
#include "base/endpoint.h"
#include "base/status.h"
#include "control/timings.h"
#include "core/backend_kind.h"
#include "core/front_end_kind.h"
#include "core/keys.h"
#include "core/sequence_table.h"
#include "proto/layout.h"

namespace flurry::control {

struct Config {
  std::string backend = "socket";      // socket | dpdk
  Endpoint listen{"127.0.0.1", 7420};  // UDP ADDR:PORT (dpdk: the IP the port owns)
  std::uint32_t workers = 1;
  std::uint32_t node_id = 0;      // local mode
  std::vector<std::string> etcd;  // cluster mode endpoints
  std::string cluster;
  std::uint32_t lease_ttl_s = 10;
  std::uint32_t clock_skew_ms_max = 1000;
  // etcd over TLS (https:// endpoints) and as an etcd user (docs/cluster.md). Paths, made
  // absolute; the password only ever in its file (never a flag's value).
  std::string etcd_cacert;
  std::string etcd_cert;
  std::string etcd_key;
  std::string etcd_user;
  std::string etcd_password_file;
  // Absolute: a default that depends on the working directory would make a second start from
  // another directory a new node that reissues IDs. A relative --state-dir is resolved to an
  // absolute path once, at start, and printed.
  std::string state_dir = "/var/lib/flurry";
  std::string control_socket;  // default: <state_dir>/flurryd.sock
  // TCP ADDR:PORT, each parsed where it is read (flag or file); port 0 (an empty value): off.
  Endpoint metrics_listen;    // GET /metrics
  Endpoint resp_listen;       // the Redis-protocol front end
  Endpoint http_listen;       // the HTTP front end
  Endpoint memcache_listen;   // the memcached-protocol front end
  std::string http_tls_cert;  // PEM certificate (chain) of the HTTP front end: HTTPS; empty: HTTP
  std::string http_tls_key;   // its PEM private key (a private file: mode 0600, control/private_file.h)
  // The front doors (RESP, HTTP, memcached, the metrics port, the control socket; base/door.h).
  std::uint32_t idle_timeout_s = 60;        // a connection without a request under way is closed
  std::uint32_t request_timeout_s = 10;     // a request still incomplete this long after it began
  std::uint32_t connections_max = 256;      // RESP, HTTP, memcached, each (full: longest-idle shed)
  std::uint32_t peer_connections_max = 64;  // RESP, HTTP, memcached, from one source address
  // Host-wide lock files (control/listen_lock.h lock_dir); empty: automatic.
  std::string lock_dir;
  std::uint32_t lead_ms = 3000;
  std::string epoch = "2024-01-01T00:00:00Z";
  std::string layout = "snowflake";
  std::string core_from = "sequence";  // sequence | node
  std::uint32_t time_unit_ms = 0;      // 0: the layout's own (js-safe 10, else 1); 1, 10, 1000
  std::uint32_t burst_size = 32;
  std::uint32_t retry_hint_us = 1000;
  bool pin_workers = true;
  bool udp_gso = true;
  bool udp_gro = true;
  // The most a socket worker polls after a burst (dataplane/poll_governor.h); 0: off. Off
  // anyway where the workers have no CPUs of their own or the cgroup has a CPU quota
  // (control/node/cpu_policy.h poll_off_reason).
  std::uint32_t poll_spin_us = 50;
  bool accept_state_change = false;
  bool accept_corrupt_state = false;
  // Command line only (never from a file): this is a new node. Local mode refuses a state dir
  // without a watermark unless --init is given, and --init refuses one that has a watermark.
  bool init = false;
  std::int64_t clock_offset_ms = 0;  // test only: shifts this node's wall clock
  std::string config_file;
  std::string log_format = "text";  // text | json
  // Authentication (PROTOCOL.md "Authentication", docs/authentication.md).
  std::string auth = "off";               // off | optional | required
  std::string key_file;                   // TOML keys (control/keys_file.h); needed unless auth is off
  std::uint32_t auth_window_ms = 5000;    // a signed request's timestamp may be this far from now
  std::uint32_t replay_slots = 1U << 22;  // entries of the replay table (16 bytes each: 64 MiB)
  // The per-source bound of unsigned requests (core/source_limit.h, docs/fairness.md).
  std::uint32_t source_share = 25;      // % of a core slice's capacity one address may take; 0: off
  std::uint32_t source_burst_ms = 100;  // a full bucket: this long at that rate
  std::uint32_t source_table = 8192;    // addresses tracked per core slice (16 bytes each)
  // Named sequences created on first use by a front door (docs/sequences.md).
  std::string seq_auto_create = "off";  // off | segment | monotonic
  std::uint32_t seq_auto_create_max = 16;
  // How long a front door waits for a named sequence's next block before TRYAGAIN (frontend.h).
  std::uint32_t door_sequence_wait_ms = 200;

  // Derived by parse_config.
  core::BackendKind backend_kind = core::BackendKind::socket;  // from backend
  core::AuthMode auth_mode = core::AuthMode::off;              // from auth
  std::optional<core::SeqMode> seq_auto_create_mode;           // from seq_auto_create; nullopt: off
  proto::Layout id_layout;                                     // validated, core_bits set from core_slices()
  Timings timings;  // from lead_ms, the layout's time unit and (cluster mode) lease_ttl_s, cross-checked

  // The front doors to open (from --resp-listen, --http-listen, --memcache-listen), in the
  // order of their core slices: front_ends[i] issues as core slice workers + i. The one list
  // that core_slices() counts and flurryd opens, so the two cannot disagree.
  struct FrontEnd {
    core::FrontEndKind kind = core::FrontEndKind::resp;
    std::string flag;  // --resp-listen
    Endpoint endpoint;
  };
  std::vector<FrontEnd> front_ends;

  // Core slices of the sequence (or node) field: one per worker, then one per front end, each
  // on its own thread, so no two threads ever share a generator.
  std::uint32_t core_slices() const { return workers + static_cast<std::uint32_t>(front_ends.size()); }
};

// What parse_config decided when it did not fail: run with the config, or print `help` and
// exit 0 (--help was given).
struct Parsed {
  std::string help;
  bool help_asked() const { return !help.empty(); }
};

// Parses flurryd's own arguments (those after `--` when EAL arguments come first) into
// *config. Fails naming the flag or key and what to fix.
Result<Parsed> parse_config(int argc, const char* const* argv, Config* config);

// A front door's limits (base/door.h): the flags' timeouts, and that door's sizes.
DoorLimits door_limits(const Config& config, std::uint32_t connections_max, std::uint32_t per_peer_max);

// The effective configuration, one `key = value` line per setting (TOML), printed at start.
std::string describe(const Config& config);

}  // namespace flurry::control
