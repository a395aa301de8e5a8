// client/prefetch.cc — see prefetch.h for the contract.
#include "client/prefetch.h"

#include <algorithm>
#include <string>
#include <system_error>

#include "client/errors.h"

namespace flurry::client {

Prefetch::Prefetch(const Options& options, Exchange& exchange, std::mutex& io_mutex, Transport& transport,
                   Clock& clock, std::string sequence)
    : options_(options),
      exchange_(exchange),
      io_mutex_(io_mutex),
      transport_(transport),
      clock_(clock),
      sequence_(std::move(sequence)),
      buffer_(options.prefetch) {}

Prefetch::~Prefetch() {
  {
    std::lock_guard lock(refill_mutex_);
    stopping_.store(true);
  }
  refill_cv_.notify_all();
  transport_.wake();
  if (thread_.joinable()) thread_.join();
}

bool Prefetch::start(Error* error) {
  try {
    thread_ = std::thread([this] { refill_loop(); });
  } catch (const std::system_error& e) {
    set_error(error, ErrorCode::system, std::string("cannot start the prefetch thread: ") + e.what());
    return false;
  }
  return true;
}

std::optional<std::uint64_t> Prefetch::next(Error* error) {
  std::uint64_t id = 0;
  for (;;) {
    std::uint64_t index = 0;
    if (buffer_.try_claim(&index)) {
      if (!buffer_.read(index, &id)) continue;  // overwritten while this thread slept: skipped
      maybe_wake_refill();
      return id;
    }
    // Empty: take the socket (waiting out a refill already in flight) and look again; still
    // empty, fetch now: the first ID is this caller's, the rest go to the buffer.
    std::unique_lock io(io_mutex_);
    if (buffer_.buffered() > 0) continue;
    const std::size_t want = std::min<std::size_t>(options_.prefetch, options_.ids_per_request);
    std::vector<proto::Range> ranges;
    if (!fetch(want, ranges, error)) return std::nullopt;
    id = ranges.front().first;
    push(ranges, 1);
    io.unlock();
    maybe_wake_refill();
    return id;
  }
}

void Prefetch::report(Counters& out) const {
  out.prefetch_refills += refills_.load(std::memory_order_relaxed);
  out.prefetch_failures += failures_.load(std::memory_order_relaxed);
}

// GET_IDS, or GET_SEQ of this buffer's sequence. Caller holds io_mutex.
bool Prefetch::fetch(std::size_t n, std::vector<proto::Range>& out, Error* error) {
  return sequence_.empty() ? exchange_.fetch(n, out, error) : exchange_.fetch_seq(sequence_, n, out, error);
}

// Pushes and publishes the IDs of `ranges` after the first `skip`. Caller holds io_mutex.
// An ID that does not fit (only if a server answered more than asked) is dropped, never
// handed out.
void Prefetch::push(const std::vector<proto::Range>& ranges, std::size_t skip) {
  for (const proto::Range& range : ranges) {
    for (std::uint32_t i = 0; i < range.count; ++i) {
      if (skip > 0) {
        --skip;
        continue;
      }
      if (!buffer_.push(range.first + i)) break;
    }
  }
  buffer_.publish();
}

std::size_t Prefetch::buffered() const { return buffer_.buffered(); }

void Prefetch::maybe_wake_refill() {
  if (buffered() >= options_.prefetch / 2) return;
  if (refill_requested_.load(std::memory_order_relaxed)) return;
  if (refill_requested_.exchange(true)) return;
  {
    std::lock_guard lock(refill_mutex_);
    refill_wanted_ = true;
  }
  refill_cv_.notify_one();
}

// Tops the buffer up towards options.prefetch, one request at a time. Stops when the room
// left is less than one full request (or half the buffer): topping up by a few IDs at a time
// while consumers drain would turn one large request into many tiny ones. False on failure.
bool Prefetch::refill() {
  const std::size_t batch_min = std::min<std::size_t>(options_.ids_per_request, options_.prefetch / 2);
  std::vector<proto::Range> ranges;
  bool added = false;
  while (!stopping_.load()) {
    std::lock_guard io(io_mutex_);
    const std::size_t size = buffered();
    const std::size_t room = size >= options_.prefetch ? 0 : options_.prefetch - size;
    if (room == 0 || room < batch_min) break;
    const std::size_t want = std::min<std::size_t>(room, options_.ids_per_request);
    ranges.clear();
    exchange_.poll_answers(false);  // the refill thread: no caller waits on it
    const bool fetched = fetch(want, ranges, nullptr);
    exchange_.poll_answers(true);
    if (!fetched) {
      if (!stopping_.load()) failures_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    push(ranges, 0);
    added = true;
  }
  if (added) refills_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Prefetch::refill_loop() {
  std::unique_lock lock(refill_mutex_);
  for (;;) {
    refill_cv_.wait(lock, [this] { return stopping_.load() || refill_wanted_; });
    if (stopping_.load()) return;
    refill_wanted_ = false;
    lock.unlock();
    const bool ok = refill();
    refill_requested_.store(false);
    // The back-off ends early only when the transport is woken, i.e. on destruction.
    if (!ok && !clock_.sleep_until(clock_.now() + refill_backoff, transport_.wake_fd())) return;
    lock.lock();
  }
}

}  // namespace flurry::client
