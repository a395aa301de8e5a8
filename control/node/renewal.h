// control/node/renewal.h — the node's durability part: the watermark store, the scheduler over
// it (local mode: the store alone; cluster mode: the store first, then etcd's watermark
// transaction) and the renew thread, flurry-renew, which makes each next watermark durable
// before the scheduler publishes it as the workers' ceiling (docs/architecture.md, the
// invariant). The store is written by flurry-renew only (and by flurryd's main thread before
// it starts); what the reports show of it is copied after each step into a StoreView, so the
// control loop never touches the store or waits for it.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "control/cluster/cluster_mode.h"
#include "control/config.h"
#include "control/renew_loop.h"
#include "control/scheduler.h"
#include "core/shared.h"
#include "persist/watermark_store.h"

namespace flurry::control {

// Local mode: the watermark file is the only place W must be durable.
class LocalDurability final : public Durability {
 public:
  explicit LocalDurability(persist::WatermarkStore& store) : store_(store) {}
  Status make_durable(std::uint64_t watermark_t) override { return store_.store(watermark_t); }
  DegradedCause failure_cause() const override { return DegradedCause::disk; }

 private:
  persist::WatermarkStore& store_;
};

// The store's numbers as the reports show them, copied by flurry-renew after each step.
struct StoreView {
  std::string method;  // io_uring may fall back to pwrite+fdatasync at run time
  std::uint64_t writes = 0;
  std::uint64_t failures = 0;
  std::uint64_t durable_watermark_t = 0;
};

class Renewal {
 public:
  // `cluster`: null in local mode. Everything given outlives the Renewal.
  Renewal(const Config& config, const Clock& clock, core::Shared& shared, persist::WatermarkStore& store,
          cluster::ClusterMode* cluster);

  // flurryd's main thread, before any worker serves: the assignment (node id, floor) and the
  // first durable watermark above floor_t (cluster mode: above etcd's watermark of the node id
  // held too; starts the lease keeper). Cluster mode: etcd going away right after the claim
  // is not fatal; nothing is served until the scheduler's retries (or a re-claim) succeed.
  Status start(std::uint64_t floor_t);
  // Starts flurry-renew: every Timings::tick_ms, the scheduler's tick, cluster mode's step
  // (fence if the lease is gone, re-claim, reassign) and the StoreView copy.
  void start_loop();
  // Joins flurry-renew; a write in flight finishes first, so the watermark file stays valid.
  void stop();

  WatermarkScheduler& scheduler() { return scheduler_; }
  const WatermarkScheduler& scheduler() const { return scheduler_; }
  // A copy, under the view's mutex (never held across I/O). Any thread.
  StoreView store_view() const;

 private:
  void step();
  void copy_store_view();

  const Config& config_;
  persist::WatermarkStore& store_;
  cluster::ClusterMode* cluster_;
  LocalDurability local_durability_;
  WatermarkScheduler scheduler_;
  RenewLoop loop_;  // flurry-renew
  mutable std::mutex view_mutex_;
  StoreView view_;
};

}  // namespace flurry::control
