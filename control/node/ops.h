// control/node/ops.h — the node's ops part and the loop it owns, the control loop (flurryd's
// main thread): the control socket and its command table (control/commands.h), GET /metrics
// with /livez and /readyz (served here, not on a thread of their own), systemd's notify
// protocol, the signals (SIGINT/SIGTERM stop, SIGHUP reloads the keys), DPDK telemetry's
// commands, and the chores that must not wait for I/O: freeing retired key tables, and cluster
// mode's fence once the lease's deadline passed even while flurry-renew hangs in an etcd call.
// It reads the other parts through snapshots (the scheduler's, the StoreView, the lease
// status, relaxed counter loads) and never touches a store.
#pragma once

#include <poll.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/status.h"
#include "control/cluster/cluster_mode.h"
#include "control/config.h"
#include "control/control_server.h"
#include "control/metrics_http.h"
#include "control/node/issuing.h"
#include "control/node/renewal.h"
#include "control/node/sequences.h"
#include "control/report.h"
#include "control/service_notify.h"
#include "core/shared.h"

namespace flurry::control {

// Reads one signal from a signalfd (non-blocking); false when none is pending.
bool signalled(int signal_fd, int* signal_number = nullptr);

class Ops {
 public:
  struct Parts {
    Renewal& renewal;
    Sequences& sequences;
    Issuing& issuing;
    cluster::ClusterMode* cluster;  // null in local mode
  };
  // `signal_fd`: a signalfd for SIGINT, SIGTERM and SIGHUP (flurryd), or -1 (stop_soon() only).
  Ops(const Config& config, const Clock& clock, core::Shared& shared, ReportSources& sources, Parts parts,
      int signal_fd);
  ~Ops();
  Ops(const Ops&) = delete;
  Ops& operator=(const Ops&) = delete;

  // dpdk backend, after EAL started: /flurry/status, /flurry/stats, /flurry/watermark and
  // /flurry/lease in DPDK's telemetry. Does nothing for the socket backend.
  Status register_telemetry();
  // The control socket, then --metrics-listen; the reports' sources (the doors among them).
  Status open();
  // The control loop, until SIGINT/SIGTERM or stop_soon().
  void run();
  // Makes run() return at its next turn. Any thread.
  void stop_soon();

 private:
  void refresh();
  Status answer(const std::string& name, const nlohmann::json& request, nlohmann::json* reply);
  std::string metrics_reply();
  MetricsHttp::Probed probe(MetricsHttp::ProbeKind kind, bool verbose);
  void notify_service();

  const Config& config_;
  const Clock& clock_;
  core::Shared& shared_;
  ReportSources& sources_;
  Renewal& renewal_;
  Sequences& sequences_;
  Issuing& issuing_;
  cluster::ClusterMode* cluster_;
  int signal_fd_;
  int wake_fd_ = -1;  // eventfd: stop_soon()
  ControlServer control_;
  MetricsHttp metrics_http_;  // served by the control loop, never by a thread of its own
  ServiceNotify notify_;      // systemd (Type=notify): READY once serving, STOPPING, WATCHDOG
};

}  // namespace flurry::control
