// control/node/sequences.cc — see sequences.h (--seq-auto-create).
#include "control/node/sequences.h"

#include <fmt/format.h>

#include <chrono>

#include "base/log.h"

namespace flurry::control {
namespace {

std::uint64_t steady_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

Status Sequences::auto_create(const std::string& name) {
  if (!auto_mode_) return Error{"--seq-auto-create is off"};
  const std::lock_guard guard(auto_mutex_);
  // Another door (or flurryctl) may have made it while this one waited.
  if (manager_.show(name).ok()) return {};
  const auto refuse = [&](Status status) {
    auto_refused_.fetch_add(1, std::memory_order_relaxed);
    return status;
  };
  const std::string create_it = "create it with `flurryctl seq create " + name + "`";
  if (steady_ms() < auto_full_until_ms_) {
    return refuse(Error{fmt::format("--seq-auto-create creates no more sequences: this node holds {} or more "
                                    "(--seq-auto-create-max); {}",
                                    auto_max_, create_it),
                        StatusCode::refused});
  }
  Result<nlohmann::json> listed = manager_.list();
  if (!listed.ok()) return refuse(listed.status());
  if (listed->size() >= auto_max_) {
    auto_full_until_ms_ = steady_ms() + 100;
    log_warn("sequence '{}' not created on first use: the node holds {} sequences, --seq-auto-create-max {}",
             name, listed->size(), auto_max_);
    return refuse(Error{fmt::format("--seq-auto-create creates no more sequences: this node holds {} "
                                    "(--seq-auto-create-max {}); {}",
                                    listed->size(), auto_max_, create_it),
                        StatusCode::refused});
  }
  // As `flurryctl seq create NAME --start 1 --mode MODE`: Redis's INCR of a new key answers 1.
  if (Status created = manager_.create(name, 1, *auto_mode_); !created.ok()) {
    log_warn("sequence '{}' not created on first use: {}", name, created.message());
    return refuse(created);
  }
  auto_created_.fetch_add(1, std::memory_order_relaxed);
  log_info(
      "sequence '{}' created on first use by a front door ({}, from 1; --seq-auto-create), {} of at most {}",
      name, core::to_string(*auto_mode_), listed->size() + 1, auto_max_);
  return {};
}

}  // namespace flurry::control
