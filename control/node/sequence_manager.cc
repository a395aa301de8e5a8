// control/node/sequence_manager.cc — see sequence_manager.h.
#include "control/node/sequence_manager.h"

#include <thread>

#include <algorithm>

#include "base/log.h"
#include "proto/wire.h"

namespace flurry::control {
namespace {

std::uint64_t elapsed_ns(SequenceManager::Clock::time_point since) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(SequenceManager::Clock::now() - since).count());
}

const flurry::Clock& system_clock() {
  static const SystemClock clock;
  return clock;
}

}  // namespace

SequenceManager::SequenceManager(core::SequenceTable& table, persist::SequenceStore& store,
                                 const SequenceOptions& options, SharedSequences* shared,
                                 const flurry::Clock* clock)
    : table_(table),
      store_(store),
      clock_(clock != nullptr ? *clock : system_clock()),
      options_(options),
      shared_(shared) {}

Result<SequenceManager::Lock> SequenceManager::lock_for_command() const {
  Lock lock(mutex_, std::defer_lock);
  const auto deadline = std::chrono::steady_clock::now() + command_wait;
  while (!lock.try_lock() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // bounded: command_wait in all
  }
  if (!lock.owns_lock()) {
    return Error{"the sequence store is busy (a block reservation's disk write has taken over " +
                 std::to_string(command_wait.count()) + " ms); try again, and check the state disk"};
  }
  return lock;
}

void SequenceManager::load() {
  std::lock_guard lock(mutex_);
  for (std::size_t slot = 0; slot < core::sequences_max; ++slot) {
    const auto& record = store_.record(slot);
    if (!record || !proto::valid_seq_name(record->name)) continue;
    Live& live = live_[slot];
    live.active = true;
    live.name = record->name;
    live.mode = record->mode == 1 ? core::SeqMode::monotonic : core::SeqMode::segment;
    live.cursor = live.upper = live.start = record->upper;  // below it may have been issued
    live.step = std::clamp(record->step, options_.step_min, options_.step_max);
    table_.create_at(slot, live.name, live.mode, next_generation_++);
    if (live.mode == core::SeqMode::monotonic) table_.take_ownership(slot, live.cursor);
    log_info("sequence {} ({}): continues at {}", live.name, core::to_string(live.mode), live.upper);
  }
  for (std::size_t slot = 0; slot < core::sequences_max; ++slot) {
    if (const auto& tombstone = store_.tombstone(slot)) {
      log_info("sequence {}: deleted, its floor {} kept (created again only at or above it)", tombstone->name,
               tombstone->upper);
    }
  }
}

// The highest, if there are several: an older flurryd could create a deleted name again in
// another entry (and below its bound), leaving more than one tombstone of it.
std::optional<std::size_t> SequenceManager::find_tombstone(const std::string& name) const {
  std::optional<std::size_t> found;
  for (std::size_t slot = 0; slot < core::sequences_max; ++slot) {
    const auto& tombstone = store_.tombstone(slot);
    if (live_[slot].active || !tombstone || tombstone->name != name) continue;
    if (!found || tombstone->upper > store_.tombstone(*found)->upper) found = slot;
  }
  return found;
}

std::optional<std::size_t> SequenceManager::find(const std::string& name) const {
  for (std::size_t slot = 0; slot < core::sequences_max; ++slot) {
    if (live_[slot].active && live_[slot].name == name) return slot;
  }
  return std::nullopt;
}

