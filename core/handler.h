// core/handler.h — the pure request handler: one datagram in, at most one answer out.
//
// Shared by every backend (kernel socket, DPDK) and by the tests: the backend turns a
// packet into a byte span, calls handle(), and sends what it wrote. Contract:
//   * every datagram is accounted exactly once: answered (OK, RETRY, FENCED, BAD_REQUEST,
//     UNAUTHORIZED) or dropped with a named reason, each with its own counter;
//   * the answer is at most proto::response_size_max(request size) bytes;
//   * `out` may alias `in` (answers are built in place in the DPDK mbuf);
//   * no allocation, no lock, no system call; the clock and ceiling are read by the caller
//     once per burst and passed in as a Burst (with the wall clock and the key table);
//   * authentication (HandlerConfig::auth, PROTOCOL.md "Authentication"): a signed request is
//     checked key, MAC, timestamp window and floor, server, replay, permission, rate, and last
//     the replay table's insert — in that order — and nothing is issued or stored before its
//     MAC verified; a refusal found after the MAC is answered signed; an unknown key, a bad MAC
//     or a replay is dropped.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "base/counter.h"
#include "core/ceiling.h"
#include "core/generator.h"
#include "core/keys.h"
#include "core/sequence_table.h"
#include "core/source_limit.h"
#include "proto/layout.h"
#include "proto/wire.h"

namespace flurry::core {

// Outcomes counted per worker. Names are the metric label values.
enum class Outcome : std::uint8_t {
  rx_datagrams,
  answered_ok,
  answered_partial,  // OK with fewer IDs than asked (client asks again)
  answered_retry,
  answered_fenced,
  answered_bad_request,
  answered_unauthorized,
  dropped,  // see request_errors for the reason
  ids_issued,
  requests_get_ids,
  requests_ping,
  requests_info,
  requests_get_seq,
  seq_ids_issued,  // numbers of named sequences issued (GET_SEQ), apart from ids_issued
  answered_unknown_sequence,
  answered_not_owner,
  answered_exhausted,  // EXHAUSTED: the layout's time or a sequence's numbers have run out
  count_,
};
inline constexpr std::size_t outcome_count = static_cast<std::size_t>(Outcome::count_);
std::string_view to_string(Outcome outcome);

// Per key (by Key::slot), per worker: what the key asked and what it was refused. The counts
// belong to the key of `generation` (Key::generation): the worker zeroes them and then
// publishes the generation (release) when it first counts for a slot's new key; a reader
// (acquire) takes them as that key's only when the generation matches, else as 0.
struct KeyCounters {
  std::atomic<std::uint64_t> generation{0};
  Counter requests;                  // signed requests naming this key (a known key id)
  Counter ids;                       // IDs issued to it
  std::array<Counter, 16> rejected;  // by RequestError - 32 (the auth reasons)
};

// One worker's counters, on its own cache lines. Written only by that worker.
struct alignas(64) WorkerStats {
  std::array<Counter, outcome_count> outcomes;
  std::array<Counter, proto::request_error_slots> request_errors;  // by proto::RequestError
  // The worker's generator last_t, published once per burst for the watermark scheduler.
  std::atomic<std::uint64_t> last_t{0};
  // Time spent on bursts that carried packets, from the first packet received to the last
  // answer handed to the transport (the DPDK backend: to its next poll's clock read, which
  // adds one receive call a burst): a poll-mode core always shows 100 % CPU, so this is how
  // busy it really is (rate() of it is the fraction of a core). Written by the backend.
  Counter busy_ns;
  SourceLimitStats sources;  // the per-source bound (core/source_limit.h)
  std::array<KeyCounters, key_slots_max> keys;

