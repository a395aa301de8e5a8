// core/handler.cc — see handler.h.
#include "core/handler.h"

#include <algorithm>

#include "base/invariant.h"
#include "proto/auth.h"

namespace flurry::core {

std::string_view to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::rx_datagrams:
      return "rx_datagrams";
    case Outcome::answered_ok:
      return "answered_ok";
    case Outcome::answered_partial:
      return "answered_partial";
    case Outcome::answered_retry:
      return "answered_retry";
    case Outcome::answered_fenced:
      return "answered_fenced";
    case Outcome::answered_bad_request:
      return "answered_bad_request";
    case Outcome::answered_unauthorized:
      return "answered_unauthorized";
    case Outcome::dropped:
      return "dropped";
    case Outcome::ids_issued:
      return "ids_issued";
    case Outcome::requests_get_ids:
      return "requests_get_ids";
    case Outcome::requests_ping:
      return "requests_ping";
    case Outcome::requests_info:
      return "requests_info";
    case Outcome::requests_get_seq:
      return "requests_get_seq";
    case Outcome::seq_ids_issued:
      return "seq_ids_issued";
    case Outcome::answered_unknown_sequence:
      return "answered_unknown_sequence";
    case Outcome::answered_not_owner:
      return "answered_not_owner";
    case Outcome::answered_exhausted:
      return "answered_exhausted";
    case Outcome::count_:
      break;
  }
  return "unknown";
}

Handler::Handler(const HandlerConfig& config, WorkerStats& stats)
    : config_(config),
      info_(proto::info_of(config.layout, config.workers)),
      generator_(config.layout, config.node_id, config.core),
      stats_(stats) {
  FLURRY_INVARIANT(
      config.auth.mode == AuthMode::off || (config.auth.mac != nullptr && config.auth.replay != nullptr),
      "authentication needs a MAC function and a replay filter");
}

std::size_t Handler::answer_error(const proto::RequestView& view, std::span<std::uint8_t> out) {
  stats_.request_errors[static_cast<std::size_t>(view.error)].add();
  if (!proto::is_answered(view.error)) {
    stats_.add(Outcome::dropped);
    return 0;
  }
  proto::ResponseHeader header;
  header.opcode = view.request.opcode;
  header.request_id = view.request.request_id;
  header.node = static_cast<std::uint16_t>(config_.node_id);
  header.detail = static_cast<std::uint8_t>(view.error);
  if (view.error == proto::RequestError::rate_limited && view.request.opcode == proto::Opcode::get_ids) {
    header.status = proto::Status::retry;  // a GET_IDS client waits and asks again
    header.detail = config_.retry_hint_us;
    stats_.add(Outcome::answered_retry);
  } else if (proto::is_auth_error(view.error)) {
    header.status = proto::Status::unauthorized;
    stats_.add(Outcome::answered_unauthorized);
  } else {
    header.status = proto::Status::bad_request;
    stats_.add(Outcome::answered_bad_request);
  }
  return proto::encode_response_header(header, out);
}

std::size_t Handler::answer_auth_error(const proto::RequestView& view, proto::RequestError error,
                                       const Key* key, std::span<std::uint8_t> out) {
  if (key != nullptr) key_counters(*key).rejected[static_cast<std::size_t>(error) - 32].add();
  proto::RequestView refused = view;
  refused.error = error;
  const std::size_t size = answer_error(refused, out);
  // Only a request whose MAC verified gets a signed refusal; before that, nothing is signed.
  const bool verified =
      error == proto::RequestError::stale_timestamp || error == proto::RequestError::wrong_server ||
      error == proto::RequestError::not_permitted || error == proto::RequestError::rate_limited;
  return verified && size != 0 ? finish(size, view, key, out) : size;
}

KeyCounters& Handler::key_counters(const Key& key) {
  KeyCounters& counters = stats_.keys[key.slot];
  if (counters.generation.load(std::memory_order_relaxed) != key.generation) {
    // The slot's previous key's counts are not this key's: zero them, then say whose they are.
    counters.requests.reset();
    counters.ids.reset();
    for (Counter& rejected : counters.rejected) rejected.reset();
    counters.generation.store(key.generation, std::memory_order_release);
  }
  return counters;
}