Status SequenceManager::create(const std::string& name, std::uint64_t start, core::SeqMode mode) {
  if (!proto::valid_seq_name(name)) {
    return Error{"bad sequence name '" + name.substr(0, 64) +
                 "': 1 to 32 characters from A-Z a-z 0-9 _ . - :"};
  }
  if (start >= core::seq_value_limit) return Error{"--start must be below 2^63"};
  Result<Lock> lock = lock_for_command();
  if (!lock.ok()) return lock.status();
  if (shared_) return create_shared(name, start, mode);
  if (find(name)) return Error{"sequence '" + name + "' exists already (flurryctl seq show " + name + ")"};
  // A deleted name keeps its floor: numbers below it may have been issued, so never again.
  std::optional<std::size_t> reused = find_tombstone(name);
  if (reused && start < store_.tombstone(*reused)->upper) {
    const std::string floor = std::to_string(store_.tombstone(*reused)->upper);
    return Error{"sequence '" + name + "' was deleted, and numbers of it below " + floor +
                     " may have been issued (its floor): create it again with --start " + floor +
                     " or more; a lower start would issue numbers twice and is never accepted",
                 StatusCode::refused};
  }
  std::size_t slot = 0;
  if (reused) {
    slot = *reused;  // at or above its floor: the new record replaces the tombstone
  } else {
    while (slot < core::sequences_max && (live_[slot].active || store_.tombstone(slot))) ++slot;
  }
  if (slot == core::sequences_max) {
    std::string floors;
    for (std::size_t s = 0; s < core::sequences_max; ++s) {
      if (const auto& tombstone = store_.tombstone(s); tombstone && !live_[s].active) {
        floors += (floors.empty() ? "" : ", ") + tombstone->name + " (floor " +
                  std::to_string(tombstone->upper) + ")";
      }
    }
    return Error{"the sequence table is full (" + std::to_string(core::sequences_max) +
                 " entries, live sequences and deleted names' floors together); delete one first" +
                 (floors.empty()
                      ? std::string()
                      : ", or create one of the deleted names again at or above its floor: " + floors)};
  }
  persist::SequenceRecord record{true, static_cast<std::uint8_t>(mode), name, start, options_.step_initial};
  if (Status written = store_.write(slot, record); !written.ok()) return written;
  Live& live = live_[slot];
  live = Live{};
  live.active = true;
  live.name = name;
  live.mode = mode;
  live.cursor = live.upper = live.start = start;
  live.step = options_.step_initial;
  table_.create_at(slot, name, mode, next_generation_++);
  if (mode == core::SeqMode::monotonic) table_.take_ownership(slot, start);  // local mode: the owner
  log_info("sequence {} created ({}, from {})", name, core::to_string(mode), start);
  return {};
}

Status SequenceManager::remove(const std::string& name) {
  Result<Lock> lock = lock_for_command();
  if (!lock.ok()) return lock.status();
  if (shared_) return remove_shared(name);
  const auto slot = find(name);
  if (!slot) return Error{"no sequence '" + name.substr(0, 64) + "' (flurryctl seq list)"};
  Live& live = live_[*slot];
  persist::SequenceRecord record{false, static_cast<std::uint8_t>(live.mode), live.name, live.upper,
                                 live.step};
  if (Status written = store_.write(*slot, record); !written.ok()) return written;
  table_.remove(*slot);
  live = Live{};
  publish_exhausted();
  log_info("sequence {} deleted; its floor {} is kept: created again, it starts at {} or above", name,
           record.upper, record.upper);
  return {};
}

// Makes [upper, upper + step) durable; only then may any of it be handed out.
Status SequenceManager::reserve(std::size_t slot) {
  Live& live = live_[slot];
  if (live.exhausted) return Error{"sequence '" + live.name + "' is exhausted (2^63)", StatusCode::refused};
  if (live.blocks > 0) adapt_step(live);
  if (shared_) return reserve_shared(slot);
  const std::uint64_t room = core::seq_value_limit - live.upper;
  if (room == 0) {
    mark_exhausted(slot);
    return Error{"sequence '" + live.name + "' is exhausted (2^63)", StatusCode::refused};
  }
  const std::uint64_t upper = live.upper + std::min(live.step, room);
  persist::SequenceRecord record{true, static_cast<std::uint8_t>(live.mode), live.name, upper, live.step};
  const Clock::time_point began = Clock::now();
  if (Status written = store_.write(slot, record); !written.ok()) {
    if (live.reserve_failures++ == 0) log_warn("{}", written.message());
    return written;
  }
  live.last_reserve_ns = elapsed_ns(began);
  live.upper = upper;
  live.block_started = Clock::now();
  ++live.blocks;
  return {};
}

