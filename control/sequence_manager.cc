// control/sequence_manager.cc — see sequence_manager.h.
#include "control/sequence_manager.h"

#include <thread>

#include <algorithm>

#include "control/log.h"
#include "proto/wire.h"

namespace flurry::control {
namespace {

std::uint64_t elapsed_ns(SequenceManager::Clock::time_point since) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(SequenceManager::Clock::now() - since).count());
}

}  // namespace

SequenceManager::SequenceManager(core::SequenceTable& table, persist::SequenceStore& store,
                                 const SequenceOptions& options)
    : table_(table), store_(store), options_(options) {}

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
}

std::optional<std::size_t> SequenceManager::find(const std::string& name) const {
  for (std::size_t slot = 0; slot < core::sequences_max; ++slot) {
    if (live_[slot].active && live_[slot].name == name) return slot;
  }
  return std::nullopt;
}

Status SequenceManager::create(const std::string& name, std::uint64_t start, core::SeqMode mode) {
  if (!proto::valid_seq_name(name)) {
    return Error{"bad sequence name '" + name.substr(0, 64) + "': 1 to 32 characters from A-Z a-z 0-9 _ . -"};
  }
  if (start >= core::seq_value_limit) return Error{"--start must be below 2^63"};
  Result<Lock> lock = lock_for_command();
  if (!lock.ok()) return lock.status();
  if (find(name)) return Error{"sequence '" + name + "' exists already (flurryctl seq show " + name + ")"};
  std::size_t slot = 0;
  while (slot < core::sequences_max && live_[slot].active) ++slot;
  if (slot == core::sequences_max) {
    return Error{"the sequence table is full (" + std::to_string(core::sequences_max) +
                 "); delete one first"};
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
  const auto slot = find(name);
  if (!slot) return Error{"no sequence '" + name.substr(0, 64) + "' (flurryctl seq list)"};
  Live& live = live_[*slot];
  persist::SequenceRecord record{false, static_cast<std::uint8_t>(live.mode), live.name, live.upper,
                                 live.step};
  if (Status written = store_.write(*slot, record); !written.ok()) return written;
  table_.remove(*slot);
  live = Live{};
  log_info("sequence {} deleted", name);
  return {};
}

// Makes [upper, upper + step) durable; only then may any of it be handed out.
Status SequenceManager::reserve(std::size_t slot) {
  Live& live = live_[slot];
  if (live.blocks > 0) adapt_step(live);
  const std::uint64_t room = core::seq_value_limit - live.upper;
  if (room == 0) return Error{"sequence '" + live.name + "' is exhausted (2^63)"};
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
      if (live.cursor == live.upper && !reserve(slot).ok()) return;
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
  if (live.upper - std::min(next, live.upper) <= live.step / 2) (void)reserve(slot);  // failure: logged
  if (table_.monotonic_limit(slot) < live.upper) table_.raise_limit(slot, live.upper);
  live.cursor = live.upper;
}

void SequenceManager::step() {
  std::lock_guard lock(mutex_);
  for (std::size_t slot = 0; slot < core::sequences_max; ++slot) {
    if (!live_[slot].active) continue;
    if (live_[slot].mode == core::SeqMode::segment) {
      refill_segment(slot);
    } else {
      refill_monotonic(slot);
    }
  }
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
                        {"last_reserve_us", live.last_reserve_ns / 1000}};
  if (live.mode == core::SeqMode::monotonic) {
    out["next"] = table_.monotonic_next(slot);
    out["owner"] = "this node";
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
