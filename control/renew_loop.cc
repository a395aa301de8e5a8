// control/renew_loop.cc — see renew_loop.h.
#include "control/renew_loop.h"

#include <pthread.h>

#include <chrono>

namespace flurry::control {

void RenewLoop::start() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable()) return;
  stop_requested_ = false;
  thread_ = std::thread([this] { run(); });
}

void RenewLoop::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RenewLoop::run() {
  pthread_setname_np(pthread_self(), thread_name_);  // seen in top -H, /proc/<pid>/task
  std::unique_lock lock(mutex_);
  while (!stop_requested_) {
    lock.unlock();
    step_();
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(tick_ms_), [this] { return stop_requested_; });
  }
}

}  // namespace flurry::control