void SequenceManager::adapt_step(Live& live) const {
  const auto lasted = Clock::now() - live.block_started;
  if (lasted < options_.block_target) {
    live.step = std::min(live.step * 2, options_.step_max);
  } else if (lasted > options_.block_target * 8) {
    live.step = std::max(live.step / 2, options_.step_min);
  }
}

void SequenceManager::refill_segment(std::size_t slot) {
  Live& live = live_[slot];
  const std::uint64_t sub_block = std::max<std::uint64_t>(1, live.step / (table_.workers() * 4ULL));
  for (std::uint32_t worker = 0; worker < table_.workers(); ++worker) {
    while (table_.queued(slot, worker) < core::SequenceTable::queue_depth) {
      if (live.cursor == live.upper && (live.exhausted || !reserve(slot).ok())) return;
      const std::uint64_t end = live.cursor + std::min(sub_block, live.upper - live.cursor);
      if (!table_.push(slot, worker, {live.cursor, end})) break;
      live.cursor = end;
    }
  }
}

// Local mode: this node owns every monotonic sequence; the limit follows the durable bound.
void SequenceManager::refill_monotonic(std::size_t slot) {
  Live& live = live_[slot];
  const std::uint64_t next = table_.monotonic_next(slot);
  if (!live.exhausted && live.upper - std::min(next, live.upper) <= live.step / 2)
    (void)reserve(slot);  // failure: logged
  if (table_.monotonic_limit(slot) < live.upper) table_.raise_limit(slot, live.upper);
  live.cursor = live.upper;
}

void SequenceManager::step() {
  std::lock_guard lock(mutex_);
  if (shared_ && Clock::now() >= next_sync_) sync_shared();
  const std::optional<Holder> holder = shared_ && holder_ ? holder_() : std::nullopt;
  for (std::size_t slot = 0; slot < core::sequences_max; ++slot) {
    if (!live_[slot].active) continue;
    if (live_[slot].mode == core::SeqMode::segment) {
      refill_segment(slot);
    } else if (!shared_) {
      refill_monotonic(slot);
    } else {
      if (live_[slot].owned && live_[slot].owned_as != holder) lose_owner(slot, proto::not_owner_unknown);
      refill_monotonic_shared(slot, holder);
    }
    if (shared_ && live_[slot].active) publish_deadline(slot, holder);
  }
}

void SequenceManager::publish_deadline(std::size_t slot, const std::optional<Holder>& holder) {
  const Live& live = live_[slot];
  const std::uint64_t until_ns =
      live.confirmed_mono_ns +
      static_cast<std::uint64_t>(std::chrono::nanoseconds(SharedSequences::serve_unconfirmed_max).count());
  const std::uint64_t now_ns = clock_.mono_ns();
  std::uint64_t until_ms = until_ns > now_ns ? clock_.wall_ms() + (until_ns - now_ns) / 1'000'000 : 0;
  if (live.mode == core::SeqMode::monotonic) {
    until_ms = holder ? std::min(until_ms, holder->serve_until_unix_ms) : 0;
  }
  table_.set_serve_until(slot, until_ms);
}

// ---- cluster mode ----

Status SequenceManager::create_shared(const std::string& name, std::uint64_t start, core::SeqMode mode) {
  if (mode == core::SeqMode::monotonic && !holder_) {
    return Error{"monotonic sequences need this node's lease (not configured)", StatusCode::refused};
  }
  // Refused: it exists, or was deleted lately and `start` is below its tombstone (the
  // store's message says which and what to do).
  if (Status created = shared_->create(name, start, mode); !created.ok()) return created;
  log_info("sequence {} created in etcd ({}, from {})", name, core::to_string(mode), start);
  sync_shared();  // serve it here at once; the other nodes find it within sync_period
  return {};
}

