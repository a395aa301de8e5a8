// control/keys_file.cc — see keys_file.h.
#include "control/keys_file.h"

#include <fmt/format.h>
#include <sodium.h>

#include <toml++/toml.h>
#include <array>
#include <charconv>
#include <functional>
#include <set>

#include "control/private_file.h"

namespace flurry::control {
namespace {

constexpr std::pair<std::string_view, proto::Opcode> opcode_names[] = {
    {"get_ids", proto::Opcode::get_ids},
    {"info", proto::Opcode::info},
};
constexpr std::uint32_t opcode_get_seq = 4;  // named sequences (GET_SEQ), when the server has them

// The key file, read as control/private_file.h says (opened once without following a
// symlink, owner and mode checked on the descriptor).
Result<std::string> read_key_file(const std::string& path) {
  return read_private_file(path, PrivateFile{"key file", "--key-file", "its keys", 4U << 20});
}

// libsodium's hex decoder: exactly 32 hex digits, nothing around them.
Result<proto::MacKey> parse_secret(const std::string& hex) {
  proto::MacKey key{};
  std::size_t size = 0;
  const char* hex_end = nullptr;
  if (hex.size() != 2 * key.size() ||
      sodium_hex2bin(key.data(), key.size(), hex.data(), hex.size(), nullptr, &size, &hex_end) != 0 ||
      size != key.size() || hex_end != hex.data() + hex.size()) {
    return Error{"secret must be 32 hex digits (16 bytes)"};
  }
  return key;
}

// "m=1024,t=2,p=1" -> the three numbers; false when the text is not that.
bool argon2_parameters(std::string_view text, std::uint64_t* m, std::uint64_t* t, std::uint64_t* p) {
  std::uint64_t* const out[] = {m, t, p};
  const char* const names[] = {"m=", "t=", "p="};
  for (int i = 0; i < 3; ++i) {
    if (text.substr(0, 2) != names[i]) return false;
    text.remove_prefix(2);
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out[i]);
    if (ec != std::errc() || end == text.data()) return false;
    text.remove_prefix(static_cast<std::size_t>(end - text.data()));
    if (i < 2) {
      if (text.empty() || text.front() != ',') return false;
      text.remove_prefix(1);
    }
  }
  return text.empty();
}

Result<std::uint32_t> number(const toml::table& entry, const char* field, std::int64_t min, std::int64_t max,
                             std::int64_t fallback) {
  const toml::node* node = entry.get(field);
  if (node == nullptr) return static_cast<std::uint32_t>(fallback);
  const auto value = node->value<std::int64_t>();
  if (!value || *value < min || *value > max)
    return Error{fmt::format("{} must be a whole number in {}..{}", field, min, max)};
  return static_cast<std::uint32_t>(*value);
}

Result<std::vector<std::string>> strings(const toml::table& entry, const char* field) {
  std::vector<std::string> out;
  const toml::node* node = entry.get(field);
  if (node == nullptr) return out;
  const toml::array* array = node->as_array();
  if (array == nullptr) return Error{fmt::format("{} must be an array of strings", field)};
  for (const toml::node& item : *array) {
    const auto text = item.value<std::string>();
    if (!text || text->empty() || text->size() > 64)
      return Error{fmt::format("{} must hold strings of 1..64 characters", field)};
    out.push_back(*text);
  }
  return out;
}

Result<std::uint32_t> opcodes_of(const toml::table& entry) {
  if (entry.get("opcodes") == nullptr) return (1U << 1) | (1U << 3);
  Result<std::vector<std::string>> names = strings(entry, "opcodes");
  if (!names.ok()) return names.status();
  std::uint32_t mask = 0;
  for (const std::string& name : *names) {
    std::uint32_t bit = name == "get_seq" ? opcode_get_seq : 0;
    for (const auto& [known, opcode] : opcode_names) {
      if (name == known) bit = static_cast<std::uint32_t>(opcode);
    }
    if (bit == 0) return Error{fmt::format("opcodes: '{}' is not one of get_ids, info, get_seq", name)};
    mask |= 1U << bit;
  }
  return mask;
}

Result<core::Key> parse_key(const toml::table& entry) {
  core::Key key;
  const auto name = entry["name"].value<std::string>();
  if (!name || name->empty() || name->size() > 64 ||
      name->find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") !=
          std::string::npos) {
    return Error{"name must be 1..64 of A-Z a-z 0-9 _ . -"};
  }
  key.name = *name;
  Result<std::uint32_t> id = number(entry, "id", 1, 0xffffffffLL, 0);
  if (!id.ok() || *id == 0) return Error{"id must be a whole number in 1..4294967295"};
  key.id = *id;
  const auto secret = entry["secret"].value<std::string>();
  if (!secret) return Error{"secret is missing (32 hex digits)"};
  Result<proto::MacKey> parsed = parse_secret(*secret);
  if (!parsed.ok()) return parsed.status();
  key.secret = *parsed;
  Result<std::uint32_t> opcodes = opcodes_of(entry);
  Result<std::vector<std::string>> sequences = strings(entry, "sequences");
  Result<std::uint32_t> batch_max = number(entry, "batch_max", 1, proto::count_max, proto::count_max);
  Result<std::uint32_t> seq_batch_max = number(entry, "seq_batch_max", 1, proto::count_max, proto::count_max);
  Result<std::uint32_t> rate = number(entry, "rate_per_s", 0, core::key_rate_max, 0);
  Result<std::uint32_t> answer = number(entry, "answer_bytes_max", 0, proto::datagram_size_max, 0);
  if (!opcodes.ok()) return opcodes.status();
  if (!sequences.ok()) return sequences.status();
  if (!batch_max.ok()) return batch_max.status();
  if (!seq_batch_max.ok()) return seq_batch_max.status();
  if (!rate.ok()) return rate.status();
  if (!answer.ok()) return answer.status();
  if (sequences->size() > core::key_sequences_max)
    return Error{fmt::format("sequences: at most {} names", core::key_sequences_max)};
  key.opcodes = *opcodes;
  key.sequences = *sequences;
  key.batch_max = *batch_max;
  key.seq_batch_max = *seq_batch_max;
  key.rate_per_s = *rate;
  key.answer_bytes_max = *answer;
  if (const toml::node* door = entry.get("door_password_hash"); door != nullptr) {
    const auto hash = door->value<std::string>();
    if (!hash) return Error{"door_password_hash must be a string (flurryctl keys hash-password prints one)"};
    if (Status checked = check_door_password_hash(*hash); !checked.ok()) return checked;
    key.door_password_hash = *hash;
    key.door_tag = std::hash<std::string>{}(*hash) | 1;  // never 0: 0 is "no session"
  }
  return key;
}

}  // namespace

