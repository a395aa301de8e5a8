// core/replay_filter.cc — ReplayFilter::check (core/keys.h), on the workers' hot path: no
// allocation, no lock, no system call (the lint checks this file); the table is allocated
// by the constructor in keys.cc, at start.
#include "core/keys.h"

namespace flurry::core {

bool ReplayFilter::twin_after_claim(std::size_t claimed, std::uint64_t mac) const {
  const std::size_t home = static_cast<std::size_t>(mac) & mask_;
  for (std::size_t i = 0; i < probe_max; ++i) {
    const std::size_t index = (home + i) & mask_;
    if (index != claimed && entries_[index].mac.load(std::memory_order_seq_cst) == mac) return true;
  }
  return false;
}

bool ReplayFilter::seen(std::uint64_t mac) const {
  const std::size_t home = static_cast<std::size_t>(mac) & mask_;
  for (std::size_t i = 0; i < probe_max; ++i) {
    if (entries_[(home + i) & mask_].mac.load(std::memory_order_seq_cst) == mac) return true;
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
