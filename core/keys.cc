// core/keys.cc — see keys.h. Runs on the control core (publish, reclaim) and on the workers
// (ReplayFilter::check: no allocation, no lock, no system call).
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
    oldest_seen = std::min(oldest_seen, seen_[i].value.load(std::memory_order_acquire));
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

bool ReplayFilter::twin_after_claim(std::size_t claimed, std::uint64_t mac) const {
  const std::size_t home = static_cast<std::size_t>(mac) & mask_;
  for (std::size_t i = 0; i < probe_max; ++i) {
    const std::size_t index = (home + i) & mask_;
    if (index != claimed && entries_[index].mac.load(std::memory_order_seq_cst) == mac) return true;
  }
  return false;
}

ReplayFilter::Verdict ReplayFilter::check(std::uint64_t mac, std::uint64_t now_ms, std::uint64_t expiry_ms) {
  const std::size_t home = static_cast<std::size_t>(mac) & mask_;
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::size_t free_index = mask_ + 1;
    std::uint64_t free_expiry = 0;
    for (std::size_t i = 0; i < probe_max; ++i) {
      const std::size_t index = (home + i) & mask_;
      // A matching MAC is a replay whatever its expiry: an expired one's timestamp is out of
      // the window anyway, so that request was refused as stale before reaching here.
      if (entries_[index].mac.load(std::memory_order_seq_cst) == mac) return Verdict::replay;
      const std::uint64_t expiry = entries_[index].expiry_ms.load(std::memory_order_seq_cst);
      if (free_index > mask_ && expiry <= now_ms) {
        free_index = index;
        free_expiry = expiry;
      }
    }
    if (free_index > mask_) return Verdict::full;
    // Claim by the expiry word (from the exact value seen: a concurrent claimant fails), then
    // write the MAC; a twin claimed elsewhere meanwhile is found by the scan after the write.
    if (!entries_[free_index].expiry_ms.compare_exchange_strong(free_expiry, expiry_ms,
                                                                std::memory_order_seq_cst)) {
      continue;
    }
    entries_[free_index].mac.store(mac, std::memory_order_seq_cst);
    return twin_after_claim(free_index, mac) ? Verdict::replay : Verdict::fresh;
  }
  return Verdict::full;
}

}  // namespace flurry::core