Status SequenceManager::remove_shared(const std::string& name) {
  const Status removed = shared_->remove(name);
  if (!removed.ok() && removed.code() != StatusCode::not_found) return removed;
  if (const auto slot = find(name)) drop(*slot);  // deleted, or gone already: stop serving it
  if (!removed.ok()) return Error{"no sequence '" + name.substr(0, 64) + "' in etcd (flurryctl seq list)"};
  log_info("sequence {} deleted from etcd", name);
  return {};
}

// One block granted by the shared store to this node alone; only then may it be queued.
Status SequenceManager::reserve_shared(std::size_t slot) {
  Live& live = live_[slot];
  const Clock::time_point began = Clock::now();
  if (began < live.retry_at || began < shared_retry_at_)
    return Error{"retrying etcd later", StatusCode::unavailable};
  const std::uint64_t sent_ns = clock_.mono_ns();
  Result<core::SeqBlock> block = shared_->reserve(live.name, live.incarnation, live.step);
  if (!block.ok()) {
    if (block.code() == StatusCode::not_found) {
      log_info("sequence {} is gone from etcd: no longer served here", live.name);
      drop(slot);
      return block.status();
    }
    if (block.code() == StatusCode::refused) {  // no number left below 2^63 in etcd
      shared_reachable_ = true;
      live.confirmed_mono_ns = sent_ns;
      mark_exhausted(slot);
      return block.status();
    }
    shared_reachable_ = block.code() != StatusCode::unavailable;
    shared_failures_.fetch_add(1, std::memory_order_relaxed);
    live.retry_at = Clock::now() + options_.shared_retry;
    if (block.code() == StatusCode::unavailable) shared_retry_at_ = live.retry_at;
    if (live.reserve_failures++ % 64 == 0) {
      log_warn("sequence {}: no block from etcd ({} failures so far): {}; serving what is held, then RETRY",
               live.name, live.reserve_failures, block.message());
    }
    return block.status();
  }
  shared_reachable_ = true;
  live.confirmed_mono_ns = sent_ns;  // the reservation read the same incarnation
  live.last_reserve_ns = elapsed_ns(began);
  live.cursor = block->first;  // other nodes' blocks lie between this node's
  live.upper = block->end;
  live.block_started = Clock::now();
  ++live.blocks;
  // A line a block (they grow to 2^26 numbers, so a few a minute under load): which numbers
  // this node may hand out, and since when, for whoever checks them against etcd's history.
  log_info("sequence {}: block [{}, {}) granted by etcd", live.name, block->first, block->end);
  return {};
}

// Serves what the shared store lists, and nothing else: a name deleted (or deleted and made
// again: a new incarnation) is dropped with its queued sub-blocks.
void SequenceManager::sync_shared() {
  next_sync_ = Clock::now() + options_.sync_period;
  const std::uint64_t sent_ns = clock_.mono_ns();
  Result<std::vector<SharedSequences::Listed>> listed = shared_->list();
  if (!listed.ok()) {
    shared_reachable_ = listed.code() != StatusCode::unavailable;
    shared_failures_.fetch_add(1, std::memory_order_relaxed);
    if (sync_failures_++ % 16 == 0) {
      log_warn("sequences: cannot list them in etcd ({} failures so far): {}", sync_failures_,
               listed.message());
    }
    return;
  }
  shared_reachable_ = true;
  if (listed->size() >= SharedSequences::list_max && sync_failures_++ % 16 == 0) {
    log_warn("sequences: etcd lists {} or more; those beyond are not served here", listed->size());
  }
  for (std::size_t slot = 0; slot < core::sequences_max; ++slot) {
    if (!live_[slot].active) continue;
    const bool kept = std::any_of(listed->begin(), listed->end(), [&](const SharedSequences::Listed& l) {
      return l.name == live_[slot].name && l.incarnation == live_[slot].incarnation;
    });
    if (!kept) {
      log_info("sequence {} was deleted in etcd: no longer served here", live_[slot].name);
      drop(slot);
    } else {
      live_[slot].confirmed_mono_ns = sent_ns;
    }
  }
  for (const SharedSequences::Listed& entry : *listed) {
    if (!find(entry.name) && proto::valid_seq_name(entry.name)) adopt(entry, sent_ns);
    const auto slot = find(entry.name);
    if (slot && entry.mode == core::SeqMode::monotonic) settle_owner(*slot, entry);
  }
}

