// dataplane/door_auth.cc — see door_auth.h.
#include "dataplane/door_auth.h"

#include <cctype>

namespace flurry::dataplane {

namespace {

constexpr std::uint32_t opcode_get_seq = 4;  // control/keys_file.cc's bit for get_seq

// The key counters' index of an auth refusal (core::KeyCounters::rejected).
std::size_t rejected_index(proto::RequestError error) { return static_cast<std::size_t>(error) - 32; }

}  // namespace

bool split_door_token(std::string_view token, std::string_view* name, std::string_view* password) {
  const std::size_t colon = token.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == token.size()) return false;
  *name = token.substr(0, colon);
  *password = token.substr(colon + 1);
  return true;
}

std::string_view bearer_token(std::string_view header) {
  constexpr std::string_view scheme = "bearer";
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  if (header.size() <= scheme.size()) return {};
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != scheme[i]) return {};
  }
  header.remove_prefix(scheme.size());
  if (header.front() != ' ') return {};
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  while (!header.empty() && header.back() == ' ') header.remove_suffix(1);
  return header;
}

DoorAuth::DoorAuth(core::AuthMode mode, VerifyPassword verify, core::Shared& shared, std::uint32_t core)
    : mode_(mode), verify_(verify), shared_(shared), core_(core), stats_(shared.stats[core]) {}

std::string DoorAuth::login(DoorSession& session, std::string_view name, std::string_view password) {
  if (mode_ == core::AuthMode::off) {
    return "this flurryd runs --auth off: its doors take no credentials (log in to none)";
  }
  const core::KeyTable* table = shared_.keys.load();
  const core::Key* key = table == nullptr ? nullptr : table->find_name(name);
  if (key != nullptr) counters(*key).requests.add();
  // Key names are no secret (the metrics show them); a wrong password costs one verification.
  const bool verified = key != nullptr && !key->door_password_hash.empty() && verify_ != nullptr &&
                        verify_(key->door_password_hash, password);
  if (!verified) {
    if (key != nullptr) counters(*key).rejected[rejected_index(proto::RequestError::bad_mac)].add();
    session.end();
    return "wrong key name or door password (or the key has no door_password_hash)";
  }
  session.key_id = key->id;
  session.generation = key->generation;
  session.door_tag = key->door_tag;
  return {};
}

const core::Key* DoorAuth::key_of(const DoorSession& session) const {
  const core::KeyTable* table = shared_.keys.load();
  const core::Key* key = table == nullptr ? nullptr : table->find(session.key_id);
  if (key == nullptr || key->generation != session.generation || key->door_tag != session.door_tag) {
    return nullptr;
  }
  return key;
}

std::string_view DoorAuth::key_name(const DoorSession& session) const {
  const core::Key* key = session.logged_in() ? key_of(session) : nullptr;
  return key == nullptr ? std::string_view{} : std::string_view(key->name);
}

DoorVerdict DoorAuth::admit(DoorSession& session, DoorUse use, std::uint32_t count, std::string_view sequence,
                            std::uint64_t now_ms, const core::Key** key_out) {
  *key_out = nullptr;
  if (!session.logged_in()) return required() ? DoorVerdict::login_needed : DoorVerdict::served;
  const core::Key* key = key_of(session);
  if (key == nullptr) {
    session.end();
    return DoorVerdict::session_ended;
  }
  core::KeyCounters& counted = counters(*key);
  counted.requests.add();
  bool permitted = true;
  switch (use) {
    case DoorUse::ids:
      permitted = key->allows_opcode(proto::Opcode::get_ids) && count <= key->batch_max;
      break;
    case DoorUse::seq:
      permitted = (key->opcodes & (1U << opcode_get_seq)) != 0 && count <= key->seq_batch_max &&
                  key->allows_sequence(sequence);
      break;
    case DoorUse::info:
      permitted = key->allows_opcode(proto::Opcode::info);
      break;
    case DoorUse::other:
      break;
  }
  if (!permitted) {
    counted.rejected[rejected_index(proto::RequestError::not_permitted)].add();
    return DoorVerdict::not_permitted;
  }
  if (!buckets_[key->slot].take(*key, now_ms)) {
    counted.rejected[rejected_index(proto::RequestError::rate_limited)].add();
    return DoorVerdict::rate_limited;
  }
  *key_out = key;
  return DoorVerdict::served;
}

void DoorAuth::count_issued(const core::Key* key, std::uint64_t n) {
  if (key != nullptr && n != 0) counters(*key).ids.add(n);
}

// As Handler's: the slot's previous key's counts are not this key's (core/handler.h KeyCounters).
core::KeyCounters& DoorAuth::counters(const core::Key& key) {
  core::KeyCounters& counters = stats_.keys[key.slot];
  if (counters.generation.load(std::memory_order_relaxed) != key.generation) {
    counters.requests.reset();
    counters.ids.reset();
    for (Counter& rejected : counters.rejected) rejected.reset();
    counters.generation.store(key.generation, std::memory_order_release);
  }
  return counters;
}

}  // namespace flurry::dataplane
