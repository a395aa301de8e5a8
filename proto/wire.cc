// proto/wire.cc — encode and decode of wire format v1. No allocation, no exceptions.
#include "proto/wire.h"

#include <cstring>

namespace flurry::proto {

std::string_view to_string(RequestError error) {
  switch (error) {
    case RequestError::ok:
      return "ok";
    case RequestError::too_short:
      return "too_short";
    case RequestError::bad_magic:
      return "bad_magic";
    case RequestError::too_long:
      return "too_long";
    case RequestError::is_response:
      return "is_response";
    case RequestError::bad_version:
      return "bad_version";
    case RequestError::bad_opcode:
      return "bad_opcode";
    case RequestError::bad_flags:
      return "bad_flags";
    case RequestError::reserved_nonzero:
      return "reserved_nonzero";
    case RequestError::count_zero:
      return "count_zero";
    case RequestError::count_too_large:
      return "count_too_large";
    case RequestError::trailing_bytes:
      return "trailing_bytes";
    case RequestError::count_unexpected:
      return "count_unexpected";
    case RequestError::name_missing:
      return "name_missing";
    case RequestError::name_too_long:
      return "name_too_long";
    case RequestError::name_truncated:
      return "name_truncated";
    case RequestError::name_bad:
      return "name_bad";
    case RequestError::auth_unsupported:
      return "auth_unsupported";
    case RequestError::trailer_short:
      return "trailer_short";
    case RequestError::unknown_key:
      return "unknown_key";
    case RequestError::stale_timestamp:
      return "stale_timestamp";
    case RequestError::bad_mac:
      return "bad_mac";
    case RequestError::replay:
      return "replay";
    case RequestError::replay_full:
      return "replay_full";
    case RequestError::not_permitted:
      return "not_permitted";
    case RequestError::rate_limited:
      return "rate_limited";
    case RequestError::auth_required:
      return "auth_required";
    case RequestError::wrong_server:
      return "wrong_server";
  }
  return "unknown";
}

std::string_view to_string(Status status) {
  switch (status) {
    case Status::ok:
      return "OK";
    case Status::retry:
      return "RETRY";
    case Status::bad_request:
      return "BAD_REQUEST";
    case Status::unauthorized:
      return "UNAUTHORIZED";
    case Status::fenced:
      return "FENCED";
    case Status::unknown_sequence:
      return "UNKNOWN_SEQUENCE";
    case Status::not_owner:
      return "NOT_OWNER";
    case Status::exhausted:
      return "EXHAUSTED";
  }
  return "UNKNOWN";
}

std::string_view to_string(Opcode opcode) {
  switch (opcode) {
    case Opcode::get_ids:
      return "GET_IDS";
    case Opcode::ping:
      return "PING";
    case Opcode::info:
      return "INFO";
    case Opcode::get_seq:
      return "GET_SEQ";
  }
  return "UNKNOWN";
}

std::string_view to_string(ResponseError error) {
  switch (error) {
    case ResponseError::ok:
      return "ok";
    case ResponseError::too_short:
      return "too_short";
    case ResponseError::bad_magic:
      return "bad_magic";
    case ResponseError::too_long:
      return "too_long";
    case ResponseError::bad_version:
      return "bad_version";
    case ResponseError::not_response:
      return "not_response";
    case ResponseError::bad_status:
      return "bad_status";
    case ResponseError::bad_opcode:
      return "bad_opcode";
    case ResponseError::status_unexpected:
      return "status_unexpected";
    case ResponseError::ranges_unexpected:
      return "ranges_unexpected";
    case ResponseError::ranges_missing:
      return "ranges_missing";
    case ResponseError::bad_length:
      return "bad_length";
    case ResponseError::bad_range:
      return "bad_range";
  }
  return "unknown";
}

namespace {

// The GET_SEQ body right after the header: length byte, name bytes. What follows the name is
// the caller's (zero padding today; an auth trailer where flag_auth allows one).
RequestError decode_name(std::span<const std::uint8_t> datagram, SeqName* name) {
  if (datagram.size() <= request_header_size) return RequestError::name_missing;
  const std::size_t size = datagram[request_header_size];
  if (size == 0) return RequestError::name_missing;
  if (size > seq_name_size_max) return RequestError::name_too_long;
  if (datagram.size() < request_header_size + 1 + size) return RequestError::name_truncated;
  for (std::size_t i = 0; i < size; ++i) {
    const std::uint8_t c = datagram[request_header_size + 1 + i];
    if (!is_seq_name_byte(c)) return RequestError::name_bad;
    name->bytes[i] = static_cast<char>(c);
  }
  name->size = static_cast<std::uint8_t>(size);
  return RequestError::ok;
}

}  // namespace

bool valid_seq_name(std::string_view name) {
  if (name.empty() || name.size() > seq_name_size_max) return false;
  for (const char c : name) {
    if (!is_seq_name_byte(static_cast<std::uint8_t>(c))) return false;
  }
  return true;
}

namespace {

// The checks of decode_request, filling `view` as far as they get; returns the first failure.
RequestError decode_into(std::span<const std::uint8_t> datagram, RequestView& view) {
  if (datagram.size() < request_header_size) return RequestError::too_short;
  const std::uint8_t* p = datagram.data();
  if (load_be<std::uint16_t>(p + request_offset::magic) != wire_magic) return RequestError::bad_magic;
  if (datagram.size() > datagram_size_max) return RequestError::too_long;
  const std::uint8_t opcode = p[request_offset::opcode];
  if ((opcode & opcode_response_bit) != 0) return RequestError::is_response;
  // From here on the request id is known, so errors are answered.
  view.request.opcode = static_cast<Opcode>(opcode);
  view.request.flags = load_be<std::uint16_t>(p + request_offset::flags);
  view.request.count = load_be<std::uint32_t>(p + request_offset::count);
  view.request.request_id = load_be<std::uint64_t>(p + request_offset::request_id);
  if (p[request_offset::version] != wire_version) return RequestError::bad_version;
  if (opcode < static_cast<std::uint8_t>(Opcode::get_ids) ||
      opcode > static_cast<std::uint8_t>(Opcode::get_seq)) {
    return RequestError::bad_opcode;
  }
  if ((view.request.flags & ~flags_known) != 0) return RequestError::bad_flags;
  if (load_be<std::uint16_t>(p + request_offset::reserved) != 0) {
    return RequestError::reserved_nonzero;
  }
  // A signed request ends with the trailer; the body and the padding are what lies between.
  std::size_t padding_end = datagram.size();
  if ((view.request.flags & flag_auth) != 0) {
    if (datagram.size() < request_header_size + auth_trailer_size) return RequestError::trailer_short;
    padding_end -= auth_trailer_size;
    const std::uint8_t* trailer = p + padding_end;
    view.trailer.key_id = load_be<std::uint32_t>(trailer);
    view.trailer.server = load_be<std::uint32_t>(trailer + 4);
    view.trailer.timestamp_us = load_be<std::uint64_t>(trailer + 8);
    view.trailer.mac = load_be<std::uint64_t>(trailer + 16);
  }
  std::size_t body_end = request_header_size;
  if (view.request.opcode == Opcode::get_seq) {
    const RequestError named = decode_name(datagram.first(padding_end), &view.request.name);
    if (named != RequestError::ok) return named;
    body_end += 1 + view.request.name.size;
  }
  // The padding is zero: 8 bytes a load, then the rest (a padded request spent most of its
  // decode in a byte loop here).
  std::size_t i = body_end;
  for (; i + 8 <= padding_end; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, sizeof word);
    if (word != 0) return RequestError::trailing_bytes;
  }
  for (; i < padding_end; ++i) {
    if (p[i] != 0) return RequestError::trailing_bytes;
  }
  if (view.request.opcode == Opcode::get_ids || view.request.opcode == Opcode::get_seq) {
    if (view.request.count == 0) return RequestError::count_zero;
    if (view.request.count > count_max) return RequestError::count_too_large;
  } else if (view.request.count != 0) {
    return RequestError::count_unexpected;
  }
  return RequestError::ok;
}

}  // namespace

