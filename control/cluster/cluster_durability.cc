// control/cluster/cluster_durability.cc — see cluster_durability.h.
#include "control/cluster/cluster_durability.h"

namespace flurry::control::cluster {

Status ClusterDurability::make_durable(std::uint64_t watermark_t) {
  if (local_ != nullptr) {
    writing_local_ = true;
    Status local = local_->make_durable(watermark_t);
    writing_local_ = false;
    if (!local.ok()) {
      last_failure_local_ = true;
      return local;
    }
  }
  last_failure_local_ = false;
  return membership_.renew(watermark_t);
}

DegradedCause ClusterDurability::failure_cause() const {
  if (last_failure_local_ && local_ != nullptr) return local_->failure_cause();
  return DegradedCause::etcd;
}

DegradedCause ClusterDurability::pending_cause() const {
  if (writing_local_ && local_ != nullptr) return local_->pending_cause();
  return DegradedCause::etcd;
}

}  // namespace flurry::control::cluster