Status check_door_password_hash(std::string_view hash) {
  constexpr std::string_view how = " (make one with: flurryctl keys hash-password < password-file)";
  // $argon2id$v=19$m=M,t=T,p=P$SALT$HASH, as crypto_pwhash_str writes it.
  constexpr std::string_view prefix = "$argon2id$v=19$";
  if (hash.size() >= crypto_pwhash_STRBYTES || hash.substr(0, prefix.size()) != prefix) {
    return Error{fmt::format("door_password_hash must be an argon2id hash from crypto_pwhash_str{}", how)};
  }
  const std::string_view rest = hash.substr(prefix.size());
  const std::size_t end = rest.find('$');
  std::uint64_t m = 0, t = 0, p = 0;
  if (end == std::string_view::npos || !argon2_parameters(rest.substr(0, end), &m, &t, &p) ||
      rest.find('$', end + 1) == std::string_view::npos) {
    return Error{fmt::format("door_password_hash is not a whole argon2id hash{}", how)};
  }
  // Every AUTH runs one verification on the door's one thread, with m KiB of memory: bounded
  // so that a key file cannot make each login stall the door (or take a GiB).
  if (m > door_hash_memory_max_kib || t > door_hash_passes_max || p != 1) {
    return Error{
        fmt::format("door_password_hash's cost m={},t={},p={} is above the door's bound "
                    "(m <= {} KiB, t <= {}, p = 1: every AUTH runs it on the door's one thread){}",
                    m, t, p, door_hash_memory_max_kib, door_hash_passes_max, how)};
  }
  return {};
}

Result<std::string> hash_door_password(std::string_view password) {
  if (password.size() < door_password_min || password.size() > door_password_max) {
    return Error{
        fmt::format("a door password is {} to {} characters (a random one: head -c 18 "
                    "/dev/urandom | base64)",
                    door_password_min, door_password_max)};
  }
  for (const char c : password) {
    if (c <= ' ' || c > '~') {
      return Error{
          "a door password is printable ASCII without spaces (it travels in AUTH and in an "
          "HTTP header)"};
    }
  }
  if (sodium_init() < 0) return Error{"libsodium did not initialize"};
  std::array<char, crypto_pwhash_STRBYTES> out{};
  if (crypto_pwhash_str(out.data(), password.data(), password.size(), door_hash_passes,
                        std::size_t{door_hash_memory_kib} * 1024) != 0) {
    return Error{"crypto_pwhash_str failed (out of memory?)"};
  }
  return std::string(out.data());
}

