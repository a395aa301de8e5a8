// client/prefetch.h — internal: the local ID buffer that a background thread refills
// (Options::prefetch != 0), so that Client::next() usually returns without a network round trip.
//
// Contract:
//   * The buffer is an IdRing (client/id_ring.h) holding up to Options::prefetch IDs: next()
//     takes one with one compare-and-swap and three loads, no lock. Only threads holding
//     `io_mutex` push into it, so the room computed under the lock can only grow before the
//     push.
//   * next() on an empty buffer takes `io_mutex` (waiting out a refill already in flight)
//     and, if the buffer is still empty, fetches synchronously: it keeps the first ID and
//     buffers the rest. A failed fetch leaves nothing behind (no claim, no skipped ID).
//   * The refill thread starts filling at once, refills when the buffer falls below half, asks
//     one request at a time (releasing io_mutex in between so get()/ping() callers are not
//     starved) and, after a failed refill, sleeps refill_backoff on the Clock before it may try
//     again, so a dead server is not hammered by an idle client.
//   * Destruction sets the stop flag, wakes the transport (interrupting an exchange in flight)
//     and joins the thread. IDs left in the buffer are never used.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/clock.h"
#include "client/exchange.h"
#include "client/id_ring.h"
#include "client/transport.h"

namespace flurry::client {

inline constexpr std::chrono::milliseconds refill_backoff{250};

class Prefetch {
 public:
  // Everything passed must outlive the Prefetch.
  // `sequence` empty: Snowflake IDs (GET_IDS); else numbers of that named sequence (GET_SEQ).
  Prefetch(const Options& options, Exchange& exchange, std::mutex& io_mutex, Transport& transport,
           Clock& clock, std::string sequence = {});
  ~Prefetch();
  Prefetch(const Prefetch&) = delete;
  Prefetch& operator=(const Prefetch&) = delete;

  // Starts the refill thread. Errors: system (std::thread failed).
  bool start(Error* error);

  // One ID from the buffer, or synchronously (under io_mutex) when it is empty; wakes the
  // refill thread when the buffer falls below half. Errors: those of Exchange::fetch.
  std::optional<std::uint64_t> next(Error* error);

  // Adds this buffer's refills and failures to the prefetch counters of `out`.
  void report(Counters& out) const;

 private:
  void push(const std::vector<proto::Range>& ranges, std::size_t skip);
  bool fetch(std::size_t n, std::vector<proto::Range>& out, Error* error);
  std::size_t buffered() const;
  void maybe_wake_refill();
  bool refill();
  void refill_loop();

  const Options& options_;
  Exchange& exchange_;
  std::mutex& io_mutex_;
  Transport& transport_;
  Clock& clock_;
  std::string sequence_;

  IdRing buffer_;
  std::mutex refill_mutex_;
  std::condition_variable refill_cv_;
  bool refill_wanted_ = true;                 // under refill_mutex_
  std::atomic<bool> stopping_{false};         // set under refill_mutex_
  std::atomic<bool> refill_requested_{true};  // a wake-up is pending or a refill is running
  std::atomic<std::uint64_t> refills_{0};
  std::atomic<std::uint64_t> failures_{0};
  std::thread thread_;
};

}  // namespace flurry::client