// Monotonic: own it (claim it when nobody does), or answer NOT_OWNER naming the owner.
void SequenceManager::settle_owner(std::size_t slot, const SharedSequences::Listed& listed) {
  Live& live = live_[slot];
  const std::optional<Holder> holder = holder_ ? holder_() : std::nullopt;
  // Ours only under the lease held now: a key left by an earlier lease of this node is not.
  bool ours = holder && listed.owner_tag == shared_->tag() && listed.owner_node == holder->node_id &&
              listed.owner_lease == holder->lease_id;
  if (!listed.owner_node && holder) {
    Result<bool> claimed =
        shared_->claim_owner(live.name, live.incarnation, holder->node_id, holder->lease_id);
    ours = claimed.ok() && *claimed;
  }
  if (!ours) {
    // A key naming this node id under an earlier lease or start (this process restarted inside
    // the lease TTL) sends no client anywhere useful: they would come back here. "No owner
    // known" until it expires, so clients wait instead of giving up.
    const bool names_me = holder && listed.owner_node == holder->node_id;
    lose_owner(slot,
               names_me ? proto::not_owner_unknown : listed.owner_node.value_or(proto::not_owner_unknown));
    return;
  }
  // Owned under an earlier lease (it expired, e.g. while this process was paused, and the name
  // may have had another owner since): that ownership ends here, so the new one starts with a
  // fresh block above everything reserved, never from the old published limit.
  if (live.owned && live.owned_as != holder) lose_owner(slot, proto::not_owner_unknown);
  if (!live.owned)
    log_info("sequence {} (monotonic): owned by this node (node id {})", live.name, holder->node_id);
  live.owned = true;
  live.owned_as = holder;
}

void SequenceManager::lose_owner(std::size_t slot, std::uint32_t owner) {
  Live& live = live_[slot];
  if (live.owned) log_info("sequence {} (monotonic): no longer owned by this node", live.name);
  live.owned = false;
  live.serving = false;
  live.owned_as.reset();
  live.owner_node = owner;
  table_.set_not_owner(slot, owner);
}

// The owner publishes only blocks that continue its last one; its first block is above every
// block any node reserved before (the old owner's bound included).
void SequenceManager::refill_monotonic_shared(std::size_t slot, const std::optional<Holder>& holder) {
  Live& live = live_[slot];
  if (!live.owned || !holder) return;
  // The lease's deadline, moved forward by each renewal; before take_ownership() below, so the
  // workers never see this node as the owner without it.
  publish_deadline(slot, holder);
  if (live.exhausted) {
    // Owned, nothing left to reserve: answer EXHAUSTED here, not NOT_OWNER (a new owner that
    // found the name at 2^63 has published nothing; its workers see a limit already reached).
    if (!live.serving) {
      table_.take_ownership(slot, core::seq_value_limit);
      live.serving = true;
    }
    return;
  }
  const std::uint64_t next = table_.monotonic_next(slot);
  if (live.serving && live.upper - std::min(next, live.upper) > live.step / 2) return;
  const std::uint64_t before = live.upper;
  if (!reserve(slot).ok()) return;  // adapts the step, then reserve_shared()
  if (!live.serving) {
    table_.take_ownership(slot, live.cursor);
    live.serving = true;
  } else if (live.cursor != before) {
    log_warn("sequence {} (monotonic): another node reserved [{}, {}): stepping down", live.name, before,
             live.cursor);
    lose_owner(slot, proto::not_owner_unknown);
    return;
  }
  table_.raise_limit(slot, live.upper);
}

