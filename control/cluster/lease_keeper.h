// control/cluster/lease_keeper.h — keeps the etcd lease alive on its own timer and thread,
// with its own KvStore (its own HTTP connection), so a slow watermark transaction on the
// renew thread (flurry-renew) never delays a keep-alive and the other way round.
// Every keep-alive is bounded by the store's timeout; the thread wakes every
// Membership::keepalive_interval_ms() (TTL/3), or every 500 ms while etcd does not answer,
// and stops within one bounded call of stop().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "control/cluster/kv.h"
#include "control/cluster/membership.h"

namespace flurry::control::cluster {

class LeaseKeeper {
 public:
  // `on_change` (optional) is called from the keeper thread with a one-line message when the
  // keep-alive starts failing, recovers, or finds the lease expired (for logging).
  // `after_keepalive` (optional) runs on the keeper thread with its store after every
  // keep-alive that did not fail (also when there was no lease to keep alive), before the
  // wait for the next, which it shortens by the time it took (ClusterMode's look at the
  // peers' clocks).
  LeaseKeeper(Membership& membership, std::unique_ptr<KvStore> store,
              std::function<void(const std::string&)> on_change = {},
              std::function<void(KvStore&)> after_keepalive = {});
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  void start();
  void stop();

 private:
  void run();

  Membership& membership_;
  std::unique_ptr<KvStore> store_;
  std::function<void(const std::string&)> on_change_;
  std::function<void(KvStore&)> after_keepalive_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace flurry::control::cluster