  void add(Outcome outcome, std::uint64_t n = 1) { outcomes[static_cast<std::size_t>(outcome)].add(n); }
  std::uint64_t get(Outcome outcome) const { return outcomes[static_cast<std::size_t>(outcome)].get(); }
};

// What the caller reads once per burst.
struct Burst {
  std::uint64_t now_t = 0;         // clock, in layout units since the epoch
  std::uint64_t ceiling_t = 0;     // Ceiling::load()
  std::uint64_t now_unix_ms = 0;   // wall clock (auth timestamp window and token buckets)
  const KeyTable* keys = nullptr;  // KeyTableSlot::load() after quiesce(); null: no keys
};

// How a worker authenticates (--auth). `mac` is libsodium's crypto_shorthash, injected so
// that core/ stays free of non-standard headers; `replay` is shared by every worker.
struct AuthConfig {
  AuthMode mode = AuthMode::off;
  std::uint32_t window_ms = 5000;  // a timestamp further than this from now is stale
  proto::MacFunction mac = nullptr;
  ReplayFilter* replay = nullptr;  // required unless mode is off
};

// What one typed request came to (Handler::issue_ids, issue_seq; core::Slice): the status and
// detail a datagram's answer would carry, and the ranges written.
struct Issued {
  proto::Status status = proto::Status::ok;
  // RETRY: the hint in us; FENCED: proto::fenced_lost or fenced_draining; NOT_OWNER: the owner's
  // node id (or proto::not_owner_unknown); 0 otherwise.
  std::uint32_t detail = 0;
  std::uint32_t ids = 0;          // numbers written to the ranges
  std::uint32_t range_count = 0;  // ranges written
  bool source_limited = false;    // RETRY: the caller's source used up its share (source_limit.h)
};

struct HandlerConfig {
  proto::Layout layout;
  std::uint32_t node_id = 0;
  // When this process began serving node_id (Assignment::since_unix_ms): signed requests
  // stamped earlier are stale.
  std::uint64_t node_since_unix_ms = 0;
  std::uint32_t core = 0;
  std::uint32_t workers = 1;
  std::uint32_t retry_hint_us = 1000;  // RETRY detail: when asking again is worthwhile
  AuthConfig auth;
  // Named sequences (GET_SEQ); null: every name is unknown. Outlives the handler.
  SequenceTable* sequences = nullptr;
  // The per-source bound of unsigned GET_IDS / GET_SEQ (the slice's); null: off.
  SourceLimit* source_limit = nullptr;
};

class Handler {
 public:
  Handler(const HandlerConfig& config, WorkerStats& stats);

  void start_above(std::uint64_t floor_t) { generator_.start_above(floor_t); }

  // ---- the fast path of a plain GET_IDS (dataplane/frame.h PlainPath) ----
  // A caller that checked a datagram is an unsigned GET_IDS with no flags, zero padding and a
  // count in 1..count_max may take issue_plain() instead of handle(), when plain_allowed() said
  // so for the burst: handle() would authenticate nothing (--auth not required) and answer it OK
  // from the generator (not fenced). issue_plain() issues exactly the one range handle() would;
  // false (nothing issued, nothing counted) when handle()'s answer would be anything else (RETRY,
  // EXHAUSTED, partial, several ranges): call handle() for that datagram then. count_plain()
  // adds, once a burst, the counters handle() would have added for those requests.
  bool plain_allowed(const Burst& burst) const {
    return config_.auth.mode != AuthMode::required && !is_fenced(burst.ceiling_t);
  }
  bool issue_plain(std::uint32_t count, const Burst& burst, proto::Range* range) {
    return generator_.issue_one_range(burst.now_t, burst.ceiling_t, count, range);
  }
  void count_plain(std::uint64_t requests, std::uint64_t ids) {
    stats_.add(Outcome::rx_datagrams, requests);
    stats_.add(Outcome::requests_get_ids, requests);
    stats_.add(Outcome::ids_issued, ids);
    stats_.add(Outcome::answered_ok, requests);
  }
  std::uint16_t node() const { return static_cast<std::uint16_t>(config_.node_id); }

  // Handles one datagram; returns the answer's size in `out` (0: dropped, no answer).
  // `out` must hold proto::datagram_size_max bytes; it may be the same memory as `in`.
  // `source`: its sender, for the per-source bound of an unsigned GET_IDS / GET_SEQ (the
  // bucket may cut the answer short, or answer RETRY with the time it takes to refill).
  std::size_t handle(std::span<const std::uint8_t> in, std::span<std::uint8_t> out, const Burst& burst,
                     const Source& source = Source::none());

  // ---- the per-source bound, for a caller that issues without handle() ----
  // A fast path (the DPDK worker's plain GET_IDS) charges its `ids` to `source`, all or
  // nothing, before it issues: not admitted means over the source's share (nothing charged,
  // nothing counted): hand that datagram to handle(), which answers it (fewer IDs, or RETRY)
  // and counts it. Admitted but then not issued: refund_source(charge, ids) before handle().
  // With the bound off (or Source::none()) every charge is admitted and refunds are no-ops.
  SourceCharge charge_source(const Source& source, std::uint32_t ids, const Burst& burst) {
    if (config_.source_limit == nullptr || !source.limited) return {ids, 0, true, nullptr};
    return config_.source_limit->take(source, ids, burst.now_unix_ms, SourceLimit::Grant::whole);
  }
  void refund_source(const SourceCharge& charge, std::uint32_t unused) {
    if (config_.source_limit != nullptr) config_.source_limit->refund(charge, unused);
  }
  // A typed request (core::Slice) its source's bucket refused: counted as handle() counts a
  // refused datagram (rx_datagrams, the request, RETRY, sources.limited).
  Issued refuse_source(proto::Opcode opcode, const SourceCharge& charge);

