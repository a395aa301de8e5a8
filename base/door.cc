// base/door.cc — see door.h.
#include "base/door.h"

#include <algorithm>

namespace flurry {

std::string_view to_string(DoorEvent event) {
  switch (event) {
    case DoorEvent::shed_peer:
      return "shed_peer";
    case DoorEvent::shed:
      return "shed";
    case DoorEvent::idle_timeout:
      return "idle_timeout";
    case DoorEvent::request_timeout:
      return "request_timeout";
    case DoorEvent::count_:
      break;
  }
  return "unknown";
}

std::optional<std::uint64_t> Door::longest_waiting(std::optional<std::uint64_t> peer) const {
  // The earliest "since" (idle since, or request under way since); a tie goes to an idle one.
  std::optional<std::uint64_t> victim;
  bool victim_idle = false;
  std::uint64_t victim_since = 0;
  for (const auto& [handle, entry] : entries_) {
    if (entry.closing || (peer && entry.peer != *peer)) continue;
    const bool idle = entry.request_ms == 0;
    const std::uint64_t since = idle ? entry.last_ms : entry.request_ms;
    if (!victim || since < victim_since || (since == victim_since && idle && !victim_idle)) {
      victim = handle;
      victim_idle = idle;
      victim_since = since;
    }
  }
  return victim;
}

std::optional<std::uint64_t> Door::admit(std::uint64_t handle, std::uint64_t peer, std::uint64_t now_ms) {
  std::optional<std::uint64_t> shed;
  const auto from_peer = per_peer_.find(peer);
  if (from_peer != per_peer_.end() && from_peer->second >= limits_.per_peer_max) {
    shed = longest_waiting(peer);
    if (shed) add(DoorEvent::shed_peer);
  } else if (open_ >= limits_.connections_max) {
    shed = longest_waiting(std::nullopt);
    if (shed) add(DoorEvent::shed);
  }
  if (shed) close_entry(entries_[*shed]);
  ++per_peer_[peer];
  entries_[handle] = Entry{peer, now_ms, 0, false};
  ++open_;
  return shed;
}

void Door::input(std::uint64_t handle, std::uint64_t now_ms, bool incomplete) {
  const auto found = entries_.find(handle);
  if (found == entries_.end()) return;
  Entry& entry = found->second;
  if (!incomplete) {
    entry.request_ms = 0;
    entry.last_ms = now_ms;
  } else if (entry.request_ms == 0) {
    entry.request_ms = std::max<std::uint64_t>(now_ms, 1);
  }
}

void Door::begun(std::uint64_t handle, std::uint64_t now_ms) { input(handle, now_ms, true); }

void Door::answered(std::uint64_t handle, std::uint64_t now_ms) { input(handle, now_ms, false); }

void Door::close_entry(Entry& entry) {
  if (entry.closing) return;
  entry.closing = true;
  --open_;
  const auto peer = per_peer_.find(entry.peer);
  if (peer != per_peer_.end() && --peer->second == 0) per_peer_.erase(peer);
}

void Door::remove(std::uint64_t handle) {
  const auto found = entries_.find(handle);
  if (found == entries_.end()) return;
  close_entry(found->second);
  entries_.erase(found);
}

void Door::expired(std::uint64_t now_ms, std::vector<std::uint64_t>* out) {
  for (auto& [handle, entry] : entries_) {
    if (entry.closing) continue;
    if (entry.request_ms != 0) {
      if (now_ms - std::min(now_ms, entry.request_ms) < limits_.request_timeout_ms) continue;
      add(DoorEvent::request_timeout);
    } else {
      if (now_ms - std::min(now_ms, entry.last_ms) < limits_.idle_timeout_ms) continue;
      add(DoorEvent::idle_timeout);
    }
    close_entry(entry);
    out->push_back(handle);
  }
}

std::optional<std::uint64_t> Door::next_deadline_ms() const {
  std::optional<std::uint64_t> soonest;
  for (const auto& [handle, entry] : entries_) {
    if (entry.closing) continue;
    const std::uint64_t deadline = entry.request_ms != 0 ? entry.request_ms + limits_.request_timeout_ms
                                                         : entry.last_ms + limits_.idle_timeout_ms;
    if (!soonest || deadline < *soonest) soonest = deadline;
  }
  return soonest;
}

void Door::visit(const std::function<void(std::string_view event, std::uint64_t value)>& visit) const {
  for (std::size_t i = 0; i < counts_.size(); ++i)
    visit(to_string(static_cast<DoorEvent>(i)), counts_[i].get());
}

}  // namespace flurry
