// client/id_ring.h — internal: the prefetch buffer's storage. A ring of IDs that one producer
// at a time fills and any number of threads take from without a lock.
//
// Contract:
//   * Indices: every ID pushed gets the next index (0, 1, 2...). A consumer takes an index
//     with try_claim(), which succeeds only for a published, unclaimed index (one
//     compare-and-swap), and reads the ID stored at it with read(). IDs are unique because each
//     index is claimed once and each ID is pushed once. No claim is ever left waiting: an
//     empty ring refuses it, so nothing is lost or burned while a server is unreachable.
//   * Producer side (push, publish) is called by one thread at a time (the caller holds the
//     client's io_mutex); consumers need nothing.
//   * The producer never writes more than capacity() indices ahead of the claims, so a slot
//     is overwritten only after its index was claimed. A consumer that was descheduled
//     between its claim and its read long enough for the producer to lap the ring gets false
//     from read(): that ID is skipped (never handed out) and the consumer claims again.
//     Skipping is allowed, handing out twice is not.
//   * Each slot is a sequence lock: a tag (index + 1; 0 in a slot never written) and the ID.
//     A reader accepts the ID only if the slot held its tag before and after reading it.
//   * Memory: 16 bytes per slot, capacity rounded up to a power of two, from calloc: the
//     kernel maps the pages in as the producer first writes them, not at construction.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace flurry::client {

class IdRing {
 public:
  // Room for at least `capacity` IDs.
  explicit IdRing(std::size_t capacity)
      : mask_(std::bit_ceil(capacity < 1 ? std::size_t{1} : capacity) - 1),
        slots_(static_cast<Slot*>(std::calloc(mask_ + 1, sizeof(Slot)))) {
    if (slots_ == nullptr) throw std::bad_alloc();
  }
  IdRing(const IdRing&) = delete;
  IdRing& operator=(const IdRing&) = delete;

  std::size_t capacity() const { return mask_ + 1; }

  // ---- consumers ----
  // Takes the next published, unclaimed index; false when there is none.
  bool try_claim(std::uint64_t* index) {
    std::uint64_t claimed = claimed_.load(std::memory_order_relaxed);
    while (claimed < published_.load(std::memory_order_acquire)) {
      if (claimed_.compare_exchange_weak(claimed, claimed + 1, std::memory_order_relaxed)) {
        *index = claimed;
        return true;
      }
    }
    return false;
  }
  // The ID at a claimed `index`; false if its slot has been overwritten (the ID is skipped).
  bool read(std::uint64_t index, std::uint64_t* id) const {
    Slot& slot = slots_[index & mask_];
    if (tag(slot).load(std::memory_order_acquire) != index + 1) return false;
    const std::uint64_t value =
        std::atomic_ref(slot.id).load(std::memory_order_acquire);  // keeps the next load after it
    if (tag(slot).load(std::memory_order_relaxed) != index + 1) return false;
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
    tag(slot).store(writing, std::memory_order_relaxed);
    std::atomic_ref(slot.id).store(id, std::memory_order_release);  // orders the store above before it
    tag(slot).store(pushed_ + 1, std::memory_order_release);
    ++pushed_;
    return true;
  }
  // Makes every pushed ID visible to consumers.
  void publish() { published_.store(pushed_, std::memory_order_release); }

 private:
  static constexpr std::uint64_t writing = ~std::uint64_t{0};  // never index + 1
  // Plain words (calloc'd, so untouched pages stay unmapped), accessed only atomically.
  struct Slot {
    alignas(std::atomic_ref<std::uint64_t>::required_alignment) std::uint64_t tag;
    std::uint64_t id;
  };
  static std::atomic_ref<std::uint64_t> tag(Slot& slot) { return std::atomic_ref(slot.tag); }
  struct Free {
    void operator()(Slot* slots) const { std::free(slots); }
  };

  const std::size_t mask_;
  std::unique_ptr<Slot[], Free> slots_;
  alignas(64) std::atomic<std::uint64_t> claimed_{0};
  alignas(64) std::atomic<std::uint64_t> published_{0};
  std::uint64_t pushed_ = 0;  // producer only
};

}  // namespace flurry::client
