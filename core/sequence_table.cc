// core/sequence_table.cc — see sequence_table.h.
#include "core/sequence_table.h"

#include <algorithm>
#include <cstring>

#include "base/invariant.h"

namespace flurry::core {
namespace {

using NameWords = std::array<std::uint64_t, proto::seq_name_size_max / 8>;

NameWords words_of(std::string_view name) {
  std::array<char, proto::seq_name_size_max> bytes{};
  std::memcpy(bytes.data(), name.data(), std::min(name.size(), bytes.size()));
  NameWords words{};
  std::memcpy(words.data(), bytes.data(), bytes.size());
  return words;
}

// Appends n numbers from `first` to the answer, extending the last range when contiguous.
void append(std::span<proto::Range> out, SeqIssued& issued, std::uint64_t first, std::uint32_t n) {
  if (issued.range_count > 0) {
    proto::Range& last = out[issued.range_count - 1];
    if (last.first + last.count == first) {
      last.count += n;
      issued.ids += n;
      return;
    }
  }
  out[issued.range_count++] = proto::Range{first, n};
  issued.ids += n;
}

}  // namespace

// Past the deadline this node may no longer hold what it was granted: nothing is issued,
// whatever is held.
bool SequenceTable::past_deadline(const Entry& entry, std::uint64_t now_unix_ms) {
  return now_unix_ms >= entry.serve_until_ms.load(std::memory_order_acquire);
}

std::string_view to_string(SeqMode mode) { return mode == SeqMode::monotonic ? "monotonic" : "segment"; }

std::optional<SeqMode> parse_seq_mode(std::string_view text) {
  if (text == "segment") return SeqMode::segment;
  if (text == "monotonic") return SeqMode::monotonic;
  return std::nullopt;
}

std::optional<std::pair<std::size_t, std::uint64_t>> SequenceTable::find(std::string_view name) const {
  const NameWords wanted = words_of(name);
  for (std::size_t i = 0; i < sequences_max; ++i) {
    const Entry& entry = entries_[i];
    const std::uint64_t generation = entry.generation.load(std::memory_order_acquire);
    if (generation == 0 || entry.name_size.load(std::memory_order_relaxed) != name.size()) continue;
    bool same = true;
    for (std::size_t w = 0; w < wanted.size() && same; ++w) {
      same = entry.name_words[w].load(std::memory_order_relaxed) == wanted[w];
    }
    // Seqlock-style: the name was read under this generation only if it is still current.
    if (same && entry.generation.load(std::memory_order_acquire) == generation) {
      return std::pair{i, generation};
    }
  }
  return std::nullopt;
}

SeqIssued SequenceTable::issue(std::uint32_t worker, std::string_view name, std::uint32_t count,
                               std::span<proto::Range> out, std::uint64_t now_unix_ms) {
  FLURRY_INVARIANT(worker < workers_, "a worker outside the sequence table");
  const auto found = find(name);
  if (!found) return SeqIssued{};
  const auto [slot, generation] = *found;
  Entry& entry = entries_[slot];
  SeqIssued issued;
  if (static_cast<SeqMode>(entry.mode.load(std::memory_order_relaxed)) == SeqMode::monotonic) {
    issued = issue_monotonic(entry, count, out, now_unix_ms);
  } else if (past_deadline(entry, now_unix_ms)) {
    issued = SeqIssued{SeqAnswer::retry};
  } else {
    issued = issue_segment(worker_slot(slot, worker), generation, count, out);
  }
  // Read after what was issued: numbers queued before the flag went up are still handed out.
  if (issued.answer == SeqAnswer::retry && entry.exhausted.load(std::memory_order_acquire)) {
    issued.answer = SeqAnswer::exhausted;
  }
  return issued;
}

SeqIssued SequenceTable::issue_segment(WorkerSlot& slot, std::uint64_t generation, std::uint32_t count,
                                       std::span<proto::Range> out) {
  SeqIssued issued;
  if (slot.generation != generation) {  // a sub-block of a deleted sequence is never used
    slot.generation = generation;
    slot.next = slot.end = 0;
  }
  while (issued.ids < count) {
    if (slot.next == slot.end) {
      const std::uint64_t head = slot.head.load(std::memory_order_relaxed);
      if (head == slot.tail.load(std::memory_order_acquire)) break;  // nothing queued
      const QueueEntry& queued = slot.queue[head % queue_depth];
      const std::uint64_t first = queued.first.load(std::memory_order_relaxed);
      const std::uint64_t end = queued.end.load(std::memory_order_relaxed);
      const bool current = queued.generation.load(std::memory_order_relaxed) == generation;
      slot.head.store(head + 1, std::memory_order_release);
      if (current) {
        FLURRY_INVARIANT(first <= end && end <= seq_value_limit, "a malformed sequence sub-block");
        slot.next = first;
        slot.end = end;
      }
      continue;
    }
    const bool extends = issued.range_count > 0 &&
                         out[issued.range_count - 1].first + out[issued.range_count - 1].count == slot.next;
    if (!extends && issued.range_count == out.size()) break;
    const std::uint64_t room = std::min<std::uint64_t>(slot.end - slot.next, 0xFFFFFFFFu - issued.ids);
    const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(count - issued.ids, room));
    append(out, issued, slot.next, n);
    slot.next += n;
  }
  issued.answer = issued.ids > 0 ? SeqAnswer::issued : SeqAnswer::retry;
  return issued;
}

