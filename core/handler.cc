// core/handler.cc — see handler.h.
#include "core/handler.h"

#include <algorithm>

#include "core/invariant.h"

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
    case Outcome::count_:
      break;
  }
  return "unknown";
}

Handler::Handler(const HandlerConfig& config, WorkerStats& stats)
    : config_(config),
      info_(proto::info_of(config.layout, config.workers)),
      generator_(config.layout, config.node_id, config.core),
      stats_(stats) {}

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
  if (view.error == proto::RequestError::auth_unsupported) {
    header.status = proto::Status::unauthorized;
    stats_.add(Outcome::answered_unauthorized);
  } else {
    header.status = proto::Status::bad_request;
    stats_.add(Outcome::answered_bad_request);
  }
  return proto::encode_response_header(header, out);
}

// GET_SEQ: the numbers come from the sequence table, never from the generator. A fenced or
// drained node issues no sequence number either.
std::size_t Handler::answer_seq(const proto::Request& request, proto::ResponseHeader& header,
                                std::span<std::uint8_t> out, std::size_t request_size, const Burst& burst) {
  stats_.add(Outcome::requests_get_seq);
  if (burst.ceiling_t == ceiling_fenced) {
    header.status = proto::Status::fenced;
    stats_.add(Outcome::answered_fenced);
    return proto::encode_response_header(header, out);
  }
  SeqIssued issued;
  if (config_.sequences != nullptr) {
    const std::size_t ranges_allowed = proto::ranges_max(request_size);
    issued = config_.sequences->issue(config_.core, request.name.view(), request.count,
                                      std::span<proto::Range>(ranges_.data(), ranges_allowed));
  }
  switch (issued.answer) {
    case SeqAnswer::unknown:
      header.status = proto::Status::unknown_sequence;
      stats_.add(Outcome::answered_unknown_sequence);
      return proto::encode_response_header(header, out);
    case SeqAnswer::not_owner:
      header.status = proto::Status::not_owner;
      header.detail = issued.owner;
      stats_.add(Outcome::answered_not_owner);
      return proto::encode_response_header(header, out);
    case SeqAnswer::retry:
      header.status = proto::Status::retry;
      header.detail = config_.retry_hint_us;
      stats_.add(Outcome::answered_retry);
      return proto::encode_response_header(header, out);
    case SeqAnswer::issued:
      break;
  }
  stats_.add(Outcome::seq_ids_issued, issued.ids);
  if (issued.ids < request.count) stats_.add(Outcome::answered_partial);
  return answer_ranges(header, out, issued.range_count, request_size);
}

// OK with ranges_[0 .. range_count) (GET_IDS and GET_SEQ).
std::size_t Handler::answer_ranges(proto::ResponseHeader& header, std::span<std::uint8_t> out,
                                   std::uint32_t range_count, std::size_t request_size) {
  header.status = proto::Status::ok;
  header.range_count = static_cast<std::uint8_t>(range_count);
  proto::encode_response_header(header, out);
  for (std::uint32_t i = 0; i < range_count; ++i) proto::encode_range(out, i, ranges_[i]);
  stats_.add(Outcome::answered_ok);
  const std::size_t answer_size = proto::response_header_size + range_count * proto::range_size;
  FLURRY_INVARIANT(answer_size <= 3 * request_size, "an answer more than 3x its request (amplification)");
  return answer_size;
}

std::size_t Handler::handle(std::span<const std::uint8_t> in, std::span<std::uint8_t> out,
                            const Burst& burst) {
  stats_.add(Outcome::rx_datagrams);
  // Everything needed from `in` is copied out before `out` (maybe the same bytes) is written.
  const proto::RequestView view = proto::decode_request(in);
  if (view.error != proto::RequestError::ok) return answer_error(view, out);
  const std::size_t request_size = in.size();

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
      return answer_seq(view.request, header, out, request_size, burst);
    case proto::Opcode::get_ids:
      break;
  }

  stats_.add(Outcome::requests_get_ids);
  if (burst.ceiling_t == ceiling_fenced) {
    header.status = proto::Status::fenced;
    stats_.add(Outcome::answered_fenced);
    return proto::encode_response_header(header, out);
  }
  const std::size_t ranges_allowed = proto::ranges_max(request_size);
  const Generator::Issued issued = generator_.issue(burst.now_t, burst.ceiling_t, view.request.count,
                                                    std::span<proto::Range>(ranges_.data(), ranges_allowed));
  if (issued.ids == 0) {
    header.status = proto::Status::retry;
    header.detail = config_.retry_hint_us;
    stats_.add(Outcome::answered_retry);
    return proto::encode_response_header(header, out);
  }
  stats_.add(Outcome::ids_issued, issued.ids);
  if (issued.ids < view.request.count) stats_.add(Outcome::answered_partial);
  return answer_ranges(header, out, issued.range_count, request_size);
}

}  // namespace flurry::core
