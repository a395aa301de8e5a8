// client/id_ring.h — internal: the prefetch buffer's storage. A ring of IDs that one producer
// at a time fills and any number of threads take from with one atomic add each, no lock.
//
// Contract:
//   * Indices: every ID pushed gets the next index (0, 1, 2...). A consumer claims an index
//     with claim() (each index is claimed by exactly one caller) and reads the ID stored at it
//     with read(). IDs are unique because each index is claimed once and each ID is pushed once.
//   * Producer side (push, publish, room) is called by one thread at a time (the caller holds
//     the client's io_mutex); consumers need nothing.
//   * A claimed index that is not yet published is the caller's to wait for: the ID pushed at
//     that index later is its. A consumer slow enough that the producer has wrapped around and
//     overwritten its slot gets false from read(): that ID is skipped (never handed out), and
//     the consumer claims again. Skipping is allowed, handing out twice is not.
//   * The producer never writes more than capacity() indices ahead of the claims, so a slot
//     is overwritten only after its index was claimed.
//   * Each slot is a sequence lock: the index it holds, then the ID. A reader accepts the ID
//     only if the slot held its index before and after reading it.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace flurry::client {

class IdRing {
 public:
  // Room for at least `capacity` IDs (rounded up to a power of two; 16 bytes each).
  explicit IdRing(std::size_t capacity)
      : mask_(std::bit_ceil(capacity < 1 ? std::size_t{1} : capacity) - 1),
        slots_(std::make_unique<Slot[]>(mask_ + 1)) {}
  IdRing(const IdRing&) = delete;
  IdRing& operator=(const IdRing&) = delete;

  std::size_t capacity() const { return mask_ + 1; }

  // ---- consumers ----
  std::uint64_t claim() { return claimed_.fetch_add(1, std::memory_order_relaxed); }
  // True once the ID at `index` has been published.
  bool published(std::uint64_t index) const { return index < published_.load(std::memory_order_acquire); }
  // The ID at a published `index`; false if its slot has been overwritten (the ID is skipped).
  bool read(std::uint64_t index, std::uint64_t* id) const {
    const Slot& slot = slots_[index & mask_];
    if (slot.index.load(std::memory_order_acquire) != index) return false;
    const std::uint64_t value = slot.id.load(std::memory_order_acquire);  // later loads stay after
    if (slot.index.load(std::memory_order_relaxed) != index) return false;
    *id = value;
    return true;
  }
  // IDs published and not yet claimed.
  std::size_t buffered() const {
    const std::uint64_t published = published_.load(std::memory_order_acquire);
    const std::uint64_t claimed = claimed_.load(std::memory_order_relaxed);
    return claimed >= published ? 0 : static_cast<std::size_t>(published - claimed);
  }

  // ---- the producer (one at a time) ----
  // Stores `id` at the next index, unless that would overwrite an unclaimed one (then false:
  // the ID is dropped, never handed out). Invisible to consumers until publish().
  bool push(std::uint64_t id) {
    if (pushed_ >= claimed_.load(std::memory_order_relaxed) + capacity()) return false;
    Slot& slot = slots_[pushed_ & mask_];
    slot.index.store(writing, std::memory_order_relaxed);
    slot.id.store(id, std::memory_order_release);  // orders the store above before it
    slot.index.store(pushed_, std::memory_order_release);
    ++pushed_;
    return true;
  }
  // Makes every pushed ID visible to consumers.
  void publish() { published_.store(pushed_, std::memory_order_release); }
  // The index the next push() gets (producer only).
  std::uint64_t next_index() const { return pushed_; }

 private:
  static constexpr std::uint64_t writing = ~std::uint64_t{0};  // never an index
  struct Slot {
    std::atomic<std::uint64_t> index{writing};
    std::atomic<std::uint64_t> id{0};
  };

  const std::size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<std::uint64_t> claimed_{0};
  alignas(64) std::atomic<std::uint64_t> published_{0};
  std::uint64_t pushed_ = 0;  // producer only
};

}  // namespace flurry::client