SeqIssued SequenceTable::issue_monotonic(Entry& entry, std::uint32_t count, std::span<proto::Range> out,
                                         std::uint64_t now_unix_ms) {
  SeqIssued issued;
  if (!entry.owned.load(std::memory_order_acquire)) {
    issued.answer = SeqAnswer::not_owner;
    issued.owner = entry.owner.load(std::memory_order_relaxed);
    return issued;
  }
  // Read after `owned` (take_ownership publishes the deadline first). Past it, this node's
  // lease may have expired (a paused process) and a new owner may be issuing higher numbers.
  if (past_deadline(entry, now_unix_ms)) {
    issued.answer = SeqAnswer::not_owner;  // owner: not_owner_unknown
    return issued;
  }
  issued.answer = SeqAnswer::retry;
  if (out.empty()) return issued;
  std::uint64_t next = entry.next.load(std::memory_order_relaxed);
  for (;;) {
    // The limit is read after `next`: a limit raised by a new owner is paired with its next.
    const std::uint64_t limit = entry.limit.load(std::memory_order_acquire);
    if (next >= limit) return issued;
    const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(count, limit - next));
    if (entry.next.compare_exchange_weak(next, next + n, std::memory_order_acq_rel,
                                         std::memory_order_relaxed)) {
      append(out, issued, next, n);
      issued.answer = SeqAnswer::issued;
      return issued;
    }
  }
}

std::optional<std::size_t> SequenceTable::create(std::string_view name, SeqMode mode,
                                                 std::uint64_t generation) {
  for (std::size_t i = 0; i < sequences_max; ++i) {
    if (create_at(i, name, mode, generation)) return i;
  }
  return std::nullopt;
}

bool SequenceTable::create_at(std::size_t slot, std::string_view name, SeqMode mode,
                              std::uint64_t generation) {
  FLURRY_INVARIANT(generation != 0 && proto::valid_seq_name(name), "a sequence created without a name");
  FLURRY_INVARIANT(slot < sequences_max, "a sequence slot outside the table");
  Entry& entry = entries_[slot];
  if (entry.generation.load(std::memory_order_relaxed) != 0) return false;
  const NameWords words = words_of(name);
  for (std::size_t w = 0; w < words.size(); ++w)
    entry.name_words[w].store(words[w], std::memory_order_relaxed);
  entry.name_size.store(static_cast<std::uint8_t>(name.size()), std::memory_order_relaxed);
  entry.mode.store(static_cast<std::uint8_t>(mode), std::memory_order_relaxed);
  entry.owned.store(false, std::memory_order_relaxed);
  entry.owner.store(proto::not_owner_unknown, std::memory_order_relaxed);
  entry.limit.store(0, std::memory_order_relaxed);
  entry.next.store(0, std::memory_order_relaxed);
  entry.serve_until_ms.store(no_deadline, std::memory_order_relaxed);
  entry.exhausted.store(false, std::memory_order_relaxed);
  entry.generation.store(generation, std::memory_order_release);
  return true;
}

