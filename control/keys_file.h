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
//
// The file must be a regular file of mode 0600 or stricter (no group or other bits): one that
// others can read is refused, naming the fix. At most key_slots_max keys; errors name the key
// and the field. Secrets never leave this file's parser except into the KeyTable.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "core/keys.h"

namespace flurry::control {

// Key id -> its counter slot, stable while flurryd runs (core/keys.h): a reload keeps each
// key id's slot; a new id takes the next free slot; slots are not reused for other ids.
class KeySlots {
 public:
  Result<std::uint32_t> slot_of(std::uint32_t key_id);
  std::size_t used() const { return slots_.size(); }

 private:
  std::map<std::uint32_t, std::uint32_t> slots_;
};

// Parses and checks the file; slots are assigned only when the whole file is valid.
Result<std::unique_ptr<core::KeyTable>> load_key_file(const std::string& path, KeySlots& slots);

// `flurryctl keys list`: name, id, slot, permissions and limits of every key; never a secret.
nlohmann::json keys_json(const core::KeyTable* table);

}  // namespace flurry::control
