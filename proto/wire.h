// proto/wire.h — flurry wire format v1 (UDP, big-endian). The byte-exact description and
// test vectors are in proto/PROTOCOL.md; tests/proto/wire_test.cc checks them.
//
// Contract:
//   * decode_request never reads outside its span, never allocates, never throws; every
//     datagram maps to exactly one RequestError (or ok).
//   * A response is never larger than response_size_max(request size): at most 3x the
//     request (anti-amplification) and never above one unfragmented datagram.
//   * Byte order is handled only by load_be/store_be below.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include "proto/layout.h"

namespace flurry::proto {

inline constexpr std::uint16_t wire_magic = 0x464C;  // "FL"
inline constexpr std::uint8_t wire_version = 1;

// Sizes, in bytes.
inline constexpr std::size_t request_header_size = 20;
inline constexpr std::size_t response_header_size = 20;
inline constexpr std::size_t range_size = 12;
inline constexpr std::size_t info_body_size = 16;
// The largest UDP payload that fits an Ethernet MTU of 1500 without fragmentation.
inline constexpr std::size_t datagram_size_max = 1472;
// The response may be at most this many times the request that caused it.
inline constexpr std::size_t amplification_max = 3;
// GET_IDS count bounds. A response may hold fewer IDs than asked (see PROTOCOL.md).
inline constexpr std::uint32_t count_max = 1U << 20;

enum class Opcode : std::uint8_t { get_ids = 1, ping = 2, info = 3, get_seq = 4 };
// Responses are marked by the top bit of the opcode byte (see decode_response).
inline constexpr std::uint8_t opcode_response_bit = 0x80;

// GET_SEQ names a sequence in the body: 1 length byte L (1..seq_name_size_max), then L bytes
// from [A-Za-z0-9_.:-], then zero padding (PROTOCOL.md "GET_SEQ body").
inline constexpr std::size_t seq_name_size_max = 32;
constexpr bool is_seq_name_byte(std::uint8_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-' || c == ':';
}
// A sequence name as carried by a request: a copy, so that an answer may overwrite the
// request's bytes (answers are built in place).
struct SeqName {
  std::array<char, seq_name_size_max> bytes{};
  std::uint8_t size = 0;
  std::string_view view() const { return {bytes.data(), size}; }
};
// Checks a name an operator or a client typed (the same rule as the wire's).
bool valid_seq_name(std::string_view name);

enum class Status : std::uint8_t {
  ok = 0,
  retry = 1,             // nothing issued now; try again after `detail` microseconds
  bad_request = 2,       // `detail` is the RequestError
  unauthorized = 3,      // authentication required or failed
  fenced = 4,            // this node lost its node id; ask another server
  unknown_sequence = 5,  // GET_SEQ: no sequence of that name exists (create it first)
  not_owner = 6,         // GET_SEQ: a monotonic sequence served by another node; `detail` is
                         // its node id, or not_owner_unknown
  exhausted = 7,         // GET_IDS: the layout's time field has run out; GET_SEQ: the sequence
                         // reached 2^63. Nothing can ever be issued again: asking again is useless
};
inline constexpr std::uint32_t not_owner_unknown = 0xFFFFFFFF;
// FENCED's `detail`: why this server issues nothing.
inline constexpr std::uint32_t fenced_lost = 0;      // it holds no node id (lost, not claimed yet)
inline constexpr std::uint32_t fenced_draining = 1;  // drained by its operator before a planned stop

// Request flags.
// The request ends with the auth trailer (proto/auth.h): key id, server, timestamp, MAC.
inline constexpr std::uint16_t flag_auth = 0x0001;
inline constexpr std::uint16_t flags_known = flag_auth;

// Why a datagram was not served. The first group is dropped without an answer (not ours, or
// too short to echo a request id); the second is answered BAD_REQUEST with the reason in
// `detail`.
enum class RequestError : std::uint8_t {
  ok = 0,
  // dropped
  too_short = 1,    // shorter than the 20-byte header
  bad_magic = 2,    // not a flurry datagram
  too_long = 3,     // longer than datagram_size_max
  is_response = 4,  // a response (or our own reflection); never answered
  // answered BAD_REQUEST
  bad_version = 16,
  bad_opcode = 17,
  bad_flags = 18,
  reserved_nonzero = 19,
  count_zero = 20,
  count_too_large = 21,
  trailing_bytes = 22,    // padding after the header must be zero bytes
  count_unexpected = 23,  // PING / INFO carry count 0
  name_missing = 24,      // GET_SEQ without a length byte, or with length 0
  name_too_long = 25,     // GET_SEQ name length above seq_name_size_max
  name_truncated = 26,    // the datagram ends inside the name
  name_bad = 27,          // a name byte outside [A-Za-z0-9_.:-]
  // Authentication (32..47), see PROTOCOL.md "Authentication". Answered UNAUTHORIZED unless
  // marked otherwise; the ones found after the MAC was verified are answered signed.
  auth_unsupported = 32,  // flag_auth set, but this server runs with --auth off
  trailer_short = 33,     // flag_auth set, but shorter than header + trailer (44 bytes)
  unknown_key = 34,       // dropped: key id not in the server's key table (as a bad MAC: no oracle)
  stale_timestamp = 35,   // signed: timestamp outside the server's window, or older than this
                          // server's start or its node id's claim
  bad_mac = 36,           // dropped: MAC does not verify (no oracle, no reflection)
  replay = 37,            // dropped: the same signed request was already served in the window
  replay_full = 38,       // dropped: the replay table has no free slot (refuse, never accept)
  not_permitted = 39,     // signed: the key may not use this opcode or batch size
  rate_limited = 40,      // signed: the key's token bucket is empty (GET_IDS: RETRY instead)
  auth_required = 41,     // --auth required and the request is not signed
  wrong_server = 42,      // signed: GET_IDS/GET_SEQ signed for another node id (the answer's
                          // `node` names this server's)
};
inline constexpr std::size_t request_error_slots = 48;  // for per-reason counter arrays

constexpr bool is_answered(RequestError error) {
  return static_cast<std::uint8_t>(error) >= 16 && error != RequestError::bad_mac &&
         error != RequestError::unknown_key && error != RequestError::replay &&
         error != RequestError::replay_full;
}
// The reasons found by authentication (counted per key as well).
constexpr bool is_auth_error(RequestError error) {
  return static_cast<std::uint8_t>(error) >= 32 && static_cast<std::uint8_t>(error) < 48;
}
std::string_view to_string(RequestError error);
std::string_view to_string(Status status);
std::string_view to_string(Opcode opcode);

struct Request {
  Opcode opcode = Opcode::ping;
  std::uint16_t flags = 0;
  std::uint32_t count = 0;
  std::uint64_t request_id = 0;
  SeqName name;  // GET_SEQ only
};

// The auth trailer of a request with flag_auth (PROTOCOL.md "Authentication").
struct AuthTrailer {
  std::uint32_t key_id = 0;
  std::uint32_t server = 0;        // the node id the request is for, or any_server (PING, INFO)
  std::uint64_t timestamp_us = 0;  // client's clock, microseconds since the Unix epoch
  std::uint64_t mac = 0;           // the 8 MAC bytes read big-endian (compared as bytes)
};
inline constexpr std::size_t auth_trailer_size = 24;  // key id 4, server 4, timestamp 8, MAC 8
// The trailer's `server` of a client that does not know the server's node id yet: accepted
// for PING and INFO; GET_IDS and GET_SEQ are answered wrong_server naming the node id.
inline constexpr std::uint32_t any_server = 0xFFFFFFFF;
inline constexpr std::size_t answer_mac_size = 8;  // the MAC ending a signed answer

struct RequestView {
  RequestError error = RequestError::ok;
  Request request;      // valid when error is ok; opcode and request_id also when is_answered()
  AuthTrailer trailer;  // valid when error is ok and request.flags has flag_auth
};

struct Range {
  std::uint64_t first = 0;
  std::uint32_t count = 0;
  friend constexpr bool operator==(const Range&, const Range&) = default;
};

// INFO body: how to decode this server's IDs.
struct Info {
  std::uint64_t epoch_ms = 0;
  std::uint16_t time_unit_ms = 0;
  std::uint8_t time_bits = 0;
  std::uint8_t node_bits = 0;
  std::uint8_t sequence_bits = 0;
  std::uint8_t core_bits = 0;
  std::uint8_t core_from = 0;  // CoreBitsFrom
  std::uint8_t workers = 0;
  friend constexpr bool operator==(const Info&, const Info&) = default;
};

// The INFO body for a layout served by `workers` workers, and back. info_of and layout_of
// are inverses for every field INFO carries; layout_of does not validate (an INFO answer is
// untrusted: check the result with proto::validate before relying on it).
Info info_of(const Layout& layout, std::uint32_t workers);
Layout layout_of(const Info& info);

struct ResponseHeader {
  Opcode opcode = Opcode::ping;
  Status status = Status::ok;
  std::uint8_t range_count = 0;
  std::uint16_t node = 0;
  std::uint64_t request_id = 0;
  std::uint32_t detail = 0;  // RETRY: microseconds to wait; BAD_REQUEST: RequestError
};

// ---- byte order: the only place it is handled ----
// Written as one expression over every byte rather than a loop: a compiler at -O2 does not
// unroll an 8-step loop, but turns the unrolled shifts into one load and a byte swap (movbe /
// bswap), which is what the per-packet path of every backend pays. Stores swap the value and
// store it whole: g++'s store merging split a header's first 8 bytes into four stores, and a
// reader of the bytes just written (the frame path's checksum) then waits for all of them.
template <typename T, std::size_t... i>
constexpr T load_be_bytes(const std::uint8_t* p, std::index_sequence<i...>) {
  return static_cast<T>(((static_cast<T>(p[i]) << (8 * (sizeof(T) - 1 - i))) | ...));
}
template <typename T, std::size_t... i>
constexpr void store_be_bytes(std::uint8_t* p, T value, std::index_sequence<i...>) {
  ((p[i] = static_cast<std::uint8_t>(value >> (8 * (sizeof(T) - 1 - i)))), ...);
}
template <typename T>
constexpr T load_be(const std::uint8_t* p) {
  static_assert(std::is_unsigned_v<T>);
  return load_be_bytes<T>(p, std::make_index_sequence<sizeof(T)>{});
}
template <typename T>
constexpr void store_be(std::uint8_t* p, T value) {
  static_assert(std::is_unsigned_v<T>);
#if defined(__GNUC__)  // g++ and clang: one store of the swapped value, never split by the optimizer
  if (!std::is_constant_evaluated() && std::endian::native == std::endian::little && sizeof(T) > 1) {
    if constexpr (sizeof(T) == 2) value = __builtin_bswap16(value);
    if constexpr (sizeof(T) == 4) value = __builtin_bswap32(value);
    if constexpr (sizeof(T) == 8) value = __builtin_bswap64(value);
    std::memcpy(p, &value, sizeof value);
    return;
  }
#endif
  store_be_bytes<T>(p, value, std::make_index_sequence<sizeof(T)>{});
}

// Offsets inside the request header.
namespace request_offset {
inline constexpr std::size_t magic = 0, version = 2, opcode = 3, flags = 4, reserved = 6, count = 8,
                             request_id = 12;
}
// Offsets inside the response header.
namespace response_offset {
inline constexpr std::size_t magic = 0, version = 2, opcode = 3, status = 4, range_count = 5, node = 6,
                             request_id = 8, detail = 16;
}
static_assert(request_offset::request_id + 8 == request_header_size);
static_assert(response_offset::detail + 4 == response_header_size);
static_assert(request_header_size <= datagram_size_max);

// The largest response allowed for a request of `request_size` bytes.
constexpr std::size_t response_size_max(std::size_t request_size) {
  const std::size_t by_amplification = amplification_max * request_size;
  return by_amplification < datagram_size_max ? by_amplification : datagram_size_max;
}
// How many ranges fit an answer of at most `room` bytes.
constexpr std::size_t ranges_in(std::size_t room) {
  const std::size_t ranges = room <= response_header_size ? 0 : (room - response_header_size) / range_size;
  return ranges > 255 ? 255 : ranges;
}
// How many ranges a GET_IDS answer to a request of `request_size` bytes may carry.
constexpr std::size_t ranges_max(std::size_t request_size) {
  return ranges_in(response_size_max(request_size));
}
// A bare 20-byte request buys 3 ranges; the largest datagram buys 121.
static_assert(ranges_max(request_header_size) == 3);
static_assert(ranges_max(datagram_size_max) == 121);
static_assert(response_header_size + info_body_size <= response_size_max(request_header_size));
// The request size that buys `ranges` ranges (clients pad requests with zeros to this size).
constexpr std::size_t request_size_for_ranges(std::size_t ranges) {
  const std::size_t response = response_header_size + ranges * range_size;
  const std::size_t size = (response + amplification_max - 1) / amplification_max;
  return size < request_header_size ? request_header_size : size;
}
static_assert(ranges_max(request_size_for_ranges(50)) >= 50);
// How many ranges an answer may need for `count` IDs when one range holds at most
// `ids_per_range` (the layout's counter capacity, from INFO): ceil(count / ids_per_range) + 1,
// because the first range may start mid-unit (another client took the unit's first IDs);
// never more than the largest datagram carries. PROTOCOL.md "How a client asks for N IDs".
constexpr std::size_t ranges_for_ids(std::uint64_t count, std::uint64_t ids_per_range) {
  const std::uint64_t per_range = ids_per_range == 0 ? 1 : ids_per_range;
  const std::uint64_t ranges = (count + per_range - 1) / per_range + 1;
  const std::size_t limit = ranges_max(datagram_size_max);
  return ranges > limit ? limit : static_cast<std::size_t>(ranges);
}
// The padded request size that asks for `count` IDs in one answer where the datagram allows.
constexpr std::size_t request_size_for_ids(std::uint64_t count, std::uint64_t ids_per_range) {
  return request_size_for_ranges(ranges_for_ids(count, ids_per_range));
}
// The worked examples of PROTOCOL.md.
static_assert(request_size_for_ids(20'000, 4096) == 31);
static_assert(request_size_for_ids(100'000, 1024) == 403);
static_assert(ranges_for_ids(1U << 20, 4096) == 121);

// Checks a datagram. Never reads outside `datagram`.
RequestView decode_request(std::span<const std::uint8_t> datagram);
// The same into `view`, which it overwrites whole but for the name's bytes past its size
// (never read): a caller that decodes into one view again and again (core::Handler, once a
// request) does not clear ~90 bytes each time.
void decode_request(std::span<const std::uint8_t> datagram, RequestView& view);

// The bytes a request carries after its header before any padding: GET_SEQ's name (length
// byte + name), nothing for the other opcodes.
constexpr std::size_t request_body_size(const Request& request) {
  return request.opcode == Opcode::get_seq ? 1 + std::size_t{request.name.size} : 0;
}

// Writes a request of max(request_header_size (+ 1 + name size for GET_SEQ), padded_size)
// bytes (zero padding) into `out`. Returns the size written, or 0 if `out` is too small or
// the size would exceed datagram_size_max.
std::size_t encode_request(const Request& request, std::span<std::uint8_t> out,
                           std::size_t padded_size = request_header_size);

// Writes a response header; returns response_header_size (out must hold it).
std::size_t encode_response_header(const ResponseHeader& header, std::span<std::uint8_t> out);
// Writes range number `index` after the header (out must hold it).
void encode_range(std::span<std::uint8_t> out, std::size_t index, const Range& range);

// ---- the UDP checksum of an answer, from the values encoded (RFC 1071) ----
// Every field of a response header and of a range starts at an even offset, so a field's
// big-endian 16-bit words sum, modulo 0xffff, to the field's value (2^16 = 1 modulo 0xffff):
// the one's-complement sum of encoded bytes is the sum of the values stored, taken modulo
// 2^64 - 1 (a multiple of 0xffff) by adding the carry out of bit 63 back in. A sender that
// checksums an answer right after encoding it adds these instead of reading the bytes back.

// a + b modulo 2^64 - 1 (end-around carry): the sum keeps its value modulo 0xffff.
constexpr std::uint64_t ones_sum_add(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t sum = a + b;
  return sum + (sum < b ? 1 : 0);
}
// The response header's first 8 bytes (magic, version, opcode, status, range count, node) as
// one big-endian word: what encode_response_header stores there.
constexpr std::uint64_t response_header_word(const ResponseHeader& header) {
  const auto opcode =
      static_cast<std::uint8_t>(static_cast<std::uint8_t>(header.opcode) | opcode_response_bit);
  return std::uint64_t{wire_magic} << 48 | std::uint64_t{wire_version} << 40 | std::uint64_t{opcode} << 32 |
         std::uint64_t{static_cast<std::uint8_t>(header.status)} << 24 |
         std::uint64_t{header.range_count} << 16 | header.node;
}
static_assert(response_offset::request_id % 2 == 0 && response_offset::detail % 2 == 0 &&
              response_header_size % 2 == 0 && range_size % 2 == 0);
// What encode_response_header's bytes add to the sum (fold it with a 16-bit fold to use it).
constexpr std::uint64_t response_header_sum(const ResponseHeader& header) {
  return ones_sum_add(ones_sum_add(response_header_word(header), header.request_id), header.detail);
}
// What encode_range's bytes add to the sum.
constexpr std::uint64_t range_sum(const Range& range) { return ones_sum_add(range.first, range.count); }
// Writes the INFO body after the header; returns response_header_size + info_body_size.
std::size_t encode_info(std::span<std::uint8_t> out, const Info& info);

// Why a response datagram was rejected. decode_response checks in this order and stops at the
// first failure (PROTOCOL.md "Response decoding"); a client uses nothing from a rejected
// datagram. Every check here needs only the datagram; the checks that need the request
// (request id, opcode, no more IDs than asked) are the client's.
enum class ResponseError : std::uint8_t {
  ok,
  too_short,     // shorter than the 20-byte header
  bad_magic,     // not a flurry datagram
  too_long,      // longer than datagram_size_max
  bad_version,   // version is not 1
  not_response,  // bit 7 of the opcode byte is clear (a request, maybe our own reflected)
  // From here on the header fields are decoded into ResponseView::header.
  bad_status,         // status is not a v1 Status (0..6)
  bad_opcode,         // opcode not GET_IDS, PING, INFO or GET_SEQ, with a status other than BAD_REQUEST
  status_unexpected,  // RETRY or FENCED answering PING or INFO; UNKNOWN_SEQUENCE or NOT_OWNER
                      // answering anything but GET_SEQ
  ranges_unexpected,  // range_count is not 0, but the answer is not GET_IDS / GET_SEQ with status OK
  ranges_missing,     // GET_IDS or GET_SEQ with status OK and range_count 0
  bad_length,         // the body is not exactly range_count x 12 bytes (16 for INFO OK)
  bad_range,          // a range with count 0, reaching 2^63, or not above the previous range
};
std::string_view to_string(ResponseError error);

struct ResponseView {
  ResponseError error = ResponseError::ok;
  ResponseHeader header;                 // valid when error is ok or comes after not_response
  std::span<const std::uint8_t> body;    // ranges (range_count * 12 bytes) or INFO body
  Range range(std::size_t index) const;  // index < header.range_count
  Info info() const;                     // body.size() == info_body_size
};

// Checks a response datagram (client side). Never reads outside `datagram`, never allocates.
// Responses are marked by the top bit of the opcode byte so a server never mistakes a
// reflected response for a request.
ResponseView decode_response(std::span<const std::uint8_t> datagram);

}  // namespace flurry::proto
