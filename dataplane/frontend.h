// dataplane/frontend.h — what the RESP and HTTP front ends share: their configuration, the
// listening TCP socket, and one counter table each (bound to names by a switch, so a
// forgotten name does not compile quietly), plus the door's events (base/door.h: shed_peer,
// shed, idle_timeout, request_timeout) under the same counter name. Each front end is one
// thread that owns one core slice (SliceIssuer) and never shares a generator with a UDP worker.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/counter.h"
#include "base/counter_source.h"
#include "base/door.h"
#include "base/status.h"
#include "dataplane/slice_issuer.h"

namespace flurry::dataplane {

struct FrontendConfig {
  std::string address = "127.0.0.1";  // IPv4
  std::uint16_t port = 0;
  SliceConfig slice;
  // Connections at once and per source address (a full door, or an address at its limit,
  // closes its longest-waiting connection for a new client), and the idle and
  // incomplete-request timeouts (base/door.h).
  DoorLimits door;
  std::uint32_t ids_per_call_max = 10'000;  // FLURRY.ID n, GET /v1/ids?n=
  std::string info;                         // "key:value" lines for INFO and /v1/info
};

// Why a front end answered what it answered, counted per front end.
enum class FrontendCount : std::uint8_t {
  connections_accepted,
  requests_ids,    // FLURRY.ID, GET /v1/ids, Leaf's snowflake path
  requests_seq,    // INCR, INCRBY, FLURRY.SEQ, GET /v1/seq/NAME, Leaf's segment path
  requests_other,  // PING, INFO, HELLO, ...
  ids_issued,
  seq_issued,  // numbers of named sequences handed out
  answered_unknown_sequence,
  answered_not_owner,  // a monotonic sequence another node serves
  answered_exhausted,  // a sequence with no number left
  answered_retry,      // the ceiling was reached: RETRY / 503 + Retry-After
  answered_fenced,     // the node id is lost: FENCED / 503
  bad_request,         // unknown command or path, bad argument
  protocol_error,      // malformed RESP or HTTP: the connection is closed
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

// Why nothing (or not all) was issued, in words for a front end's error answer: RETRY (with
// the hint), FENCED (lost or draining), UNKNOWN_SEQUENCE (how to create it), NOT_OWNER (the
// owner), EXHAUSTED. `name`: the sequence, empty for IDs.
std::string refusal_text(const Issued& issued, std::string_view name);
// The counter of that refusal.
FrontendCount refusal_count(proto::Status status);

// A non-blocking, close-on-exec TCP socket listening on address:port (SO_REUSEADDR).
Result<int> listen_tcp(const std::string& address, std::uint16_t port, std::string_view flag);

}  // namespace flurry::dataplane
