// control/cluster/cluster_durability.h — cluster mode's Durability: the local watermark
// store first, then the node's watermark key in etcd (Membership::renew). make_durable
// succeeds only after both acknowledged, so the scheduler raises the ceiling only then.
//   ok     — W is in the local store and in watermark/<node>, and the node id is still mine;
//   failed — either write got no acknowledgement: keep the held ceiling (degraded, cause
//            failure_cause(): the local store's, or etcd);
//   lost   — (StatusCode::lost) the renew compare failed: the node id belongs to someone
//            else now; fence.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "control/cluster/membership.h"
#include "control/scheduler.h"

namespace flurry::control::cluster {

class ClusterDurability final : public Durability {
 public:
  // `local` may be null (tests, or a node without a state directory).
  ClusterDurability(Durability* local, Membership& membership) : local_(local), membership_(membership) {}

  Status make_durable(std::uint64_t watermark_t) override;
  DegradedCause failure_cause() const override;
  DegradedCause pending_cause() const override;

 private:
  Durability* local_;
  Membership& membership_;
  // Read by the control loop while make_durable runs on the renew thread.
  std::atomic<bool> last_failure_local_{false};
  std::atomic<bool> writing_local_{false};
};

}  // namespace flurry::control::cluster
