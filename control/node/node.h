// control/node/node.h — one flurry node as a library: everything flurryd runs between parsing
// its flags and exiting, so that a test can start a whole node in-process
// (tests/control/node_test.cc) and flurryd's main (control/flurryd.cc) only parses, locks,
// opens, runs and stops. Only this folder, of control/, sees dataplane/ and persist/
// (docs/architecture.md, the arrows; tests/lint).
//
// The parts, each owning one loop:
//   Renewal   (renewal.h)   the watermark store, the scheduler, cluster mode's tick: flurry-renew
//   Sequences (sequences.h) the named sequences' manager: flurry-seq
//   Ops       (ops.h)       control socket and command table, /metrics and probes, systemd,
//                           signals, DPDK telemetry's commands: the control loop
//   Issuing   (issuing.h)   the packet backend (its workers) and the list of front ends
// and what they share: the Config (read-only), the clock, core::Shared (below), the reports'
// sources (the control loop's), ClusterMode (cluster mode: claims, lease, etcd).
//
// Start order (Node::open, then Node::start; it keeps the invariant: no ceiling is published
// before the watermark above it is durable, and every worker starts above the durable floor):
//   1. open_state: the state dir's refusals, its identity and floor (state_dir.h); then the
//      state dir's lock when the dir was new; cluster mode: claim a node id from etcd (nothing
//      is served before); the sequence store beside the watermark.
//   2. Renewal::start: the assignment and the first durable watermark (main thread).
//   3. Issuing::make: auth (replay table, first key table), the backend made, not serving
//      (EAL started for dpdk); Ops::register_telemetry (dpdk); Issuing::open_front_ends
//      (ports bound).
//   4. flurry-renew, then the sequences loaded (local mode) and flurry-seq.
//   5. Ops::open: the control socket, --metrics-listen.
//   6. Issuing::start: the workers, then the front ends. Then Node::run: the control loop.
// Stop order (Node::stop): flurry-seq (a reservation in flight finishes), flurry-renew (a
// write in flight finishes: the watermark file stays valid), the workers, the front ends,
// cluster mode (lease revoked: the node id is free at once; the watermark key stays).
//
// Threads. docs/architecture.md section 2 adds who creates each and what it may block on.
//   control loop — Ops::run on the main thread (EAL's main lcore with --backend dpdk).
//     Does:    signals, control-socket commands, /metrics /livez /readyz, systemd READY and
//              WATCHDOG, KeyTableSlot::reclaim, cluster mode's fence once the lease deadline
//              passed; before the loop, steps 1-6 above.
//     Writes:  Shared::keys (publish on reload, reclaim); the ceiling through
//              WatermarkScheduler::drain (and fence); named sequences on `seq create/delete`
//              (the sequence store or etcd, under the SequenceManager mutex).
//     Read by: workers and front ends (keys, ceiling, once per burst); flurry-seq (sequences).
//   flurry-renew — Renewal's RenewLoop, every Timings::tick_ms.
//     Does:    WatermarkScheduler::tick (Durability::make_durable, then publish), cluster
//              mode's tick (fence when the lease is lost, re-claim, reassign), the StoreView.
//     Writes:  Shared::ceiling, Shared::assignment (generation last); the watermark store;
//              scheduler state (its mutex); the StoreView (its mutex).
//     Read by: workers and front ends (ceiling and assignment, core::load_burst_ceiling); the
//              control loop (WatermarkScheduler::snapshot, the StoreView).
//   flurry-seq — Sequences' RenewLoop, every SequenceOptions::refill_ms.
//     Does:    SequenceManager::step: reserve blocks durably, refill each core slice's queue,
//              raise monotonic limits, publish serving deadlines; cluster mode: list, adopt.
//     Writes:  Shared::sequences (SequenceTable: queue tails, limits, deadlines); the
//              sequence store (or etcd's /seq keys); the manager's state (its mutex).
//     Read by: workers and front ends (their SequenceTable slots); the control loop (seq
//              list/show, metrics).
//   lease keeper — ClusterMode's LeaseKeeper (cluster mode only, unnamed).
//     Does:    Membership::keepalive every TTL/3 (500 ms while failing); peers' clocks once a TTL.
//     Writes:  Membership state (its mutex): the lease's monotonic deadline.
//     Read by: the control loop (fence on expiry, lease report), flurry-renew, flurry-seq
//              (the holder of monotonic sequences).
//   workers — Issuing's backend: socket threads flurry-w<i>, or DPDK worker lcores.
//     Does:    receive a burst, one clock read and ceiling load, core::Handler, send.
//     Writes:  their own Shared::stats slot (single-writer counters, last_t); the replay table
//              (CAS) with --auth; a monotonic sequence's counter (CAS below its limit).
//     Read by: flurry-renew (last_t: demand near the ceiling); the control loop (counters).
//   RESP, HTTP and memcached front ends — Issuing's front ends (a thread each: RESP's and
//     memcached's own, HTTP's is libmicrohttpd's). As a worker, on a core slice of their own
//     (slices: Config::core_slices).
//   EAL interrupt thread (dpdk) — DpdkBackend's clock alarm, every second.
//     Writes:  TscClockSync (seqlock). Read by: the DPDK workers.
//   DPDK telemetry thread (dpdk) — writes nothing of flurry's: it asks the control socket.
//
// core::Shared is owned here (Node::shared_), built before every part and destroyed after.
#pragma once