// A sequence found in the shared store: served from the first block reserved for it.
void SequenceManager::adopt(const SharedSequences::Listed& listed, std::uint64_t listed_mono_ns) {
  std::size_t slot = 0;
  while (slot < core::sequences_max && live_[slot].active) ++slot;
  if (slot == core::sequences_max) {
    if (!table_full_logged_) log_warn("sequence {} is in etcd but this node's table is full", listed.name);
    table_full_logged_ = true;
    return;
  }
  Live& live = live_[slot];
  live = Live{};
  live.active = true;
  live.name = listed.name;
  live.incarnation = listed.incarnation;
  live.confirmed_mono_ns = listed_mono_ns;
  live.step = options_.step_initial;
  live.mode = listed.mode;
  table_.create_at(slot, live.name, live.mode, next_generation_++);
  publish_deadline(slot, std::nullopt);  // before any sub-block is queued
  if (live.mode == core::SeqMode::monotonic) table_.set_not_owner(slot, proto::not_owner_unknown);
  log_info("sequence {} ({}, etcd): served here from the blocks etcd grants this node", live.name,
           core::to_string(live.mode));
}

void SequenceManager::mark_exhausted(std::size_t slot) {
  Live& live = live_[slot];
  if (live.exhausted) return;
  live.exhausted = true;
  table_.set_exhausted(slot);
  log_warn(
      "sequence {}: its numbers have reached 2^63 - 1, no block can be reserved again: GET_SEQ answers "
      "EXHAUSTED once the numbers held are gone; use another name",
      live.name);
  publish_exhausted();
}

void SequenceManager::publish_exhausted() {
  std::vector<std::string> names;
  for (const Live& live : live_) {
    if (live.active && live.exhausted) names.push_back(live.name);
  }
  std::lock_guard lock(exhausted_mutex_);
  exhausted_names_ = std::move(names);
}

std::vector<std::string> SequenceManager::exhausted() const {
  std::lock_guard lock(exhausted_mutex_);
  return exhausted_names_;
}

std::string SequenceManager::metrics_text() const {
  const std::vector<std::string> names = exhausted();
  std::string out =
      "# HELP flurry_seq_exhausted_sequences Named sequences whose numbers have reached 2^63 - 1: no block "
      "can be reserved again, GET_SEQ answers EXHAUSTED once the numbers held are gone.\n"
      "# TYPE flurry_seq_exhausted_sequences gauge\nflurry_seq_exhausted_sequences " +
      std::to_string(names.size()) +
      "\n# HELP flurry_seq_exhausted 1 for each exhausted named sequence (none listed: none is).\n"
      "# TYPE flurry_seq_exhausted gauge\n";
  for (const std::string& name : names) out += "flurry_seq_exhausted{sequence=\"" + name + "\"} 1\n";
  if (!shared_) return out;
  return out +
         "# HELP flurry_seq_etcd_reachable 1 when etcd answered this node's last sequence listing or block "
         "reservation (0: sequences are served from the blocks held, then RETRY).\n"
         "# TYPE flurry_seq_etcd_reachable gauge\n"
         "flurry_seq_etcd_reachable " +
         std::to_string(shared_reachable_.load() ? 1 : 0) +
         "\n# HELP flurry_seq_etcd_failures_total Sequence listings and block reservations in etcd that "
         "failed.\n"
         "# TYPE flurry_seq_etcd_failures_total counter\nflurry_seq_etcd_failures_total " +
         std::to_string(shared_failures_.load()) + "\n";
}

void SequenceManager::drop(std::size_t slot) {
  const bool was_exhausted = live_[slot].exhausted;
  table_.remove(slot);
  live_[slot] = Live{};
  if (was_exhausted) publish_exhausted();
}

