// core/keys.h — the authentication keys as the workers see them, and how the control loop (flurryd's
// main thread) swaps them without a lock on the hot path.
//
// Contract:
//   * A KeyTable is immutable once published; workers read it through KeyTableSlot::load()
//     once per burst and never keep the pointer across a burst boundary.
//   * KeyTableSlot::publish swaps the pointer (RCU-style) and keeps the old table until every
//     worker has passed a quiescent point (KeyTableSlot::quiesce, called between bursts)
//     since the swap; reclaim() then frees it. Only flurryd's main thread (at start, then the
//     control loop) calls publish/reclaim.
//   * Each key has a stable `slot` (0..key_slots_max-1), the index of its per-worker token
//     bucket and per-key counters; a key id keeps its slot across reloads. A removed key's
//     slot goes to another key id only once no worker can hold a table naming the old key
//     (control/keys_file.h KeySlots), and with a new `generation`: a worker that meets a slot
//     under a generation it has not seen there starts that slot's bucket and counters afresh
//     (KeyCounters::generation), so nothing of the old key applies to the new one.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "proto/auth.h"
#include "proto/wire.h"

namespace flurry::core {

inline constexpr std::size_t key_slots_max = 128;          // keys at once (slots are recycled)
inline constexpr std::size_t key_sequences_max = 64;       // sequence names per key
inline constexpr std::uint32_t key_rate_max = 10'000'000;  // requests per second per key and worker

enum class AuthMode : std::uint8_t { off, optional, required };

struct Key {
  std::uint32_t id = 0;
  std::uint32_t slot = 0;
  std::uint64_t generation = 0;  // this key's tenure of `slot` (never 0 once assigned)
  std::string name;
  proto::MacKey secret{};
  std::uint32_t opcodes = 0;                       // bit (1 << opcode) set: the opcode is allowed
  std::uint32_t batch_max = proto::count_max;      // largest GET_IDS count
  std::uint32_t seq_batch_max = proto::count_max;  // largest GET_SEQ count (batch_max is GET_IDS only)
  std::uint32_t rate_per_s = 0;                    // token bucket refill, per worker; 0: unlimited
  std::uint32_t answer_bytes_max = 0;              // answers up to this size whatever the request's size
  std::vector<std::string> sequences;              // GET_SEQ names allowed ("*" allows every name)
  // The front doors' credential (RESP AUTH, HTTP bearer token): a libsodium password hash
  // (crypto_pwhash_str) of the key's door password, never the MAC secret; empty: this key
  // cannot log in at a door. `door_tag` tells one hash from another (a changed password ends
  // the sessions that logged in with the old one) without comparing the strings.
  std::string door_password_hash;
  std::uint64_t door_tag = 0;

  bool allows_opcode(proto::Opcode opcode) const {
    const auto bit = static_cast<std::uint32_t>(opcode);
    return bit < 32 && (opcodes & (1U << bit)) != 0;
  }
  // For GET_SEQ (named sequences): no allocation, a linear scan of at most 64 names.
  bool allows_sequence(std::string_view sequence) const {
    return std::any_of(sequences.begin(), sequences.end(), [sequence](const std::string& allowed) {
      return allowed == "*" || allowed == sequence;
    });
  }
};

// Keys sorted by id; find() is a binary search, no allocation.
class KeyTable {
 public:
  explicit KeyTable(std::vector<Key> keys) : keys_(std::move(keys)) {
    std::sort(keys_.begin(), keys_.end(), [](const Key& a, const Key& b) { return a.id < b.id; });
  }
  const Key* find(std::uint32_t id) const {
    auto it = std::lower_bound(keys_.begin(), keys_.end(), id,
                               [](const Key& key, std::uint32_t value) { return key.id < value; });
    return it != keys_.end() && it->id == id ? &*it : nullptr;
  }
  // By name: a linear scan (at most key_slots_max keys), for a door's login only.
  const Key* find_name(std::string_view name) const {
    auto it = std::find_if(keys_.begin(), keys_.end(), [name](const Key& key) { return key.name == name; });
    return it != keys_.end() ? &*it : nullptr;
  }
  std::span<const Key> keys() const { return keys_; }

 private:
  std::vector<Key> keys_;
};

// A key's token bucket on one thread (rate_per_s, Handler's rule for signed UDP): thousandths
// of a request, refilled rate_per_s a second, holding 100 ms worth (at least one request);
// full when first used or when its slot holds another key (generation) than before. A front
// door keeps one per key slot, as a worker does.
struct KeyBucket {
  std::uint64_t millitokens = 0;
  std::uint64_t last_ms = 0;     // 0: never used (starts full)
  std::uint64_t generation = 0;  // the key (Key::generation) it is for

  // Takes one request's token at `now_ms`; false: the key is over its rate. Unlimited keys
  // (rate_per_s 0) always take one.
  bool take(const Key& key, std::uint64_t now_ms) {
    if (key.rate_per_s == 0) return true;
    constexpr std::uint64_t cost = 1000;
    const std::uint64_t capacity = std::max<std::uint64_t>(cost, std::uint64_t{key.rate_per_s} * 100);
    if (last_ms == 0 || generation != key.generation) {
      *this = KeyBucket{capacity, now_ms == 0 ? 1 : now_ms, key.generation};
    } else if (now_ms > last_ms) {
      millitokens = std::min(capacity, millitokens + (now_ms - last_ms) * key.rate_per_s);
      last_ms = now_ms;
    }
    if (millitokens < cost) return false;
    millitokens -= cost;
    return true;
  }
};

// The published table and its grace periods. Workers: quiesce(worker) between bursts, then
// load(). The control loop (flurryd's main thread): publish(), then reclaim() now and then (on its tick).
class KeyTableSlot {
 public:
  explicit KeyTableSlot(std::uint32_t workers);
  ~KeyTableSlot();
  KeyTableSlot(const KeyTableSlot&) = delete;
  KeyTableSlot& operator=(const KeyTableSlot&) = delete;

