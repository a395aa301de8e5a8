// dataplane/door_auth.h — who a front door's caller is (--auth optional|required): the per-key
// door password (core::Key::door_password_hash) checked once when a connection logs in (RESP
// AUTH or HELLO 3 AUTH, an HTTP bearer token), then every request of that connection held to
// its key's permissions and rate as a signed UDP request is (docs/authentication.md).
//
// One DoorAuth per front end, used by its one thread only:
//   * quiesce() between event rounds (the key table's grace period, core/keys.h KeyTableSlot:
//     the front end's core slice index is its reader slot), leave() when the thread ends;
//   * login() runs the password hash's verification (one argon2id run, injected: the hash lives
//     in control/keys_file.cc) and stores the key id, generation and door_tag in the session,
//     never a pointer: a session outlives key tables;
//   * admit() before each request: under `required` nothing but a logged-in session passes;
//     a session whose key was removed, or whose door password changed since, ends (it must log
//     in again); then the key's opcodes, batch limits, sequence names and token bucket (the
//     same rule as Handler's for signed UDP, core::KeyBucket, one bucket per key slot on this
//     thread as on a worker). Requests, IDs and refusals count in the key's counters of the
//     front end's WorkerStats slot (flurryctl stats "keys", flurry_key_* metrics).
// No allocation after construction but login's (the verification's own memory).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/handler.h"
#include "core/keys.h"
#include "core/shared.h"

namespace flurry::dataplane {

// crypto_pwhash_str_verify, injected (control/keys_file.h verify_door_password).
using VerifyPassword = bool (*)(const std::string& hash, std::string_view password);

// A connection's login: empty until one succeeds.
struct DoorSession {
  std::uint32_t key_id = 0;
  std::uint64_t generation = 0;
  std::uint64_t door_tag = 0;  // 0: not logged in
  bool logged_in() const { return door_tag != 0; }
  void end() { *this = DoorSession{}; }
};

// What a request asks for, for the key's permissions.
enum class DoorUse : std::uint8_t {
  ids,    // GET_IDS: count against batch_max
  seq,    // GET_SEQ: count against seq_batch_max, the name against sequences
  info,   // INFO
  other,  // PING, HELLO, version, ...: allowed to every key (as PING is)
};

enum class DoorVerdict : std::uint8_t {
  served,         // go on (a logged-in key's, or unauthenticated under optional / off)
  login_needed,   // --auth required and not logged in
  session_ended,  // the key was removed or its door password changed: log in again
  not_permitted,  // the key may not do this (opcode, count, sequence name)
  rate_limited,   // the key's token bucket is empty
};

// "NAME:PASSWORD" (AUTH's one-argument form, the HTTP bearer token) split at its first ':'
// (a key name has none); false when there is no ':' or either side is empty.
bool split_door_token(std::string_view token, std::string_view* name, std::string_view* password);
// The token of an HTTP Authorization header "Bearer TOKEN" (scheme case-insensitive, spaces
// around the token allowed); empty when the header is not a bearer credential.
std::string_view bearer_token(std::string_view header);

class DoorAuth {
 public:
  // `core`: the front end's core slice (its KeyTableSlot reader and WorkerStats slot).
  DoorAuth(core::AuthMode mode, VerifyPassword verify, core::Shared& shared, std::uint32_t core);
  DoorAuth(const DoorAuth&) = delete;
  DoorAuth& operator=(const DoorAuth&) = delete;

  core::AuthMode mode() const { return mode_; }
  bool required() const { return mode_ == core::AuthMode::required; }

  // Between event rounds; and once the thread stops serving for good.
  void quiesce() { shared_.keys.quiesce(core_); }
  void leave() { shared_.keys.leave(core_); }

  // Checks NAME's door password (one hash verification); on success the session is NAME's
  // key's, and on failure it is ended. A wrong password counts as the key's bad_mac. Empty
  // string: logged in; otherwise the error in words.
  std::string login(DoorSession& session, std::string_view name, std::string_view password);

  // Before each request (see the file comment). `count`: IDs or numbers asked; `sequence`:
  // the name for DoorUse::seq. `*key`: the session's key when served with one (for
  // count_issued), else null. Valid until the next quiesce().
  DoorVerdict admit(DoorSession& session, DoorUse use, std::uint32_t count, std::string_view sequence,
                    std::uint64_t now_ms, const core::Key** key);
  // IDs or numbers handed out to `key` (admit's).
  void count_issued(const core::Key* key, std::uint64_t n);

  // The name of the session's key (for answers), empty when none.
  std::string_view key_name(const DoorSession& session) const;

 private:
  core::KeyCounters& counters(const core::Key& key);
  const core::Key* key_of(const DoorSession& session) const;

  core::AuthMode mode_;
  VerifyPassword verify_;
  core::Shared& shared_;
  std::uint32_t core_;
  core::WorkerStats& stats_;
  std::array<core::KeyBucket, core::key_slots_max> buckets_{};
};

}  // namespace flurry::dataplane