proto::RequestError Handler::authenticate(const proto::RequestView& view, std::span<const std::uint8_t> in,
                                          const Burst& burst, const Key** key) {
  using proto::RequestError;
  if ((view.request.flags & proto::flag_auth) == 0) {
    const bool issues =
        view.request.opcode == proto::Opcode::get_ids || view.request.opcode == proto::Opcode::get_seq;
    const bool refused = config_.auth.mode == AuthMode::required && issues;
    return refused ? RequestError::auth_required : RequestError::ok;
  }
  if (config_.auth.mode == AuthMode::off) return RequestError::auth_unsupported;
  // An unknown key id is dropped like a bad MAC: which ids exist is not told to anyone.
  const Key* found = burst.keys == nullptr ? nullptr : burst.keys->find(view.trailer.key_id);
  if (found == nullptr) return RequestError::unknown_key;
  key_counters(*found).requests.add();
  *key = found;  // counts its refusals; only those after the MAC verified are answered signed
  // The one MAC computation a forged request costs; nothing is issued or stored before it.
  if (proto::request_mac(in, found->secret, config_.auth.mac) != view.trailer.mac)
    return RequestError::bad_mac;
  // The window on the replay filter's clock, which never steps back (keys.h ReplayFilter).
  ReplayFilter& replay = *config_.auth.replay;
  const std::uint64_t now_ms = replay.now_ms(burst.now_unix_ms);
  const std::uint64_t stamp_ms = view.trailer.timestamp_us / 1000;
  const std::uint64_t skew_ms = stamp_ms > now_ms ? stamp_ms - now_ms : now_ms - stamp_ms;
  // And never one signed before this process began serving its node id: its replay table
  // started empty then (a restart, a takeover of the node id from another process).
  if (skew_ms > config_.auth.window_ms || stamp_ms < config_.node_since_unix_ms)
    return RequestError::stale_timestamp;
  // Bound to this server: a request signed for another node id is never served here.
  const bool issues =
      view.request.opcode == proto::Opcode::get_ids || view.request.opcode == proto::Opcode::get_seq;
  if (issues && view.trailer.server != config_.node_id) return RequestError::wrong_server;
  if (replay.seen(view.trailer.mac)) return RequestError::replay;
  // The key's permission and rate before the replay table takes the request: a key limited to
  // a few requests a second can put no more than that into the table every key shares.
  if (const RequestError refused = authorize(view, *found, burst); refused != RequestError::ok)
    return refused;
  // Kept until the timestamp is out of the window: a replay after that is stale.
  const std::uint64_t expiry_ms = stamp_ms + config_.auth.window_ms + 1;
  switch (replay.check(view.trailer.mac, now_ms, expiry_ms)) {
    case ReplayFilter::Verdict::fresh:
      return RequestError::ok;
    case ReplayFilter::Verdict::replay:
      return RequestError::replay;
    case ReplayFilter::Verdict::full:
      return RequestError::replay_full;
  }
  return RequestError::replay_full;
}

proto::RequestError Handler::authorize(const proto::RequestView& view, const Key& key, const Burst& burst) {
  const bool ping = view.request.opcode == proto::Opcode::ping;
  if (!ping && !key.allows_opcode(view.request.opcode)) return proto::RequestError::not_permitted;
  // batch_max bounds GET_IDS, seq_batch_max GET_SEQ (PROTOCOL.md, not_permitted).
  if (view.request.opcode == proto::Opcode::get_ids && view.request.count > key.batch_max)
    return proto::RequestError::not_permitted;
  if (view.request.opcode == proto::Opcode::get_seq && view.request.count > key.seq_batch_max)
    return proto::RequestError::not_permitted;
  if (view.request.opcode == proto::Opcode::get_seq && !key.allows_sequence(view.request.name.view())) {
    return proto::RequestError::not_permitted;
  }
  if (key.rate_per_s == 0) return proto::RequestError::ok;
  // Token bucket in thousandths of a request: refills rate_per_s per second, holds 100 ms worth.
  constexpr std::uint64_t cost = 1000;
  const std::uint64_t capacity = std::max<std::uint64_t>(cost, std::uint64_t{key.rate_per_s} * 100);
  Bucket& bucket = buckets_[key.slot];
  if (bucket.last_ms == 0 || bucket.generation != key.generation) {
    bucket = Bucket{capacity, burst.now_unix_ms, key.generation};
  } else if (burst.now_unix_ms > bucket.last_ms) {
    const std::uint64_t refill = (burst.now_unix_ms - bucket.last_ms) * key.rate_per_s;
    bucket.millitokens = std::min(capacity, bucket.millitokens + refill);
    bucket.last_ms = burst.now_unix_ms;
  }
  if (bucket.millitokens < cost) return proto::RequestError::rate_limited;
  bucket.millitokens -= cost;
  return proto::RequestError::ok;
}