  // Worker side, hot path: no allocation, no lock.
  // Announces the epoch this worker is at, then checks it did not move meanwhile: a worker
  // coming from leave() (seen = max) must not let the control loop free a table it is about
  // to load. A repeat needs a new publish in between (control loop, human pace).
  // Already announced (no publish since): nothing to store. The store below is a seq_cst
  // store, a locked instruction on x86, and this runs before every burst; skipping it is safe
  // because a table retired after this epoch waits for a seen value above it, which only the
  // loop below stores, before this worker's next load().
  void quiesce(std::uint32_t worker) {
    std::uint64_t epoch = epoch_.load(std::memory_order_seq_cst);
    if (seen_[worker].value.load(std::memory_order_relaxed) == epoch) return;
    for (;;) {
      seen_[worker].value.store(epoch, std::memory_order_seq_cst);
      const std::uint64_t again = epoch_.load(std::memory_order_seq_cst);
      if (again == epoch) return;
      epoch = again;
    }
  }
  const KeyTable* load() const { return current_.load(std::memory_order_seq_cst); }
  // A worker that stops for good no longer holds any table.
  void leave(std::uint32_t worker) {
    seen_[worker].value.store(~std::uint64_t{0}, std::memory_order_release);
  }

  // Control side.
  void publish(std::unique_ptr<KeyTable> table);
  std::size_t reclaim();  // frees the tables no worker can hold; returns how many remain retired
  std::size_t retired() const { return retired_.size(); }

 private:
  struct alignas(64) Seen {
    std::atomic<std::uint64_t> value{0};
  };
  struct Retired {
    std::unique_ptr<KeyTable> table;
    std::uint64_t epoch = 0;  // freed once every worker has seen an epoch >= this
  };
  std::atomic<const KeyTable*> current_{nullptr};
  std::unique_ptr<KeyTable> owned_;
  std::atomic<std::uint64_t> epoch_{1};
  std::unique_ptr<Seen[]> seen_;
  std::uint32_t workers_;
  std::vector<Retired> retired_;
};

// Requests already served, across every worker: an open-addressed table of atomics keyed by
// the request's MAC; an entry lives until its request's timestamp has left the window.
// Guarantees, lock-free:
//   * a MAC inserted and not yet expired is found by every later check (-> replay);
//   * of two concurrent checks of the same MAC at most one returns fresh (a claimant that
//     finds a twin after claiming refuses; both may refuse: the client asks again);
//   * when the probe window (probe_max slots) holds no free or expired entry the answer is
//     full: the request is refused, never accepted unchecked.
// Its clock (now_ms) never steps back: the highest wall clock any worker passed in. An entry
// expires once that clock is past its timestamp + window, and the window check uses the same
// clock, so a request whose entry expired is stale from then on, whatever the wall clock does
// later (a step back and forth no longer serves a request twice). What was signed before this
// process could have seen it (before it began serving its node id: Assignment::since_unix_ms)
// the handler refuses as stale, so a restart or a takeover, which start with an empty table,
// never serve a request again.
class ReplayFilter {
 public:
  enum class Verdict : std::uint8_t { fresh, replay, full };
  static constexpr std::size_t probe_max = 32;
  static constexpr std::size_t slots_min = 1024, slots_max = std::size_t{1} << 26;

  explicit ReplayFilter(std::size_t slots);  // rounded up to a power of two in [min, max]
  // The filter's clock: max(wall_ms, the highest value passed in before). One atomic max.
  std::uint64_t now_ms(std::uint64_t wall_ms) {
    std::uint64_t high = high_ms_.load(std::memory_order_relaxed);
    while (wall_ms > high && !high_ms_.compare_exchange_weak(high, wall_ms, std::memory_order_relaxed)) {
    }
    return wall_ms > high ? wall_ms : high;
  }
  // Whether `mac` is in the table now (a replay): nothing changes. Checked before the key's
  // permission and rate, so that a replayed copy never spends its key's tokens.
  bool seen(std::uint64_t mac) const;
  // Inserts `mac`, checked last: fresh (inserted), replay (found, or a concurrent twin), full.
  // `expiry_ms`: when the entry may be forgotten (the timestamp + the window), `now_ms`: now_ms().
  Verdict check(std::uint64_t mac, std::uint64_t now_ms, std::uint64_t expiry_ms);
  std::size_t slots() const { return mask_ + 1; }

 private:
  struct Entry {
    std::atomic<std::uint64_t> expiry_ms{0};  // claimed first (CAS), so a live slot is never stolen
    std::atomic<std::uint64_t> mac{0};
  };
  bool twin_after_claim(std::size_t claimed, std::uint64_t mac) const;
  std::unique_ptr<Entry[]> entries_;
  std::size_t mask_;
  alignas(64) std::atomic<std::uint64_t> high_ms_{0};
};

}  // namespace flurry::core
