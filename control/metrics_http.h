// control/metrics_http.h — the Prometheus scrape endpoint (--metrics-listen): GET /metrics over
// HTTP/1.1, served by libmicrohttpd on the control loop (flurryd's main thread).
//
// Contract:
//   * Runs on the caller's thread only. The libmicrohttpd daemon is started without an internal
//     thread (epoll, external polling): poll_fds() adds its one epoll descriptor to the control
//     loop's poll set, poll_timeout_ms() lowers the loop's poll timeout when libmicrohttpd has
//     work pending, and serve() (MHD_run) handles whatever is ready without blocking. So the
//     render callback runs on the control loop; the scheduler's stats it shows are written on
//     flurry-renew and read through WatermarkScheduler::snapshot(), under the scheduler's mutex.
//   * GET or HEAD /metrics (any query string): 200, Content-Type `text/plain; version=0.0.4`,
//     the callback's text. GET or HEAD /livez and /readyz (when a probe is set): the probe's
//     status (200 or 503) and text, Kubernetes' conventions (`ok`, or with `?verbose` one
//     `[+]check ok` / `[-]check failed: why` line each). Any other path: 404. Any other method on /metrics:
//     405 with `Allow: GET, HEAD`. A callback that throws: 500. Request bodies are never buffered.
//   * Bounded by a door (base/door.h): at most limits.connections_max connections at once (a
//     new one is always accepted: when full, the connection that has waited longest, idle or
//     with its request under way, is closed for it), at most limits.per_peer_max from one
//     source address (its own longest-waiting one is closed for its new one), a connection without a request
//     for limits.idle_timeout_ms and one whose request head is still incomplete limits.request_timeout_ms
//     after its request line are closed. So /livez and /readyz are answered while slow clients (a slowloris)
//     hold connections. libmicrohttpd's per-connection memory pool (32 KiB) bounds the request head.
//     libmicrohttpd's own error messages are logged at most once per log_interval_s, with a count of those
//     left out.
//   * IPv4 only, like --listen.
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

struct MHD_Daemon;

#include "base/door.h"
#include "base/status.h"

namespace flurry::control {

class MetricsHttp {
 public:
  static constexpr unsigned connections_max = 16;  // the default door's
  static constexpr unsigned log_interval_s = 10;

  // Returns the Prometheus text exposition; called on the thread that calls serve().
  using Render = std::function<std::string()>;
  // /livez or /readyz: the HTTP status (200 or 503) and the body; called like Render.
  struct Probed {
    unsigned status = 200;
    std::string body;
  };
  enum class ProbeKind : std::uint8_t { livez, readyz };
  using Probe = std::function<Probed(ProbeKind kind, bool verbose)>;

  MetricsHttp() = default;
  ~MetricsHttp();
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;

  // Listens on TCP address:port (an IPv4 address). Errors (not an IPv4 address, bind or
  // listen failure with the errno text, libmicrohttpd refusing to start) name the address
  // and --metrics-listen. At most one open() per object.
  Status open(const std::string& address, std::uint16_t port, Render render, Probe probe = {},
              const DoorLimits& limits = DoorLimits{connections_max, connections_max / 2, 60'000, 10'000});
  bool is_open() const { return daemon_ != nullptr; }
  // Appends the daemon's epoll descriptor to `fds` (nothing when not open).
  void poll_fds(std::vector<pollfd>* fds) const;
  // `limit_ms`, or less when libmicrohttpd must run sooner (0: at once).
  int poll_timeout_ms(int limit_ms) const;
  // Accepts, reads and answers whatever is ready; never blocks. No-op when not open.
  void serve();

  std::uint64_t scrapes() const { return scrapes_; }    // 200 answers
  std::uint64_t rejected() const { return rejected_; }  // 404, 405 and 500 answers
  const Door& door() const { return door_; }

 private:
  struct Callbacks;  // libmicrohttpd's C callbacks, defined in metrics_http.cc

  MHD_Daemon* daemon_ = nullptr;
  int epoll_fd_ = -1;
  Render render_;
  Probe probe_;
  std::uint64_t scrapes_ = 0;
  std::uint64_t rejected_ = 0;
  std::uint64_t log_suppressed_ = 0;
  std::int64_t log_last_ns_ = 0;
  Door door_{DoorLimits{}};
  std::vector<std::uint64_t> expired_;
};

}  // namespace flurry::control
