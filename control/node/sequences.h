// control/node/sequences.h — the node's named-sequences part: the SequenceManager over the
// local sequence store (or etcd's blocks in cluster mode) and its thread, flurry-seq, which
// every SequenceOptions::refill_ms reserves blocks durably and refills every core slice's
// sub-block queue (control/node/sequence_manager.h). Its writes block only it. The control
// loop's `seq` commands take the manager's mutex (at most 200 ms wait for list/show).
#pragma once

#include <optional>

#include "base/clock.h"
#include "control/cluster/cluster_mode.h"
#include "control/node/sequence_manager.h"
#include "control/renew_loop.h"
#include "core/shared.h"
#include "persist/sequence_store.h"

namespace flurry::control {

class Sequences {
 public:
  // `cluster`: null in local mode. Everything given outlives the Sequences.
  Sequences(core::Shared& shared, persist::SequenceStore& store, cluster::ClusterMode* cluster,
            const Clock& clock)
      : cluster_(cluster),
        manager_(shared.sequences, store, SequenceOptions{},
                 cluster != nullptr ? &cluster->sequence_blocks() : nullptr, &clock),
        loop_(
            SequenceOptions{}.refill_ms, [this] { manager_.step(); }, "flurry-seq") {}

  // Local mode: the stored sequences into the table (cluster mode: flurry-seq lists them in
  // etcd, as the holder of this node's lease); then flurry-seq.
  void start() {
    if (cluster_ == nullptr) manager_.load();
    if (cluster_ != nullptr) manager_.set_holder([this] { return holder(); });
    loop_.start();
  }
  // Joins flurry-seq; a block reservation in flight finishes first.
  void stop() { loop_.stop(); }

  SequenceManager& manager() { return manager_; }

 private:
  // Cluster mode: this node's node id and lease while it holds them (monotonic sequences'
  // owner keys live under that lease); nullopt once the lease is known gone.
  std::optional<SequenceManager::Holder> holder() const {
    const cluster::LeaseStatus status = cluster_->status();
    if (!status.holds_node || cluster_->membership().lease_expired()) return std::nullopt;
    return SequenceManager::Holder{status.node_id, status.lease_id, cluster_->serve_until_unix_ms()};
  }

  cluster::ClusterMode* cluster_;
  SequenceManager manager_;  // local store, or etcd in cluster mode
  RenewLoop loop_;           // flurry-seq
};

}  // namespace flurry::control