bool verify_door_password(const std::string& hash, std::string_view password) {
  if (hash.empty() || password.size() > door_password_max) return false;
  return crypto_pwhash_str_verify(hash.c_str(), password.data(), password.size()) == 0;
}

Status KeySlots::assign(std::vector<core::Key>& keys) {
  std::set<std::uint32_t> wanted;
  std::size_t new_ids = 0;
  for (const core::Key& key : keys) {
    wanted.insert(key.id);
    if (slots_.find(key.id) == slots_.end()) ++new_ids;
  }
  // Slots a new id may take now: never used, or freed and released.
  const std::size_t never_used = core::key_slots_max - next_slot_;
  if (new_ids > never_used + free_.size()) {
    return Error{
        fmt::format("{} new key ids, but {} counter slots are free ({} are held by the keys loaded now, {} "
                    "by keys removed "
                    "so recently that a worker may still use them: reload again in a moment)",
                    new_ids, never_used + free_.size(), slots_.size(), retiring_.size())};
  }
  // Ids no longer in the file free their slots (given to others once released).
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (wanted.count(it->first) == 0) {
      retiring_.push_back(it->second.slot);
      it = slots_.erase(it);
    } else {
      ++it;
    }
  }
  for (core::Key& key : keys) {
    auto found = slots_.find(key.id);
    if (found == slots_.end()) {
      std::uint32_t slot = 0;
      if (next_slot_ < core::key_slots_max) {
        slot = next_slot_++;
      } else {
        slot = free_.back();
        free_.pop_back();
      }
      found = slots_.emplace(key.id, Held{slot, next_generation_++}).first;
    }
    key.slot = found->second.slot;
    key.generation = found->second.generation;
  }
  return {};
}

void KeySlots::release_retired() {
  free_.insert(free_.end(), retiring_.begin(), retiring_.end());
  retiring_.clear();
}

Result<std::unique_ptr<core::KeyTable>> load_key_file(const std::string& path, KeySlots& slots) {
  Result<std::string> text = read_key_file(path);
  if (!text.ok()) return text.status();
  toml::table file;
  try {
    file = toml::parse(*text, path);
  } catch (const toml::parse_error& error) {
    return Error{
        fmt::format("key file {}: {} (line {})", path, error.description(), error.source().begin.line)};
  }
  const toml::array* entries = file["key"].as_array();
  if (entries == nullptr) return Error{fmt::format("key file {}: no [[key]] entries", path)};
  if (entries->size() > core::key_slots_max)
    return Error{fmt::format("key file {}: more than {} keys", path, core::key_slots_max)};
  std::vector<core::Key> keys;
  std::set<std::uint32_t> ids;
  std::set<std::string> names;
  for (std::size_t i = 0; i < entries->size(); ++i) {
    const toml::table* entry = (*entries)[i].as_table();
    Result<core::Key> key = entry == nullptr ? Result<core::Key>(Error{"not a table"}) : parse_key(*entry);
    if (!key.ok()) return Error{fmt::format("key file {}: key #{}: {}", path, i + 1, key.message())};
    if (!ids.insert(key->id).second || !names.insert(key->name).second) {
      return Error{fmt::format("key file {}: key #{} ({}): id {} or name repeats an earlier key", path, i + 1,
                               key->name, key->id)};
    }
    keys.push_back(std::move(key).value());
  }
  if (Status assigned = slots.assign(keys); !assigned.ok()) {
    return Error{fmt::format("key file {}: {}", path, assigned.message())};
  }
  return std::make_unique<core::KeyTable>(std::move(keys));
}

nlohmann::json keys_json(const core::KeyTable* table) {
  nlohmann::json keys = nlohmann::json::array();
  if (table == nullptr) return keys;
  for (const core::Key& key : table->keys()) {
    nlohmann::json opcodes = nlohmann::json::array();
    for (const auto& [name, opcode] : opcode_names) {
      if (key.allows_opcode(opcode)) opcodes.push_back(name);
    }
    if ((key.opcodes & (1U << opcode_get_seq)) != 0) opcodes.push_back("get_seq");
    keys.push_back({{"name", key.name},
                    {"id", key.id},
                    {"slot", key.slot},
                    {"opcodes", opcodes},
                    {"sequences", key.sequences},
                    {"batch_max", key.batch_max},
                    {"seq_batch_max", key.seq_batch_max},
                    {"rate_per_s", key.rate_per_s},
                    {"answer_bytes_max", key.answer_bytes_max},
                    {"door_password", !key.door_password_hash.empty()}});
  }
  return keys;
}

}  // namespace flurry::control