RequestView decode_request(std::span<const std::uint8_t> datagram) {
  // One named result, returned on every path: it is built in the caller's frame (no copy of
  // its ~90 bytes per request).
  RequestView view;
  view.error = decode_into(datagram, view);
  return view;
}

// A field added to these structs must be reset below too (this overload does not clear them).
static_assert(sizeof(Request) == 56 && sizeof(AuthTrailer) == 24 && sizeof(RequestView) == 88,
              "a new request field: reset it in decode_request(datagram, view)");

void decode_request(std::span<const std::uint8_t> datagram, RequestView& view) {
  // Field by field: a whole-struct assignment became a `rep stos` of 88 bytes, half of
  // decode's time in a DPDK worker profile.
  view.request.opcode = Opcode::ping;
  view.request.flags = 0;
  view.request.count = 0;
  view.request.request_id = 0;
  view.request.name.size = 0;
  view.trailer = AuthTrailer{};
  view.error = decode_into(datagram, view);
}

std::size_t encode_request(const Request& request, std::span<std::uint8_t> out, std::size_t padded_size) {
  const bool named = request.opcode == Opcode::get_seq;
  const std::size_t least = request_header_size + request_body_size(request);
  const std::size_t size = padded_size < least ? least : padded_size;
  if (size > datagram_size_max || out.size() < size) return 0;
  std::uint8_t* p = out.data();
  store_be<std::uint16_t>(p + request_offset::magic, wire_magic);
  p[request_offset::version] = wire_version;
  p[request_offset::opcode] = static_cast<std::uint8_t>(request.opcode);
  store_be<std::uint16_t>(p + request_offset::flags, request.flags);
  store_be<std::uint16_t>(p + request_offset::reserved, 0);
  store_be<std::uint32_t>(p + request_offset::count, request.count);
  store_be<std::uint64_t>(p + request_offset::request_id, request.request_id);
  for (std::size_t i = request_header_size; i < size; ++i) p[i] = 0;
  if (named) {
    p[request_header_size] = request.name.size;
    for (std::size_t i = 0; i < request.name.size; ++i) {
      p[request_header_size + 1 + i] = static_cast<std::uint8_t>(request.name.bytes[i]);
    }
  }
  return size;
}

