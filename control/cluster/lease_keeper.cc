// control/cluster/lease_keeper.cc — see lease_keeper.h.
#include "control/cluster/lease_keeper.h"

#include <algorithm>
#include <chrono>

namespace flurry::control::cluster {

LeaseKeeper::LeaseKeeper(Membership& membership, std::unique_ptr<KvStore> store,
                         std::function<void(const std::string&)> on_change,
                         std::function<void(KvStore&)> after_keepalive)
    : membership_(membership),
      store_(std::move(store)),
      on_change_(std::move(on_change)),
      after_keepalive_(std::move(after_keepalive)) {}

LeaseKeeper::~LeaseKeeper() { stop(); }

void LeaseKeeper::start() {
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void LeaseKeeper::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LeaseKeeper::run() {
  constexpr std::int64_t retry_interval_ms = 500;
  StatusCode previous = StatusCode::ok;
  for (;;) {
    const Status status = membership_.keepalive(*store_);
    if (status.code() != previous && on_change_) {
      on_change_(status.ok() ? std::string("lease keep-alive answered again") : status.message());
    }
    previous = status.code();
    const auto before = std::chrono::steady_clock::now();
    if (status.ok() && after_keepalive_) after_keepalive_(*store_);
    // The next keep-alive is due an interval after this one, whatever after_keepalive took.
    const auto spent_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - before)
            .count();
    const std::int64_t wait_ms =
        status.ok() ? std::max<std::int64_t>(0, membership_.keepalive_interval_ms() - spent_ms)
                    : retry_interval_ms;
    std::unique_lock lock(mutex_);
    if (wake_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return stopping_; })) return;
  }
}

}  // namespace flurry::control::cluster
