// control/cluster/cluster_durability.cc — see cluster_durability.h.
#include "control/cluster/cluster_durability.h"

namespace flurry::control::cluster {

DurableResult ClusterDurability::make_durable(std::uint64_t watermark_t, std::string* error) {
  if (local_ != nullptr) {
    writing_local_ = true;
    const DurableResult local = local_->make_durable(watermark_t, error);
    writing_local_ = false;
    if (local != DurableResult::ok) {
      last_failure_local_ = true;
      return local;
    }
  }
  last_failure_local_ = false;
  switch (membership_.renew(watermark_t, error)) {
    case RenewResult::ok: return DurableResult::ok;
    case RenewResult::failed: return DurableResult::failed;
    case RenewResult::lost: return DurableResult::lost;
  }
  return DurableResult::failed;
}

std::string_view ClusterDurability::failure_state() const {
  if (last_failure_local_ && local_ != nullptr) return local_->failure_state();
  return "degraded_etcd";
}

std::string_view ClusterDurability::pending_state() const {
  if (writing_local_ && local_ != nullptr) return local_->pending_state();
  return "degraded_etcd";
}

}  // namespace flurry::control::cluster