std::size_t encode_response_header(const ResponseHeader& header, std::span<std::uint8_t> out) {
  std::uint8_t* p = out.data();
  // Magic, version, opcode, status, range count and node as one 8-byte store: a reader that
  // sums the answer right after (the DPDK frame path's UDP checksum) gets its loads forwarded
  // from whole stores instead of waiting for six small ones to reach the cache.
  static_assert(response_offset::magic == 0 && response_offset::version == 2 &&
                response_offset::opcode == 3 && response_offset::status == 4 &&
                response_offset::range_count == 5 && response_offset::node == 6);
  store_be<std::uint64_t>(p, response_header_word(header));
  store_be<std::uint64_t>(p + response_offset::request_id, header.request_id);
  store_be<std::uint32_t>(p + response_offset::detail, header.detail);
  return response_header_size;
}

void encode_range(std::span<std::uint8_t> out, std::size_t index, const Range& range) {
  std::uint8_t* p = out.data() + response_header_size + index * range_size;
  store_be<std::uint64_t>(p, range.first);
  store_be<std::uint32_t>(p + 8, range.count);
}

std::size_t encode_info(std::span<std::uint8_t> out, const Info& info) {
  std::uint8_t* p = out.data() + response_header_size;
  store_be<std::uint64_t>(p, info.epoch_ms);
  store_be<std::uint16_t>(p + 8, info.time_unit_ms);
  p[10] = info.time_bits;
  p[11] = info.node_bits;
  p[12] = info.sequence_bits;
  p[13] = info.core_bits;
  p[14] = info.core_from;
  p[15] = info.workers;
  return response_header_size + info_body_size;
}

Info info_of(const Layout& layout, std::uint32_t workers) {
  Info info;
  info.epoch_ms = layout.epoch_ms;
  info.time_unit_ms = static_cast<std::uint16_t>(layout.time_unit_ms);
  info.time_bits = static_cast<std::uint8_t>(layout.time_bits);
  info.node_bits = static_cast<std::uint8_t>(layout.node_bits);
  info.sequence_bits = static_cast<std::uint8_t>(layout.sequence_bits);
  info.core_bits = static_cast<std::uint8_t>(layout.core_bits);
  info.core_from = static_cast<std::uint8_t>(layout.core_from);
  info.workers = static_cast<std::uint8_t>(workers > 255 ? 255 : workers);
  return info;
}

Layout layout_of(const Info& info) {
  Layout layout;
  layout.epoch_ms = info.epoch_ms;
  layout.time_unit_ms = info.time_unit_ms;
  layout.time_bits = info.time_bits;
  layout.node_bits = info.node_bits;
  layout.sequence_bits = info.sequence_bits;
  layout.core_bits = info.core_bits;
  layout.core_from = info.core_from == static_cast<std::uint8_t>(CoreBitsFrom::node) ? CoreBitsFrom::node
                                                                                     : CoreBitsFrom::sequence;
  return layout;
}

Range ResponseView::range(std::size_t index) const {
  const std::uint8_t* p = body.data() + index * range_size;
  return Range{load_be<std::uint64_t>(p), load_be<std::uint32_t>(p + 8)};
}

