// core/keys.cc — see keys.h. Runs on the control loop, flurryd's main thread (publish, reclaim), and
// on the workers (ReplayFilter::check: no allocation, no lock, no system call).
#include "core/keys.h"

namespace flurry::core {

KeyTableSlot::KeyTableSlot(std::uint32_t workers) : seen_(new Seen[workers]), workers_(workers) {
  for (std::uint32_t i = 0; i < workers; ++i) leave(i);  // not started: holds nothing
}

KeyTableSlot::~KeyTableSlot() = default;

void KeyTableSlot::publish(std::unique_ptr<KeyTable> table) {
  current_.store(table.get(), std::memory_order_seq_cst);
  // A worker that reads an epoch >= `epoch` at its quiescent point loads the new pointer after.
  const std::uint64_t epoch = epoch_.fetch_add(1, std::memory_order_seq_cst) + 1;
  if (owned_) retired_.push_back(Retired{std::move(owned_), epoch});
  owned_ = std::move(table);
  reclaim();
}

std::size_t KeyTableSlot::reclaim() {
  std::uint64_t oldest_seen = ~std::uint64_t{0};
  for (std::uint32_t i = 0; i < workers_; ++i) {
    oldest_seen = std::min(oldest_seen, seen_[i].value.load(std::memory_order_seq_cst));
  }
  std::erase_if(retired_, [oldest_seen](const Retired& retired) { return oldest_seen >= retired.epoch; });
  return retired_.size();
}

namespace {

std::size_t round_slots(std::size_t slots) {
  std::size_t size = ReplayFilter::slots_min;
  while (size < slots && size < ReplayFilter::slots_max) size <<= 1;
  return size;
}

}  // namespace

ReplayFilter::ReplayFilter(std::size_t slots)
    : entries_(new Entry[round_slots(slots)]), mask_(round_slots(slots) - 1) {}

}  // namespace flurry::core
