// dataplane/frontend.h — the front doors (RESP, HTTP, memcached): the `Frontend` interface each one
// implements, the one factory that opens them by kind, and what they share: their
// configuration, the listening TCP socket, and one counter table each (bound to names by a
// switch, so a forgotten name does not compile quietly), plus the door's events (base/door.h:
// shed_peer, shed, idle_timeout, request_timeout) under the same counter name.
//
// A front end is one thread that owns one core slice (core::Slice: its own generator, stats
// slot and sequence sub-blocks), so it never shares a generator with a UDP worker; it issues
// through core::Slice::issue / issue_seq and writes the ranges it gets straight into its
// protocol's answer (no datagram is built or read). Adding one: a class implementing Frontend,
// a core::FrontEndKind value with its flag (control/config.cc), and its line in open_frontend().
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/counter.h"
#include "base/counter_source.h"
#include "base/door.h"
#include "base/endpoint.h"
#include "base/status.h"
#include "core/front_end_kind.h"
#include "core/shared.h"
#include "core/slice.h"
#include "dataplane/door_auth.h"

namespace flurry::dataplane {

struct FrontendConfig {
  Endpoint endpoint;             // TCP, IPv4
  core::SliceConfig slice;       // its core slice (slice.auth off: the door's own login checks keys)
  const Clock* clock = nullptr;  // its wall clock; outlives the front end
  // Connections at once and per source address (a full door, or an address at its limit,
  // closes its longest-waiting connection for a new client), and the idle and
  // incomplete-request timeouts (base/door.h).
  DoorLimits door;
  std::uint32_t ids_per_call_max = 10'000;  // FLURRY.ID n, GET /v1/ids?n=, a memcached get's keys
  std::string info;  // "key:value" lines for INFO and /v1/info (memcached: its version)
  // --auth: how the RESP, HTTP and memcached doors treat callers without a login
  // (door_auth.h), and the door password's verification (control/keys_file.h
  // verify_door_password).
  core::AuthMode auth = core::AuthMode::off;
  VerifyPassword verify_password = nullptr;
  // The HTTP door's TLS certificate (chain) and private key, PEM (--http-tls-cert, --http-tls-key,
  // read by control/private_file.h read_tls_files); both empty: plain HTTP.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // --seq-auto-create: creates an unknown sequence (durably, as flurryctl seq create) or says
  // why not; called on the front end's thread. Empty: an unknown name is refused.
  std::function<Status(const std::string& name)> create_sequence;
  // How long a sequence request waits for its numbers to reach this slice (a new sequence's
  // first sub-block, the next one of a sequence that ran dry) before TRYAGAIN: see
  // issue_seq_or_create. flurryd: --door-sequence-wait-ms.
  std::chrono::milliseconds sequence_wait{200};
};

// Why a front end answered what it answered, counted per front end.
enum class FrontendCount : std::uint8_t {
  connections_accepted,
  requests_ids,    // FLURRY.ID, GET /v1/ids, Leaf's snowflake path, memcached get/gets
  requests_seq,    // INCR, INCRBY, FLURRY.SEQ, GET /v1/seq/NAME, Leaf's segment path, incr
  requests_other,  // PING, INFO, HELLO, version, stats, ...
  ids_issued,
  seq_issued,  // numbers of named sequences handed out
  answered_unknown_sequence,
  answered_not_owner,      // a monotonic sequence another node serves
  answered_exhausted,      // a sequence with no number left
  answered_retry,          // the ceiling was reached: RETRY / 503 + Retry-After
  answered_fenced,         // the node id is lost: FENCED / 503
  bad_request,             // unknown command or path, bad argument
  protocol_error,          // malformed RESP or HTTP, a memcached line too long: the connection is closed
  logins,                  // AUTH / HELLO AUTH / a bearer token that verified
  login_failed,            // a wrong key name or door password (or one given under --auth off)
  answered_login_needed,   // --auth required and no login: -NOAUTH / 401
  answered_not_permitted,  // the key may not: -NOPERM / 403
  answered_rate_limited,   // the key's rate: -TRYAGAIN / 429
  count_,
};
std::string_view to_string(FrontendCount count);

struct FrontendCounters {
  std::array<Counter, static_cast<std::size_t>(FrontendCount::count_)> values;
  void add(FrontendCount count, std::uint64_t n = 1) { values[static_cast<std::size_t>(count)].add(n); }
  // visit(name, reason, slice core, value) for each counter and each of the door's events:
  // name is `counter_name`.
  void visit(std::string_view counter_name, std::uint32_t core, const Door& door,
             const CounterVisitor& visit) const;
};

// One front door. open: each kind's static open(config, shared) binds and listens, so a taken
// port stops flurryd at start with its flag; open_frontend() below picks it by kind.
class Frontend : public CounterSource {
 public:
  // Serves, on the front end's own thread, until stop().
  virtual Status start() = 0;
  // Joins the thread and closes every socket; idempotent.
  virtual void stop() = 0;
  // Its door (connection limits and timeouts): the event counters may be read from any thread.
  virtual const Door& door() const = 0;
  // What the start-up log line says of it: where it listens and a command to try it with.
  virtual std::string describe() const = 0;
  // CounterSource: name() ("resp", "http", "memcache") and visit_counters(): FrontendCount and the door's.
};

// Opens the front end of `kind` on config.endpoint, issuing through core slice
// config.slice.core of `shared` (the slice numbers are handed out by the caller, in one loop).
Result<std::unique_ptr<Frontend>> open_frontend(core::FrontEndKind kind, const FrontendConfig& config,
                                                core::Shared& shared);

// The ranges one call of a front end may take (its buffer, sized at open): every range
// ids_per_call_max IDs can come in, and at least seq_pieces_max pieces of a named sequence (a
// call whose numbers come in more pieces is refused RETRY for the rest; a piece is a
// sub-block, and only two are queued ahead for a slice).
inline constexpr std::size_t seq_pieces_max = 256;
std::size_t ranges_room(const core::Slice& slice, std::uint32_t ids_per_call_max);

// Why nothing (or not all) was issued, in words for a front end's error answer: RETRY (with
// the hint), FENCED (lost or draining), UNKNOWN_SEQUENCE (how to create it), NOT_OWNER (the
// owner), EXHAUSTED. `name`: the sequence, empty for IDs.
std::string refusal_text(const core::Issued& issued, std::string_view name);
// The counter of that refusal.
FrontendCount refusal_count(proto::Status status);

// A DoorAuth verdict other than served, said alike at the RESP and memcached doors: the event
// it counts as, and its words (without the protocol's error code) for the session's key `key`.
// login_needed's words are each door's own (how to log in there): empty here.
struct DoorRefusal {
  FrontendCount count;
  std::string text;
};
DoorRefusal door_refusal(DoorVerdict verdict, std::string_view key, std::uint64_t retry_hint_us);

// Slice::issue_seq, and on UNKNOWN_SEQUENCE with config.create_sequence set: creates the name
// and asks again, waiting (config.sequence_wait, 200 ms by default, in 1 ms sleeps, on the door's thread) for
// flurry-seq to queue the new sequence's first sub-block for this slice. A RETRY with nothing issued (the
// slice's sub-blocks ran dry; not a source over its bound) waits the same way for the next
// one. A creation refused: UNKNOWN_SEQUENCE, with the reason (naming the fix) in *refusal;
// otherwise *refusal is left empty.
core::Issued issue_seq_or_create(core::Slice& slice, const FrontendConfig& config, std::string_view name,
                                 std::uint32_t count, std::span<proto::Range> ranges,
                                 const core::Source& source, bool contiguous, std::string* refusal);

// A non-blocking, close-on-exec TCP socket listening on address:port (SO_REUSEADDR).
Result<int> listen_tcp(const std::string& address, std::uint16_t port, std::string_view flag);

}  // namespace flurry::dataplane