void SequenceTable::set_exhausted(std::size_t slot) {
  entries_[slot].exhausted.store(true, std::memory_order_release);
}

bool SequenceTable::exhausted(std::size_t slot) const {
  return entries_[slot].exhausted.load(std::memory_order_acquire);
}

void SequenceTable::remove(std::size_t slot) {
  Entry& entry = entries_[slot];
  entry.owned.store(false, std::memory_order_relaxed);
  entry.limit.store(0, std::memory_order_relaxed);
  entry.generation.store(0, std::memory_order_release);
}

std::uint64_t SequenceTable::generation(std::size_t slot) const {
  return entries_[slot].generation.load(std::memory_order_relaxed);
}

bool SequenceTable::push(std::size_t slot, std::uint32_t worker, SeqBlock block) {
  FLURRY_INVARIANT(block.first < block.end && block.end <= seq_value_limit, "an empty sequence sub-block");
  WorkerSlot& target = worker_slot(slot, worker);
  const std::uint64_t tail = target.tail.load(std::memory_order_relaxed);
  if (tail - target.head.load(std::memory_order_acquire) >= queue_depth) return false;
  QueueEntry& entry = target.queue[tail % queue_depth];
  entry.first.store(block.first, std::memory_order_relaxed);
  entry.end.store(block.end, std::memory_order_relaxed);
  entry.generation.store(entries_[slot].generation.load(std::memory_order_relaxed),
                         std::memory_order_relaxed);
  target.tail.store(tail + 1, std::memory_order_release);
  return true;
}

std::uint32_t SequenceTable::queued(std::size_t slot, std::uint32_t worker) const {
  const WorkerSlot& target = worker_slot(slot, worker);
  return static_cast<std::uint32_t>(target.tail.load(std::memory_order_relaxed) -
                                    target.head.load(std::memory_order_acquire));
}

void SequenceTable::take_ownership(std::size_t slot, std::uint64_t next) {
  Entry& entry = entries_[slot];
  entry.limit.store(0, std::memory_order_release);  // nothing issuable until raise_limit()
  entry.next.store(next, std::memory_order_relaxed);
  entry.owned.store(true, std::memory_order_release);
}

void SequenceTable::raise_limit(std::size_t slot, std::uint64_t limit) {
  Entry& entry = entries_[slot];
  FLURRY_INVARIANT(limit >= entry.limit.load(std::memory_order_relaxed) && limit <= seq_value_limit,
                   "a monotonic sequence limit lowered");
  entry.limit.store(limit, std::memory_order_release);
}

void SequenceTable::set_not_owner(std::size_t slot, std::uint32_t owner) {
  Entry& entry = entries_[slot];
  entry.owner.store(owner, std::memory_order_relaxed);
  entry.owned.store(false, std::memory_order_release);
  entry.limit.store(0, std::memory_order_release);
}

void SequenceTable::set_serve_until(std::size_t slot, std::uint64_t unix_ms) {
  entries_[slot].serve_until_ms.store(unix_ms, std::memory_order_release);
}

std::uint64_t SequenceTable::serve_until(std::size_t slot) const {
  return entries_[slot].serve_until_ms.load(std::memory_order_relaxed);
}

std::uint64_t SequenceTable::monotonic_next(std::size_t slot) const {
  return entries_[slot].next.load(std::memory_order_relaxed);
}

std::uint64_t SequenceTable::monotonic_limit(std::size_t slot) const {
  return entries_[slot].limit.load(std::memory_order_relaxed);
}

}  // namespace flurry::core
