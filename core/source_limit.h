// core/source_limit.h — the per-source bound for unauthenticated requests: a token bucket per
// client address, in IDs, so that one source cannot take more than a share of a core slice's
// capacity (docs/fairness.md).
//
// Why: without it one unsigned client asking for large GET_IDS takes the generator up to its
// ceiling, and every other client of that slice is answered RETRY until time catches up.
// A slice (one thread: a socket worker, a DPDK lcore, a front door) owns one SourceLimit;
// nothing in it is shared, so there is no lock and no atomic.
//
// Contract:
//   * measured in numbers issued (GET_IDS IDs, GET_SEQ numbers), not requests: a GET_IDS of
//     1000 IDs costs 1000; PING and INFO cost nothing; a signed request is never charged here
//     (its key's own rate applies);
//   * a bucket holds `burst_ids` and refills `ids_per_s`; take() grants what it holds (part of
//     the request, or all of it or nothing: Grant); refund() gives back what was
//     granted but not issued (the ceiling stopped it), so a source pays for what it got;
//   * a fixed table (`entries`, set at construction; no allocation after): 4-way sets of one
//     cache line, the set and the tag from keyed hashes of the address with a per-process
//     random seed, so an attacker cannot aim addresses at one set; a new source in a full set
//     takes the way whose bucket is fullest and starts with that bucket's level (never more):
//     cycling addresses through a set buys nothing, and `evicted` counts how often a source
//     that was still paying lost its place (the table is too small for the sources at once);
//   * time: the burst's wall clock in ms, made monotonic here (a step back stands still, a
//     step forward refills at most a full bucket); no system call.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/counter.h"
#include "proto/layout.h"

namespace flurry::core {

// Where a request came from, as the bound keys it. IPv4: the address. IPv6: its /64, the
// prefix one subscriber is routed (a host picks addresses inside it for free); an
// IPv4-mapped IPv6 address is its IPv4 address. Not the port: one host has 64K of them, so a
// client could multiply its share by opening sockets. Clients behind one NAT share a bucket.
// none(): not limited (a signed request, a caller with no address).
struct Source {
  std::uint64_t high = 0;  // IPv6: the /64 prefix; IPv4: 0
  std::uint64_t low = 0;   // IPv4: 0xffff'AAAA'AAAA (as in ::ffff:a.b.c.d); IPv6: 0
  bool limited = false;

  static constexpr Source none() { return {}; }
  // `address` in host byte order (a.b.c.d is a << 24 | b << 16 | c << 8 | d).
  static constexpr Source ipv4(std::uint32_t address) { return {0, 0xffff'0000'0000ULL | address, true}; }
  // `bytes`: the 16 bytes of an in6_addr, in network order.
  static Source ipv6(const std::uint8_t* bytes) {
    std::uint64_t high = 0, low = 0;
    for (int i = 0; i < 8; ++i) high = high << 8 | bytes[i];
    for (int i = 8; i < 16; ++i) low = low << 8 | bytes[i];
    if (high == 0 && (low >> 32) == 0xffff) return ipv4(static_cast<std::uint32_t>(low));
    return {high, 0, true};
  }
  friend bool operator==(const Source&, const Source&) = default;
};

struct SourceLimitConfig {
  std::uint64_t ids_per_s = 0;   // refill per source; 0: off
  std::uint64_t burst_ids = 0;   // what a full bucket holds (>= 1)
  std::uint32_t entries = 8192;  // sources tracked per slice: rounded up to a power of two >= 4
  // Keys of the two hashes (set, tag): random per process (control/node/issuing.cc).
  std::array<std::uint64_t, 10> seed{};
  bool enabled() const { return ids_per_s != 0; }
};

// --source-share PERCENT of one slice's capacity (the layout's IDs per time unit per core
// slice), a bucket of --source-burst-ms of that rate. Off (ids_per_s 0) when share is 0.
SourceLimitConfig source_limit_for(const proto::Layout& layout, std::uint32_t share_percent,
                                   std::uint32_t burst_ms, std::uint32_t entries);

// Per slice, in its WorkerStats (written by its thread only).
struct SourceLimitStats {
  Counter limited;  // requests answered RETRY: the source's bucket was empty
  Counter trimmed;  // requests answered with fewer numbers than asked because of the bucket
  Counter evicted;  // a tracked source that still owed tokens lost its place to another
};

// What take() granted: `ids` (0: refused), and where to refund.
struct SourceCharge {
  std::uint32_t ids = 0;
  std::uint32_t wait_us = 0;  // refused: when the bucket will hold what was asked (capped)
  bool admitted = false;      // ids != 0, or the limit is off
  void* entry = nullptr;      // the bucket charged; null: nothing to refund
};

class SourceLimit {
 public:
  static constexpr std::size_t ways = 4;
  static constexpr std::uint32_t entries_min = 64, entries_max = 1U << 24;

  // Allocates the table (config.entries, clamped to [entries_min, entries_max]).
  SourceLimit(const SourceLimitConfig& config, SourceLimitStats& stats);

  // How much of a request take() may grant.
  enum class Grant : std::uint8_t {
    part,   // what the bucket holds, up to `want` (a datagram: its answer may carry fewer)
    whole,  // all of `want` or nothing (a fast path that falls back to handle() when refused)
    // All of `want` or nothing, and a `want` above the bucket's size is granted when the bucket
    // is full and leaves it owing the rest: a request too large for the bucket is served, and
    // paid for by waiting (the front doors: their answer is all or an error).
    whole_or_owe,
  };

