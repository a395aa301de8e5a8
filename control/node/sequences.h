// control/node/sequences.h — the node's named-sequences part: the SequenceManager over the
// local sequence store (or etcd's blocks in cluster mode) and its thread, flurry-seq, which
// every SequenceOptions::refill_ms reserves blocks durably and refills every core slice's
// sub-block queue (control/node/sequence_manager.h). Its writes block only it. The control
// loop's `seq` commands take the manager's mutex (at most 200 ms wait for list/show).
//
// --seq-auto-create MODE: a front door (RESP, HTTP) that meets an unknown name asks
// auto_create() on its own thread, which creates it with SequenceManager::create, the call
// `flurryctl seq create NAME --start 1 --mode MODE` ends in (durable in the sequence store, or
// in etcd, before it answers), while the node holds fewer than --seq-auto-create-max sequences
// (every sequence counts, however made: what a restart finds in the store bounds it too).
// Auto-creations are serialized by their own mutex, counted, and logged.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

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

  // --seq-auto-create: the mode names are created in (nullopt: off) and the cap.
  void set_auto_create(std::optional<core::SeqMode> mode, std::uint32_t max) {
    auto_mode_ = mode;
    auto_max_ = max;
  }
  // Creates `name` on first use, or says why not (a sentence for the client, naming the fix).
  // A front door's thread; bounded: one create (a disk write, or in cluster mode an etcd
  // transaction) at a time, at most once per 100 ms after a refusal at the cap.
  Status auto_create(const std::string& name);
  std::uint64_t auto_created() const { return auto_created_.load(std::memory_order_relaxed); }
  std::uint64_t auto_refused() const { return auto_refused_.load(std::memory_order_relaxed); }

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
  std::optional<core::SeqMode> auto_mode_;
  std::uint32_t auto_max_ = 0;
  std::mutex auto_mutex_;                 // one auto-creation at a time (the front doors' threads)
  std::uint64_t auto_full_until_ms_ = 0;  // at the cap: refused without a look until then
  std::atomic<std::uint64_t> auto_created_{0};
  std::atomic<std::uint64_t> auto_refused_{0};  // refused: at the cap, or the create failed
};

}  // namespace flurry::control