// FENCED: no node id held (detail fenced_lost), or drained by the operator (fenced_draining).
Issued Handler::fenced(const Burst& burst) {
  stats_.add(Outcome::answered_fenced);
  return {proto::Status::fenced,
          burst.ceiling_t == ceiling_draining ? proto::fenced_draining : proto::fenced_lost};
}

std::size_t Handler::finish(std::size_t size, const proto::RequestView& view, const Key* key,
                            std::span<std::uint8_t> out) {
  if (key == nullptr) return size;
  return proto::sign_answer(out, size, view.trailer.mac, key->secret, config_.auth.mac);
}

// GET_SEQ: the numbers come from the sequence table, never from the generator. A fenced or
// drained node issues no sequence number either.
Issued Handler::take_seq(std::string_view name, std::uint32_t count, const Burst& burst,
                         std::span<proto::Range> out) {
  stats_.add(Outcome::requests_get_seq);
  if (is_fenced(burst.ceiling_t)) return fenced(burst);
  SeqIssued issued;
  if (config_.sequences != nullptr) {
    issued = config_.sequences->issue(config_.core, name, count, out, burst.now_unix_ms);
  }
  switch (issued.answer) {
    case SeqAnswer::unknown:
      stats_.add(Outcome::answered_unknown_sequence);
      return {proto::Status::unknown_sequence};
    case SeqAnswer::not_owner:
      stats_.add(Outcome::answered_not_owner);
      return {proto::Status::not_owner, issued.owner};
    case SeqAnswer::retry:
      stats_.add(Outcome::answered_retry);
      return {proto::Status::retry, config_.retry_hint_us};
    case SeqAnswer::exhausted:
      stats_.add(Outcome::answered_exhausted);
      return {proto::Status::exhausted};
    case SeqAnswer::issued:
      break;
  }
  stats_.add(Outcome::seq_ids_issued, issued.ids);
  if (issued.ids < count) stats_.add(Outcome::answered_partial);
  stats_.add(Outcome::answered_ok);
  return {proto::Status::ok, 0, issued.ids, issued.range_count};
}

// GET_IDS: from this slice's generator, never above the burst's ceiling.
Issued Handler::take_ids(std::uint32_t count, const Burst& burst, std::span<proto::Range> out) {
  stats_.add(Outcome::requests_get_ids);
  if (is_fenced(burst.ceiling_t)) return fenced(burst);
  const Generator::Issued issued = generator_.issue(burst.now_t, burst.ceiling_t, count, out);
  if (issued.ids == 0) {
    if (generator_.exhausted(burst.now_t)) {  // the layout's time has run out: never again
      stats_.add(Outcome::answered_exhausted);
      return {proto::Status::exhausted};
    }
    stats_.add(Outcome::answered_retry);
    return {proto::Status::retry, config_.retry_hint_us};
  }
  stats_.add(Outcome::ids_issued, issued.ids);
  if (issued.ids < count) stats_.add(Outcome::answered_partial);
  stats_.add(Outcome::answered_ok);
  return {proto::Status::ok, 0, issued.ids, issued.range_count};
}

std::size_t Handler::answer_issued(proto::ResponseHeader& header, const Issued& issued,
                                   std::span<std::uint8_t> out, std::size_t room, std::uint64_t* ids) {
  if (issued.status != proto::Status::ok) {
    header.status = issued.status;
    header.detail = issued.detail;
    return proto::encode_response_header(header, out);
  }
  *ids = issued.ids;
  return answer_ranges(header, out, issued.range_count, room);
}

// OK with ranges_[0 .. range_count) (GET_IDS and GET_SEQ), within `room` bytes (the request's
// allowance: 3x its size, or a signed key's larger allowance).
std::size_t Handler::answer_ranges(proto::ResponseHeader& header, std::span<std::uint8_t> out,
                                   std::uint32_t range_count, std::size_t room) {
  header.status = proto::Status::ok;
  header.range_count = static_cast<std::uint8_t>(range_count);
  // Each sum from values read before they are stored: a store through `out` (bytes, which may
  // alias anything) makes the compiler read a field again after it, and that read waited on
  // the store in a memif profile.
  std::uint64_t sum = proto::response_header_sum(header);
  proto::encode_response_header(header, out);
  for (std::uint32_t i = 0; i < range_count; ++i) {
    const proto::Range range = ranges_[i];
    sum = proto::ones_sum_add(sum, proto::range_sum(range));
    proto::encode_range(out, i, range);
  }
  answer_sum_ = sum;
  answer_sum_known_ = true;
  const std::size_t answer_size = proto::response_header_size + range_count * proto::range_size;
  FLURRY_INVARIANT(answer_size <= room, "an answer above its allowance (3x its request: amplification)");
  return answer_size;
}