nlohmann::json SequenceManager::describe(std::size_t slot) const {
  const Live& live = live_[slot];
  nlohmann::json out = {{"name", live.name},
                        {"mode", core::to_string(live.mode)},
                        {"start", live.start},
                        {"durable_upper", live.upper},
                        {"handed_out_below", live.cursor},
                        {"step", live.step},
                        {"blocks_reserved", live.blocks},
                        {"reserve_failures", live.reserve_failures},
                        {"last_reserve_us", live.last_reserve_ns / 1000},
                        {"exhausted", live.exhausted},
                        {"store", shared_ ? "etcd" : "local"}};
  if (shared_) {
    out["etcd_reachable"] = shared_reachable_.load();
    out["incarnation"] = live.incarnation;
    // Past it this node serves none of it (etcd unconfirmed too long, or the owner's lease).
    out["serve_until_unix_ms"] = table_.serve_until(slot);
  }
  if (live.mode == core::SeqMode::monotonic) {
    out["next"] = table_.monotonic_next(slot);
    if (!shared_ || live.owned) {
      out["owner"] = "this node";
    } else {
      out["owner"] = live.owner_node == proto::not_owner_unknown ? nlohmann::json(nullptr)
                                                                 : nlohmann::json(live.owner_node);
    }
  }
  return out;
}

Result<nlohmann::json> SequenceManager::list() const {
  Result<Lock> lock = lock_for_command();
  if (!lock.ok()) return lock.status();
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t slot = 0; slot < core::sequences_max; ++slot) {
    if (live_[slot].active) out.push_back(describe(slot));
  }
  return out;
}

Result<nlohmann::json> SequenceManager::show(const std::string& name) const {
  Result<Lock> lock = lock_for_command();
  if (!lock.ok()) return lock.status();
  const auto slot = find(name);
  if (!slot && !shared_) {
    if (const auto deleted = find_tombstone(name)) {
      return Error{"no sequence '" + name + "': deleted, its floor is " +
                       std::to_string(store_.tombstone(*deleted)->upper) +
                       " (created again, it starts at or above it)",
                   StatusCode::not_found};
    }
  }
  if (!slot) return Error{"no sequence '" + name.substr(0, 64) + "' (flurryctl seq list)"};
  return describe(*slot);
}

Status SequenceManager::command(const nlohmann::json& request, nlohmann::json* reply) {
  const std::string op = request.value("op", std::string());
  const std::string name = request.value("name", std::string());
  if (op == "list") {
    Result<nlohmann::json> listed = list();
    if (!listed.ok()) return listed.status();
    *reply = {{"sequences", *listed}};
    if (!shared_) {
      Result<Lock> lock = lock_for_command();
      if (!lock.ok()) return lock.status();
      nlohmann::json deleted = nlohmann::json::array();
      for (std::size_t slot = 0; slot < core::sequences_max; ++slot) {
        const auto& tombstone = store_.tombstone(slot);
        if (tombstone && !live_[slot].active)
          deleted.push_back({{"name", tombstone->name}, {"floor", tombstone->upper}});
      }
      (*reply)["deleted"] = deleted;  // names whose floors are kept (local mode)
    }
    return {};
  }
  if (op == "show") {
    Result<nlohmann::json> shown = show(name);
    if (!shown.ok()) return shown.status();
    *reply = {{"sequence", *shown}};
    return {};
  }
  if (op == "delete") return remove(name);
  if (op == "create") {
    const std::string mode_text = request.value("mode", std::string("segment"));
    const auto mode = core::parse_seq_mode(mode_text);
    if (!mode) return Error{"--mode must be segment or monotonic, not '" + mode_text.substr(0, 32) + "'"};
    const nlohmann::json& start = request.contains("start") ? request["start"] : nlohmann::json(0);
    if (!start.is_number_unsigned() && !(start.is_number_integer() && start.get<std::int64_t>() >= 0)) {
      return Error{"--start must be a number from 0 to 2^63 - 1"};
    }
    if (Status created = create(name, start.get<std::uint64_t>(), *mode); !created.ok()) return created;
    Result<nlohmann::json> shown = show(name);
    if (shown.ok()) *reply = {{"sequence", *shown}};
    return {};
  }
  return Error{"seq: op must be create, delete, list or show"};
}

}  // namespace flurry::control
