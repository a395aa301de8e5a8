// control/cluster/cluster_mode.h — what flurryd's main needs for cluster mode, in one place:
// the etcd clients, the lease protocol, its keep-alive thread, the Durability for the
// scheduler, start-up claiming with backoff, and the fence / re-claim cycle on each tick.
//
// Contract with flurryd (docs/cluster.md, docs/architecture.md):
//   * claim_at_start() returns only when a node id is held (or it was refused / stopped):
//     nothing is served before. While etcd is unreachable it retries with a backoff
//     (200 ms doubling to 1 s) and logs every failure, saying that nothing is served yet;
//     while the clock check waits on peers' stale owner values, every 250 ms.
//   * the scheduler is started with node_id() and floor max(local W, floor_t()) and uses
//     durability() (local store first, then the etcd watermark transaction).
//   * tick() after each scheduler tick: a lease found expired fences at once; a fenced
//     node claims again (with backoff) and, when it holds a node id, reassigns the workers
//     above max(local W, the new node's watermark). A serving node looks at its peers'
//     clocks once a lease TTL (Membership::observe_peer_clocks, on the keep-alive thread) and
//     warns while it is beyond --clock-skew-ms-max.
// Every etcd call is bounded (request timeout × endpoints). Threads: claim_at_start() and stop() on
// flurryd's main thread; tick() on the renew thread (flurry-renew); fence_if_lease_expired() and the
// reports on the control loop; sequence_blocks() on flurry-seq and the control loop; the keep-alive
// and the peer-clock check on the lease keeper's thread, with its own HTTP connections.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "control/cluster/cluster_durability.h"
#include "control/cluster/etcd_client.h"
#include "control/cluster/lease_keeper.h"
#include "control/cluster/membership.h"
#include "control/cluster/seq_blocks.h"
#include "control/scheduler.h"
#include "control/timings.h"

namespace flurry::control::cluster {

// How long to wait before the next claim attempt after a failed one: a backoff (200 ms
// doubling to 1 s, kept in *backoff_ms) while etcd is unreachable or races are lost, a short
// fixed wait (backoff unchanged) while the clock check waits on peers' stale owner values.
std::uint32_t claim_retry_ms(std::uint32_t* backoff_ms, bool waiting_on_peers);

struct ClusterModeOptions {
  std::vector<std::string> endpoints;  // --etcd
  // TLS and user (--etcd-cacert, --etcd-cert, --etcd-key, --etcd-user, --etcd-password-file):
  // its endpoints and timeouts are ignored (create() sets them).
  EtcdConfig access;
  std::string cluster;      // --cluster
  std::string instance_id;  // persist::load_or_create_instance_id(state_dir)
  proto::Layout layout;
  // The lease TTL and every etcd timeout, from derive_timings with --lease-ttl-s (which also
  // refused a lead above 2/3 of the TTL).
  Timings timings;
  std::uint64_t clock_skew_ms_max = 1000;
  // Makes (and keeps, e.g. in the state dir) a new instance id after a clone was detected.
  // When it fails, the new id lives in memory only.
  std::function<Result<std::string>()> remake_instance_id;
};

class ClusterMode {
 public:
  // Checks the options and builds the clients; does not contact etcd.
  static Result<std::unique_ptr<ClusterMode>> create(const ClusterModeOptions& options, const Clock& clock);
  ~ClusterMode();

  // See the contract above. `should_stop` is polled between attempts (signals).
  Status claim_at_start(const std::function<bool()>& should_stop);
  std::uint32_t node_id() const { return membership_->node_id(); }
  std::uint64_t floor_t() const { return membership_->floor_t(); }

  // The scheduler's Durability: `local` (may be null) first, then etcd.
  Durability& durability(Durability* local);
  // Starts the keep-alive thread (after the first claim).
  void start_keepalive();
  // After each scheduler tick, on the renew thread. `local_floor_t`: the local store's
  // durable watermark.
  void tick(WatermarkScheduler& scheduler, std::uint64_t local_floor_t);
  // On the control loop, every iteration: fences the workers once the lease's monotonic
  // deadline has passed, even while the renew thread is stuck in an etcd call. Never blocks.
  void fence_if_lease_expired(WatermarkScheduler& scheduler);
  // Graceful stop: keep-alive thread stopped, lease revoked (owner key freed at once; the
  // watermark key stays).
  void stop();

  // Until when (Unix ms, the workers' burst clock) what this node holds under its lease may
  // be served: the lease's monotonic deadline (Membership::lease_deadline_mono_ns) less
  // sequence_lease_margin_ms(), expressed on the wall clock now. 0 when no lease is held or
  // the deadline is too close. Monotonic sequences' owners stop issuing there, so a process
  // paused past its lease never issues below a new owner's numbers (SequenceManager).
  std::uint64_t serve_until_unix_ms() const;
  // Timings::sequence_lease_margin_ms, max(500 ms, TTL / 5): covers the drift between the
  // monotonic and the workers' wall clock (the DPDK TSC calibration is resynchronised every
  // second) and a wall-clock step between two sequence steps.
  std::uint64_t sequence_lease_margin_ms() const { return options_.timings.sequence_lease_margin_ms; }

  LeaseStatus status() const { return membership_->status(); }
  // For `flurryctl lease` and the status command.
  nlohmann::json lease_json() const;
  // Prometheus text families for the lease (appended to flurryd's metrics):
  // flurry_lease_state{state=...}, flurry_lease_ttl_left_seconds, flurry_lease_renew_seconds,
  // flurry_lease_renewals_total{result=...}, flurry_lease_keepalive_failures_total,
  // flurry_lease_node_ids_lost_total, flurry_lease_claims_total, flurry_etcd_endpoint{url=...},
  // flurry_lease_peers and flurry_lease_peer_clock_skew_seconds (the last look at the peers' clocks),
  // flurry_etcd_authentications_total{reason="first"|"token_refused"} (etcd users only).
  std::string metrics_text() const;
  const Membership& membership() const { return *membership_; }
  // Named sequences' blocks in etcd, over an etcd client of their own (for the sequence
  // thread; the SequenceManager serializes its calls). Tagged with this start's instance.
  SeqBlocks& sequence_blocks() { return *seq_blocks_; }

 private:
  ClusterMode() = default;

  ClusterModeOptions options_;
  const Clock* clock_ = nullptr;
  std::unique_ptr<EtcdClient> client_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<LeaseKeeper> keeper_;
  std::unique_ptr<ClusterDurability> durability_;
  std::unique_ptr<EtcdClient> seq_client_;
  std::unique_ptr<SeqBlocks> seq_blocks_;
  std::shared_ptr<EtcdSession> session_;  // the etcd token the three clients share
  // Authentications of the shared token: all, and those after etcd refused a token.
  std::pair<std::uint64_t, std::uint64_t> authentications() const;
  void remake_instance_id();
  Status make_sequence_blocks(const EtcdConfig& etcd);

  std::uint64_t next_claim_ns_ = 0;
  std::uint64_t claim_logged_ns_ = 0;  // the last failed re-claim logged (rate-limited)
  // The keep-alive thread's look at the peers' clocks, once a lease TTL while serving (only
  // that thread touches these two).
  std::uint64_t next_clock_look_ns_ = 0;
  bool clock_warned_ = false;  // the last look was beyond --clock-skew-ms-max
  void look_at_peer_clocks(KvStore& store);
  std::uint32_t backoff_ms_ = 0;
  std::atomic<bool> stopped_{false};
};

}  // namespace flurry::control::cluster