  // Up to `want` (>= 1) numbers for `source` at wall clock `now_ms`, as `grant` says; ids 0:
  // refused, with wait_us the time until the bucket holds what was asked.
  [[gnu::always_inline]] SourceCharge take(const Source& source, std::uint32_t want, std::uint64_t now_ms,
                                           Grant grant_as) {
    advance(now_ms);
    Entry& entry = find(source);
    const std::uint64_t from = std::max(entry.tat, now_);  // the bucket's debt, as a time
    const std::uint64_t top = now_ + burst_;
    const std::uint64_t room = top > from ? top - from : 0;
    std::uint64_t grant = std::min<std::uint64_t>(want, room);
    if (grant < want && grant_as != Grant::part) {
      grant = grant_as == Grant::whole_or_owe && room == burst_ ? want : 0;
    }
    if (grant == 0) {
      const std::uint64_t needed = grant_as == Grant::part ? 1 : std::min<std::uint64_t>(want, burst_);
      return {0, wait_us(needed > room ? needed - room : 1), false, nullptr};
    }
    entry.tat = from + grant;
    return {static_cast<std::uint32_t>(grant), 0, true, &entry};
  }
  // Gives back `unused` of a charge's grant (the ceiling issued fewer): no call may come between.
  void refund(const SourceCharge& charge, std::uint32_t unused) {
    if (charge.entry == nullptr || unused == 0) return;
    Entry& entry = *static_cast<Entry*>(charge.entry);
    entry.tat -= std::min<std::uint64_t>(unused, entry.tat);
  }

  // What a bucket holds now, for tests and reports: burst_ids for a source not tracked.
  std::uint64_t level(const Source& source, std::uint64_t now_ms);
  std::uint32_t entries() const { return static_cast<std::uint32_t>((mask_ + 1) * ways); }
  // The set `source` falls in under this table's seed (tests: aiming addresses at one set).
  std::uint64_t set_of(const Source& source) const { return hash(source, config_.seed.data()) >> set_shift_; }
  const SourceLimitConfig& config() const { return config_; }

 private:
  // One source: its tag (0: free) and its theoretical arrival time (GCRA) in "slots": the
  // source's bucket is empty until now_ reaches tat - burst_, full once now_ >= tat. 16 bytes.
  struct Entry {
    std::uint64_t tag = 0;
    std::uint64_t tat = 0;
  };
  struct alignas(64) Set {
    std::array<Entry, ways> way;
  };
  static_assert(sizeof(Set) == 64);

  // The limiter's clock in slots (one slot: the time one number takes to refill), from the
  // wall clock in ms: monotonic (a step back stands still); a jump forward refills, and a
  // bucket never holds more than full.
  void advance(std::uint64_t now_ms) {
    if (now_ms == last_ms_) return;
    if (now_ms > last_ms_) {
      const std::uint64_t scaled = std::min(now_ms - last_ms_, step_max_ms_) * config_.ids_per_s + remainder_;
      now_ += scaled / 1000;
      remainder_ = scaled % 1000;
    }
    last_ms_ = now_ms;  // back: time stands still this once and goes on from there
  }
  // Vector pair-multiply-shift (Thorup, "High Speed Hashing for Integers and Strings", 2015):
  // 2-universal in the top bits for keys `k` unknown to the sender.
  static std::uint64_t hash(const Source& source, const std::uint64_t* k) {
    const std::uint64_t x0 = source.high >> 32, x1 = source.high & 0xffff'ffff;
    const std::uint64_t x2 = source.low >> 32, x3 = source.low & 0xffff'ffff;
    return (k[0] + x1) * (k[1] + x0) + (k[2] + x3) * (k[3] + x2) + k[4];
  }
  Entry& find(const Source& source) {
    const std::uint64_t tag = hash(source, config_.seed.data() + 5) | 1;  // never 0 (free)
    Set& set = sets_[hash(source, config_.seed.data()) >> set_shift_];
    Entry* pick = &set.way[0];
    for (Entry& entry : set.way) {
      if (entry.tag == tag) return entry;
      if (pick->tag != 0 && (entry.tag == 0 || entry.tat < pick->tat)) pick = &entry;
    }
    return claim(*pick, tag);
  }
  // A new source in `entry` (free, or the set's fullest bucket): it keeps that bucket's level.
  Entry& claim(Entry& entry, std::uint64_t tag) {
    if (entry.tag != 0 && entry.tat > now_) stats_.evicted.add();
    entry.tag = tag;
    return entry;
  }
  std::uint32_t wait_us(std::uint64_t slots) const {
    const std::uint64_t us = (slots * 1'000'000 + config_.ids_per_s - 1) / config_.ids_per_s;
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(us, 10'000'000));
  }

  SourceLimitConfig config_;
  SourceLimitStats& stats_;
  std::unique_ptr<Set[]> sets_;
  std::uint64_t mask_ = 0;
  unsigned set_shift_ = 64;
  std::uint64_t burst_ = 1;
  std::uint64_t step_max_ms_ = 1;
  std::uint64_t now_ = 0;  // slots
  std::uint64_t last_ms_ = 0;
  std::uint64_t remainder_ = 0;
};

}  // namespace flurry::core