std::size_t Handler::handle(std::span<const std::uint8_t> in, std::span<std::uint8_t> out, const Burst& burst,
                            const Source& source) {
  stats_.add(Outcome::rx_datagrams);
  answer_sum_known_ = false;
  // Everything needed from `in` is copied out before `out` (maybe the same bytes) is written.
  proto::decode_request(in, view_);
  const proto::RequestView& view = view_;
  if (view.error != proto::RequestError::ok) return answer_error(view, out);
  const Key* key = nullptr;
  if (config_.auth.mode != AuthMode::off || (view.request.flags & proto::flag_auth) != 0) {
    const proto::RequestError error = authenticate(view, in, burst, &key);
    if (error != proto::RequestError::ok) return answer_auth_error(view, error, key, out);
  }
  // Unsigned: 3x the whole request. Signed: that or the key's allowance, less the answer MAC.
  std::size_t room = proto::response_size_max(in.size());
  if (key != nullptr) {
    room =
        std::max<std::size_t>(room, std::min<std::size_t>(key->answer_bytes_max, proto::datagram_size_max)) -
        proto::answer_mac_size;
  }
  std::uint64_t ids = 0;
  // Only an unsigned request pays the per-source bound; a signed one has its key's rate.
  const std::size_t size = serve(view, room, burst, out, &ids, key == nullptr ? source : Source::none());
  if (key == nullptr) return size;
  key_counters(*key).ids.add(ids);
  answer_sum_known_ = false;  // the answer MAC follows
  return finish(size, view, key, out);
}

std::size_t Handler::serve(const proto::RequestView& view, std::size_t room, const Burst& burst,
                           std::span<std::uint8_t> out, std::uint64_t* ids, const Source& source) {
  proto::ResponseHeader header;
  header.opcode = view.request.opcode;
  header.request_id = view.request.request_id;
  header.node = static_cast<std::uint16_t>(config_.node_id);

  switch (view.request.opcode) {
    case proto::Opcode::ping:
      stats_.add(Outcome::requests_ping);
      stats_.add(Outcome::answered_ok);
      return proto::encode_response_header(header, out);
    case proto::Opcode::info:
      stats_.add(Outcome::requests_info);
      stats_.add(Outcome::answered_ok);
      proto::encode_response_header(header, out);
      return proto::encode_info(out, info_);
    case proto::Opcode::get_seq:
    case proto::Opcode::get_ids:
      break;
  }
  // The request's allowance bounds the ranges (3x its size, or a signed key's larger one).
  const std::span<proto::Range> ranges(ranges_.data(), proto::ranges_in(room));
  std::uint32_t count = view.request.count;
  SourceCharge charge;
  // A fenced node answers FENCED whatever the source's bucket holds (the client moves on).
  if (config_.source_limit != nullptr && source.limited && !is_fenced(burst.ceiling_t)) {
    // Up to what the source's bucket holds; what the generator then does not issue (the
    // ceiling, the answer's room) goes back, so the source pays for the numbers it got.
    charge = config_.source_limit->take(source, count, burst.now_unix_ms, SourceLimit::Grant::part);
    if (!charge.admitted) {
      refused_by_source(view.request.opcode, charge);
      header.status = proto::Status::retry;
      header.detail = std::max(config_.retry_hint_us, charge.wait_us);
      return proto::encode_response_header(header, out);
    }
    count = charge.ids;
  }
  const Issued issued = view.request.opcode == proto::Opcode::get_ids
                            ? take_ids(count, burst, ranges)
                            : take_seq(view.request.name.view(), count, burst, ranges);
  if (charge.entry != nullptr) {
    config_.source_limit->refund(charge, charge.ids - issued.ids);
    // Cut short by the bucket, not by the ceiling or the answer's room.
    if (count < view.request.count && issued.ids == count) stats_.sources.trimmed.add();
  }
  return answer_issued(header, issued, out, room, ids);
}

Issued Handler::refuse_source(proto::Opcode opcode, const SourceCharge& charge) {
  stats_.add(Outcome::rx_datagrams);
  return refused_by_source(opcode, charge);
}

Issued Handler::refused_by_source(proto::Opcode opcode, const SourceCharge& charge) {
  stats_.add(opcode == proto::Opcode::get_seq ? Outcome::requests_get_seq : Outcome::requests_get_ids);
  stats_.add(Outcome::answered_retry);
  stats_.sources.limited.add();
  Issued refused{proto::Status::retry, std::max(config_.retry_hint_us, charge.wait_us)};
  refused.source_limited = true;
  return refused;
}

}  // namespace flurry::core
