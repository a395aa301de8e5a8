// control/keys_file.h — the authentication key file (--key-file, TOML) into a core::KeyTable.
//
//   [[key]]
//   name = "billing"                   # 1..64 of [A-Za-z0-9_.-], unique
//   id = 7                             # 1..2^32-1, unique; the id clients put in the trailer
//   secret = "000102030405060708090a0b0c0d0e0f"   # 16 bytes, 32 hex digits
//   opcodes = ["get_ids", "info"]      # of get_ids, info, get_seq (default get_ids, info);
//                                      # PING is always allowed to a known key
//   sequences = ["orders"]             # GET_SEQ names allowed ("*": every name; default none)
//   batch_max = 100000                 # largest GET_IDS count, 1..1048576 (default 1048576)
//   seq_batch_max = 1000               # largest GET_SEQ count, 1..1048576 (default 1048576);
//                                      # batch_max does not apply to GET_SEQ
//   rate_per_s = 1000                  # token bucket per worker, 0 = unlimited (default 0)
//   answer_bytes_max = 0               # answers up to this size regardless of the request's
//                                      # size (0: the 3x rule only), 0..1472
//   door_password_hash = "$argon2id$v=19$m=1024,t=2,p=1$..."   # optional: the key's password at
//                                      # the RESP and HTTP doors (AUTH, bearer token), a libsodium
//                                      # crypto_pwhash_str hash (flurryctl keys hash-password);
//                                      # never the MAC secret. Without it the key has no door login.
//
// The file is opened once, O_NOFOLLOW | O_CLOEXEC (a symlink is refused), checked on that
// descriptor (fstat: a regular file owned by flurryd's uid or root, mode 0600 or stricter: no
// group or other bits) and read from it, so the file checked is the file read. Any other file is
// refused, naming the fix. At most key_slots_max keys; errors name the key and the field.
// Secrets never leave this file's parser except into the KeyTable.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/keys.h"

namespace flurry::control {

// Key id -> its counter slot (core/keys.h): a reload keeps each key id's slot; a new id takes a
// free slot. A removed key's slot is freed by the load that drops it and given to another key
// id only once no worker can still hold a table naming the old key (release_retired(), when
// KeyTableSlot::reclaim() left nothing retired); never-used slots go first. Each assignment of a
// slot has its own generation (Key::generation), so the per-slot state that outlives a key in
// the workers (token buckets, per-key counters) is started afresh for the next key, never
// carried over. So keys rotate without limit over a process's life: at most key_slots_max at once.
class KeySlots {
 public:
  // Assigns slots to every key of a valid file (ids and generations), frees the slots of the
  // ids it no longer holds. Fails, assigning nothing, when no slot is free.
  Status assign(std::vector<core::Key>& keys);
  // The slots freed by earlier assign() calls may go to other ids: call when no worker holds
  // a table older than the current one (KeyTableSlot::reclaim() returned 0).
  void release_retired();
  std::size_t used() const { return slots_.size(); }

 private:
  struct Held {
    std::uint32_t slot = 0;
    std::uint64_t generation = 0;
  };
  std::map<std::uint32_t, Held> slots_;  // key id -> its slot
  std::vector<std::uint32_t> free_;      // slots no table names any more
  std::vector<std::uint32_t> retiring_;  // freed slots an old table may still name
  std::uint32_t next_slot_ = 0;          // never used from here on
  std::uint64_t next_generation_ = 1;
};

// The door password (docs/authentication.md, "The front doors"): what hash_door_password
// makes, and the most a key file's hash may cost a login (each AUTH is one verification on the
// door's thread).
inline constexpr std::uint32_t door_hash_passes = 2;         // argon2id t
inline constexpr std::uint32_t door_hash_memory_kib = 1024;  // argon2id m
inline constexpr std::uint32_t door_hash_passes_max = 8;
inline constexpr std::uint32_t door_hash_memory_max_kib = 16 * 1024;
inline constexpr std::size_t door_password_min = 16, door_password_max = 256;
// A door_password_hash as the key file takes it: argon2id, its cost within the bounds above.
Status check_door_password_hash(std::string_view hash);
// `flurryctl keys hash-password`: the crypto_pwhash_str hash of `password` (16..256 printable
// ASCII characters, no space).
Result<std::string> hash_door_password(std::string_view password);
// crypto_pwhash_str_verify: whether `password` is the one `hash` was made of. One argon2id run.
bool verify_door_password(const std::string& hash, std::string_view password);

// Opens, checks and parses the file; slots are assigned only when the whole file is valid.
Result<std::unique_ptr<core::KeyTable>> load_key_file(const std::string& path, KeySlots& slots);

// `flurryctl keys list`: name, id, slot, permissions and limits of every key; never a secret.
nlohmann::json keys_json(const core::KeyTable* table);

}  // namespace flurry::control
