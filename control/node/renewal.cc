// control/node/renewal.cc — see renewal.h.
#include "control/node/renewal.h"

#include <algorithm>
#include <utility>

#include "base/log.h"

namespace flurry::control {

Renewal::Renewal(const Config& config, const Clock& clock, core::Shared& shared,
                 persist::WatermarkStore& store, cluster::ClusterMode* cluster)
    : config_(config),
      store_(store),
      cluster_(cluster),
      local_durability_(store),
      scheduler_(config.id_layout, config.timings,
                 cluster_ != nullptr ? cluster_->durability(&local_durability_) : local_durability_, shared,
                 clock),
      loop_(config.timings.tick_ms, [this] { step(); }) {}

Status Renewal::start(std::uint64_t floor_t) {
  const std::uint32_t node_id = cluster_ != nullptr ? cluster_->node_id() : config_.node_id;
  if (cluster_ != nullptr) {
    floor_t = std::max(floor_t, cluster_->floor_t());
    cluster_->start_keepalive();
  }
  if (Status started = scheduler_.start(node_id, floor_t); !started.ok()) {
    // Cluster mode: etcd going away right after the claim is not fatal; nothing is served
    // until the scheduler's retries (or a re-claim, if fenced) succeed.
    if (cluster_ == nullptr ||
        (scheduler_.state() != ServeState::fenced && scheduler_.degraded_cause() != DegradedCause::etcd)) {
      return std::move(started).context("cannot make the first watermark durable in " + config_.state_dir);
    }
    log_warn("cluster mode: first watermark not acknowledged by etcd yet ({}); serving nothing until it is",
             started.message());
  }
  return {};
}

void Renewal::start_loop() {
  copy_store_view();
  loop_.start();
}

void Renewal::stop() { loop_.stop(); }

void Renewal::step() {
  scheduler_.tick();
  if (cluster_ != nullptr) cluster_->tick(scheduler_, store_.durable_watermark_t());
  copy_store_view();
}

void Renewal::copy_store_view() {
  StoreView view;
  view.method = std::string(store_.method());  // io_uring may fall back at run time
  view.writes = store_.stores();
  view.failures = store_.store_failures();
  view.durable_watermark_t = store_.durable_watermark_t();
  std::lock_guard lock(view_mutex_);
  view_ = std::move(view);
}

StoreView Renewal::store_view() const {
  std::lock_guard lock(view_mutex_);
  return view_;
}

}  // namespace flurry::control