Info ResponseView::info() const {
  const std::uint8_t* p = body.data();
  Info info;
  info.epoch_ms = load_be<std::uint64_t>(p);
  info.time_unit_ms = load_be<std::uint16_t>(p + 8);
  info.time_bits = p[10];
  info.node_bits = p[11];
  info.sequence_bits = p[12];
  info.core_bits = p[13];
  info.core_from = p[14];
  info.workers = p[15];
  return info;
}

namespace {

// The checks on the fields of a header whose magic, version and response bit are right, in
// PROTOCOL.md's order. `opcode` is the opcode byte without the response bit.
ResponseError check_header(std::uint8_t opcode, const ResponseHeader& header) {
  if (static_cast<std::uint8_t>(header.status) > static_cast<std::uint8_t>(Status::exhausted)) {
    return ResponseError::bad_status;
  }
  const bool known_opcode = opcode >= static_cast<std::uint8_t>(Opcode::get_ids) &&
                            opcode <= static_cast<std::uint8_t>(Opcode::get_seq);
  // A server echoes an unknown opcode only to say BAD_REQUEST / bad_opcode (or bad_version).
  if (!known_opcode && header.status != Status::bad_request) return ResponseError::bad_opcode;
  const bool get_seq = header.opcode == Opcode::get_seq;
  const bool issues = header.opcode == Opcode::get_ids || get_seq;
  if (!issues && (header.status == Status::retry || header.status == Status::fenced ||
                  header.status == Status::exhausted)) {
    return ResponseError::status_unexpected;
  }
  if (!get_seq && (header.status == Status::unknown_sequence || header.status == Status::not_owner)) {
    return ResponseError::status_unexpected;
  }
  const bool carries_ranges = issues && header.status == Status::ok;
  if (!carries_ranges && header.range_count != 0) return ResponseError::ranges_unexpected;
  if (carries_ranges && header.range_count == 0) return ResponseError::ranges_missing;
  return ResponseError::ok;
}

// Ranges are nonempty, below 2^63 and strictly increasing without overlap, so one answer can
// never hold an ID twice or an ID with bit 63 set.
ResponseError check_ranges(const ResponseView& view) {
  constexpr std::uint64_t id_limit = std::uint64_t{1} << id_bits_max;
  std::uint64_t next_free = 0;  // every ID below this is in an earlier range
  for (std::size_t i = 0; i < view.header.range_count; ++i) {
    const Range range = view.range(i);
    if (range.count == 0 || range.first < next_free || range.first >= id_limit ||
        id_limit - range.first < range.count) {
      return ResponseError::bad_range;
    }
    next_free = range.first + range.count;
  }
  return ResponseError::ok;
}

}  // namespace

namespace {

// The checks of decode_response, filling `view` as far as they get; returns the first failure.
ResponseError decode_response_into(std::span<const std::uint8_t> datagram, ResponseView& view) {
  if (datagram.size() < response_header_size) return ResponseError::too_short;
  const std::uint8_t* p = datagram.data();
  if (load_be<std::uint16_t>(p + response_offset::magic) != wire_magic) return ResponseError::bad_magic;
  if (datagram.size() > datagram_size_max) return ResponseError::too_long;
  if (p[response_offset::version] != wire_version) return ResponseError::bad_version;
  const std::uint8_t opcode_byte = p[response_offset::opcode];
  if ((opcode_byte & opcode_response_bit) == 0) return ResponseError::not_response;
  const auto opcode = static_cast<std::uint8_t>(opcode_byte & ~opcode_response_bit);
  view.header.opcode = static_cast<Opcode>(opcode);
  view.header.status = static_cast<Status>(p[response_offset::status]);
  view.header.range_count = p[response_offset::range_count];
  view.header.node = load_be<std::uint16_t>(p + response_offset::node);
  view.header.request_id = load_be<std::uint64_t>(p + response_offset::request_id);
  view.header.detail = load_be<std::uint32_t>(p + response_offset::detail);
  view.body = datagram.subspan(response_header_size);
  if (const ResponseError error = check_header(opcode, view.header); error != ResponseError::ok) return error;
  const bool is_info = view.header.opcode == Opcode::info && view.header.status == Status::ok;
  const std::size_t expected = is_info ? info_body_size : std::size_t{view.header.range_count} * range_size;
  if (view.body.size() != expected) return ResponseError::bad_length;
  return check_ranges(view);
}

}  // namespace

ResponseView decode_response(std::span<const std::uint8_t> datagram) {
  ResponseView view;  // one named result on every path: built in the caller's frame
  view.error = decode_response_into(datagram, view);
  return view;
}

}  // namespace flurry::proto