#include <cstdint>
#include <memory>

#include "base/clock.h"
#include "base/status.h"
#include "control/cluster/cluster_mode.h"
#include "control/config.h"
#include "control/listen_lock.h"
#include "control/node/issuing.h"
#include "control/node/ops.h"
#include "control/node/renewal.h"
#include "control/node/sequences.h"
#include "control/report.h"
#include "core/shared.h"
#include "persist/io.h"
#include "persist/sequence_store.h"
#include "persist/watermark_store.h"

namespace flurry::control {

struct NodeOptions {
  const Clock* clock = nullptr;  // required; flurryd: the system clock shifted by --clock-offset-ms
  // A signalfd for SIGINT, SIGTERM (stop) and SIGHUP (reload the keys), blocked in every
  // thread (flurryd); -1: none, the node stops on stop_soon() only.
  int signal_fd = -1;
  // flurryd's locks: the state dir's is taken on it right after a new state dir was made.
  // nullptr: no lock (a test's temporary directory).
  ListenLock* lock = nullptr;
  persist::Io* io = nullptr;  // the stores' disk; nullptr: the system's (a test passes a simulated one)
  // --backend dpdk: EAL's arguments (the program name and those before `--`).
  int eal_argc = 1;
  char** eal_argv = nullptr;
};

class Node {
 public:
  // What flurryd checks before it takes a lock or touches a file, beyond parse_config's
  // checks: the backend is in this build, and the key file (--key-file) loads. Fails with the
  // sentence to print (a configuration error: exit 2).
  static Status check(const Config& config);
  // Step 1 of the start order: nothing is served yet. Fails with one sentence with the fix;
  // *exit_code (when given) is then 2 for a configuration error found only now (cluster
  // mode's options), else 1. `config` and what `options` point to outlive the node.
  static Result<std::unique_ptr<Node>> open(const Config& config, const NodeOptions& options,
                                            int* exit_code = nullptr);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Steps 2 to 6: serving when it returns OK. After a failure, stop() (or the destructor)
  // undoes what was started.
  Status start();
  // The control loop, until SIGINT/SIGTERM or stop_soon().
  void run();
  // Makes run() return at its next turn. Any thread.
  void stop_soon();
  // The stop order above. Idempotent.
  void stop();

  // The highest watermark made durable (main thread, before start() or after stop()).
  std::uint64_t durable_watermark_t() const { return store_->durable_watermark_t(); }

 private:
  Node(const Config& config, const NodeOptions& options, std::unique_ptr<persist::WatermarkStore> store,
       std::uint64_t floor_t, std::unique_ptr<persist::SequenceStore> sequence_store,
       std::unique_ptr<cluster::ClusterMode> cluster);

  NodeOptions options_;
  std::unique_ptr<persist::WatermarkStore> store_;
  std::uint64_t floor_t_;  // workers start above it (cluster mode: and above etcd's)
  std::unique_ptr<persist::SequenceStore> sequence_store_;
  std::unique_ptr<cluster::ClusterMode> cluster_;  // null in local mode
  core::Shared shared_;
  ReportSources sources_;
  Renewal renewal_;
  Sequences sequences_;
  Issuing issuing_;
  Ops ops_;
  bool stopped_ = false;
};

}  // namespace flurry::control
