// base/door.h — the policy of a front door (the RESP and HTTP front ends, the metrics and
// probe port, the control socket): which connections it keeps, so that slow or idle clients
// never hold every slot and lock out the next one. Pure bookkeeping: the caller owns the
// sockets, tells the door what happened (admit, input, request begun/answered, closed) with
// its own monotonic clock in ms, and closes what the door names. One thread only, except the
// event counters (Counter: any thread may read them).
//
//   * A new connection is always admitted; the newcomer is never the one closed for it.
//   * At most per_peer_max connections from one peer (a source address, or a uid): a peer at
//     its limit loses its own connection that has waited longest without finishing anything
//     (idle the longest, or whose request began the longest ago) to its new one (shed_peer).
//     So one peer never takes the slots of others, and a client is served from an address
//     whose other connections are idle or slow.
//   * At most connections_max connections: when full, the connection that has waited longest,
//     whoever's, is closed for the new one (shed). So a client that sends its request at once
//     is served however many idle or slow ones are held, from however many addresses.
//   * A connection with no request under way for idle_timeout_ms is closed (idle_timeout); one
//     whose request began request_timeout_ms ago and is still incomplete is closed, however
//     slowly its bytes keep coming (request_timeout: the slowloris bound).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/counter.h"

namespace flurry {

struct DoorLimits {
  std::uint32_t connections_max = 256;
  std::uint32_t per_peer_max = 64;
  std::uint64_t idle_timeout_ms = 60'000;
  std::uint64_t request_timeout_ms = 10'000;
};

enum class DoorEvent : std::uint8_t {
  shed_peer,        // closed for a new connection of the same peer, at per_peer_max
  shed,             // closed for a new connection, at connections_max
  idle_timeout,     // no request for idle_timeout_ms
  request_timeout,  // a request incomplete after request_timeout_ms
  count_,
};
std::string_view to_string(DoorEvent event);

// The doors' clock: monotonic milliseconds.
inline std::uint64_t door_now_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

class Door {
 public:
  explicit Door(const DoorLimits& limits) : limits_(limits) {}

  // Admits a new connection `handle` (unique while open, e.g. its descriptor) from `peer`;
  // returns the connection the caller must close now to make room (and remove()), if any.
  std::optional<std::uint64_t> admit(std::uint64_t handle, std::uint64_t peer, std::uint64_t now_ms);
  // Bytes arrived; `incomplete`: a request is under way and not whole yet (its clock starts at
  // the first such call), false: nothing is pending (idle from now).
  void input(std::uint64_t handle, std::uint64_t now_ms, bool incomplete);
  // A request began (its head is arriving) / was answered (idle from now).
  void begun(std::uint64_t handle, std::uint64_t now_ms);
  void answered(std::uint64_t handle, std::uint64_t now_ms);
  // The connection is gone (closed by either side).
  void remove(std::uint64_t handle);
  // Appends the connections past a deadline (counted once: each is then closing and no longer
  // counts towards the limits); the caller closes and remove()s each.
  void expired(std::uint64_t now_ms, std::vector<std::uint64_t>* out);
  // The soonest deadline of an open connection, for a poll timeout (nullopt: none).
  std::optional<std::uint64_t> next_deadline_ms() const;

  std::size_t open() const { return open_; }  // admitted, not closing
  const DoorLimits& limits() const { return limits_; }
  void set_limits(const DoorLimits& limits) { limits_ = limits; }  // before the first admit()
  std::uint64_t count(DoorEvent event) const { return counts_[static_cast<std::size_t>(event)].get(); }
  void add(DoorEvent event) { counts_[static_cast<std::size_t>(event)].add(); }
  // visit(event name, value) for each event.
  void visit(const std::function<void(std::string_view event, std::uint64_t value)>& visit) const;

 private:
  struct Entry {
    std::uint64_t peer = 0;
    std::uint64_t last_ms = 0;     // idle since (no request under way)
    std::uint64_t request_ms = 0;  // the request under way began (0: none)
    bool closing = false;          // named by expired() or admit(): no longer counted
  };
  void close_entry(Entry& entry);
  // The open connection (of `peer` only, when given) that has waited longest.
  std::optional<std::uint64_t> longest_waiting(std::optional<std::uint64_t> peer) const;

  DoorLimits limits_;
  std::unordered_map<std::uint64_t, Entry> entries_;
  std::unordered_map<std::uint64_t, std::uint32_t> per_peer_;  // open (not closing) ones
  std::size_t open_ = 0;
  std::array<Counter, static_cast<std::size_t>(DoorEvent::count_)> counts_;
};

}  // namespace flurry
