// tests/client/manual_clock.cc — see manual_clock.h for the contract.
#include "tests/client/manual_clock.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace flurry::client::testing {
namespace {

// Far from the steady clock's zero, so a deadline computed before it cannot underflow.
constexpr Clock::time_point start{std::chrono::hours{1}};

}  // namespace

Clock::time_point ManualClock::now() {
  std::lock_guard lock(mutex_);
  return start + elapsed_;
}

bool ManualClock::wait_until(time_point deadline, std::span<pollfd> fds) {
  const int step_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (step_fd < 0) std::abort();  // the test cannot go on without it
  {
    std::lock_guard lock(mutex_);
    waiter_fds_.push_back(step_fd);
  }
  waiter_cv_.notify_all();
  std::vector<pollfd> all(fds.begin(), fds.end());
  all.push_back({step_fd, POLLIN, 0});
  bool ready = false;
  while (now() < deadline) {
    if (::ppoll(all.data(), all.size(), nullptr, nullptr) <= 0) continue;  // EINTR
    ready = std::any_of(all.begin(), all.end() - 1, [](const pollfd& fd) { return fd.revents != 0; });
    if (ready) break;
    std::uint64_t steps = 0;
    [[maybe_unused]] const ssize_t n = ::read(step_fd, &steps, sizeof steps);
  }
  {
    std::lock_guard lock(mutex_);
    waiter_fds_.erase(std::find(waiter_fds_.begin(), waiter_fds_.end(), step_fd));
  }
  ::close(step_fd);
  std::copy(all.begin(), all.end() - 1, fds.begin());
  return ready;
}

bool ManualClock::sleep_until(time_point deadline, int wake_fd) {
  pollfd fd{wake_fd, POLLIN, 0};
  if (::poll(&fd, 1, 0) > 0 && (fd.revents & POLLIN) != 0) return false;
  std::function<void()> callback;
  {
    std::lock_guard lock(mutex_);
    const duration step = std::max(deadline - (start + elapsed_), duration{0});
    elapsed_ += step;
    sleeps_.push_back(step);
    callback = on_sleep_;
  }
  if (callback) callback();
  return true;
}

void ManualClock::advance(duration step) {
  std::lock_guard lock(mutex_);
  elapsed_ += step;
  const std::uint64_t one = 1;
  for (int fd : waiter_fds_) {
    [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);
  }
}

Clock::duration ManualClock::elapsed() {
  std::lock_guard lock(mutex_);
  return elapsed_;
}

std::vector<Clock::duration> ManualClock::sleeps() {
  std::lock_guard lock(mutex_);
  return sleeps_;
}

void ManualClock::on_sleep(std::function<void()> callback) {
  std::lock_guard lock(mutex_);
  on_sleep_ = std::move(callback);
}

bool ManualClock::await_waiter(std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  return waiter_cv_.wait_for(lock, limit, [this] { return !waiter_fds_.empty(); });
}

}  // namespace flurry::client::testing