  // After handle() answered: the answer's one's-complement sum (proto::response_header_sum)
  // when the handler knew it from the values it encoded (unsigned OK answers with ranges, the
  // common answer), for a sender that checksums the answer next; nullopt: sum the bytes.
  std::optional<std::uint64_t> answer_sum() const {
    return answer_sum_known_ ? std::optional<std::uint64_t>(answer_sum_) : std::nullopt;
  }

  // The typed forms of an unsigned GET_IDS and GET_SEQ of `count` (>= 1), for a caller that holds
  // no datagram (a front end, through core::Slice): the same checks, generator or sequence table
  // and counters as handle() (rx_datagrams, the request, one answer outcome, the IDs), the ranges
  // written to `out` (at most out.size() of them) instead of encoded. `name` must be valid
  // (proto::valid_seq_name). OK with fewer than `count`: the ceiling, the sequence's queued
  // numbers or `out` ran out (counted answered_partial, as a datagram's).
  Issued issue_ids(std::uint32_t count, const Burst& burst, std::span<proto::Range> out) {
    stats_.add(Outcome::rx_datagrams);
    return take_ids(count, burst, out);
  }
  Issued issue_seq(std::string_view name, std::uint32_t count, const Burst& burst,
                   std::span<proto::Range> out) {
    stats_.add(Outcome::rx_datagrams);
    return take_seq(name, count, burst, out);
  }

  // After a burst: publish last_t for the watermark scheduler.
  void publish() { stats_.last_t.store(generator_.last_t(), std::memory_order_relaxed); }

  const Generator& generator() const { return generator_; }

 private:
  struct Bucket {
    std::uint64_t millitokens = 0;
    std::uint64_t last_ms = 0;     // 0: never used (starts full)
    std::uint64_t generation = 0;  // the key (Key::generation) it is for; another: starts full
  };
  // The key's counters, started afresh when its slot held another key before (keys.h).
  KeyCounters& key_counters(const Key& key);
  std::size_t answer_error(const proto::RequestView& view, std::span<std::uint8_t> out);
  // Checks a request against the key table, cheap checks first; sets *key to the key whose
  // MAC verified (null for an unsigned request or a failure before the MAC).
  proto::RequestError authenticate(const proto::RequestView& view, std::span<const std::uint8_t> in,
                                   const Burst& burst, const Key** key);
  proto::RequestError authorize(const proto::RequestView& view, const Key& key, const Burst& burst);
  std::size_t answer_auth_error(const proto::RequestView& view, proto::RequestError error, const Key* key,
                                std::span<std::uint8_t> out);
  std::size_t serve(const proto::RequestView& view, std::size_t room, const Burst& burst,
                    std::span<std::uint8_t> out, std::uint64_t* ids, const Source& source);
  std::size_t finish(std::size_t size, const proto::RequestView& view, const Key* key,
                     std::span<std::uint8_t> out);
  // GET_IDS and GET_SEQ without the wire: everything but rx_datagrams counted here.
  Issued take_ids(std::uint32_t count, const Burst& burst, std::span<proto::Range> out);
  Issued take_seq(std::string_view name, std::uint32_t count, const Burst& burst,
                  std::span<proto::Range> out);
  Issued fenced(const Burst& burst);
  // The request and its RETRY counted, and sources.limited (not rx_datagrams).
  Issued refused_by_source(proto::Opcode opcode, const SourceCharge& charge);
  // Encodes what take_ids / take_seq gave (its ranges in ranges_).
  std::size_t answer_issued(proto::ResponseHeader& header, const Issued& issued, std::span<std::uint8_t> out,
                            std::size_t room, std::uint64_t* ids);
  std::size_t answer_ranges(proto::ResponseHeader& header, std::span<std::uint8_t> out,
                            std::uint32_t range_count, std::size_t room);

  HandlerConfig config_;
  proto::Info info_;
  proto::RequestView view_;  // the request being handled, decoded in place (no clearing per request)
  std::uint64_t answer_sum_ = 0;
  bool answer_sum_known_ = false;
  // Scratch for one answer's ranges; a member so that no request pays for initializing it.
  std::array<proto::Range, proto::ranges_max(proto::datagram_size_max)> ranges_;
  Generator generator_;
  WorkerStats& stats_;
  std::array<Bucket, key_slots_max> buckets_{};
};

}  // namespace flurry::core
