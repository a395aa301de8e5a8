// dataplane/plain_path.h — the DPDK worker's fast path for the common request (frame::PlainPath).
//
// A plain GET_IDS (no flags, so unsigned; zero padding; count 1..count_max) in an Ethernet /
// IPv4 / UDP frame to us with nothing unusual about it (no IPv4 options, no Ethernet padding,
// UDP length = the IPv4 payload), answered OK with one range: most of what a busy server
// receives. answer() checks such a frame with a few masked 8-byte compares, takes its one range
// from the handler (Handler::issue_plain) and writes the answer over it in one pass: headers as
// whole words, checksums by RFC 1624 incremental update of a template answer's (set up once a
// burst, with every field that differs between answers 0: eqn. 3 with m = 0 leaves
// ~HC' = ~HC + m'), so nothing is summed byte by byte. The request's checksums are verified as
// process() verifies them (RxMeta: trusted where the port checked them, else summed from the
// words the checks loaded anyway).
//
// Contract: answer() either answers a frame exactly as frame::process() would have (the same
// bytes up to the returned length, the same IDs, the same handler counters once finish() ran,
// and the same TX offload flags, those of Result::offload_*) or returns 0 having written
// nothing, issued nothing and counted nothing: the caller then passes that frame to process().
// It reads only the first `length` bytes, never allocates, never throws.
// tests/dataplane/plain_path_test.cc holds it to that against process() byte for byte.
//
// Inline, so that it compiles into the worker's loop (per-port constants stay in registers,
// no call a packet). Words are little-endian images of the frame's bytes (byte i of a word
// loaded at offset o is frame byte o + i), so that a header is checked and written 8 bytes at a
// time; on a big-endian host prepare() declines and every frame takes process(). Checksums are
// sums of host-order 16-bit lanes (RFC 1071: the sum does not depend on byte order) taken as
// 32-bit halves added in a 64-bit register (2^32 = 1 modulo 2^16 - 1), independent adds the
// CPU runs side by side, folded once and stored as they are.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "core/handler.h"
#include "dataplane/frame.h"
#include "proto/wire.h"

namespace flurry::dataplane::frame {

namespace plain_detail {

inline constexpr bool built = std::endian::native == std::endian::little;

// The word whose byte `index` (0..7) is `byte`.
constexpr std::uint64_t byte_at(unsigned index, std::uint64_t byte) { return byte << (8 * index); }
// A big-endian field's bytes as they lie in memory, read as a little-endian integer.
constexpr std::uint64_t be16_image(std::uint16_t value) {
  return static_cast<std::uint16_t>(value << 8 | value >> 8);
}
constexpr std::uint64_t be32_image(std::uint32_t value) { return __builtin_bswap32(value); }

[[gnu::always_inline]] inline std::uint64_t load64(const std::uint8_t* p) {
  std::uint64_t value;
  std::memcpy(&value, p, sizeof value);
  return value;
}
// A 64-bit word's 16-bit lanes, as two 32-bit halves (sum < 2^33).
constexpr std::uint64_t halves(std::uint64_t word) { return (word & 0xffff'ffff) + (word >> 32); }
// Folds a lane sum below 2^40 to 16 bits (not inverted): zero only if the sum is.
constexpr std::uint64_t fold(std::uint64_t sum) {
  sum = (sum & 0xffff) + (sum >> 16);   // < 2^25
  sum = (sum & 0xffff) + (sum >> 16);   // < 0x1'0200
  return (sum & 0xffff) + (sum >> 16);  // <= 0xffff
}
// Any lane sum (up to 2^64 - 1) folded to 16 bits, for the templates.
constexpr std::uint64_t fold_wide(std::uint64_t sum) { return fold(halves(halves(sum))); }

// Offsets of the plain request (PROTOCOL.md; udp_payload_offset = 42).
inline constexpr std::size_t request_length_min = udp_payload_offset + proto::request_header_size;  // 62
inline constexpr std::size_t request_length_max = udp_payload_offset + proto::datagram_size_max;
inline constexpr std::size_t request_id_at = udp_payload_offset + proto::request_offset::request_id;  // 54
static_assert(udp_payload_offset + proto::request_offset::count == 50 && request_id_at == 54 &&
              request_length_min == 62);
inline constexpr std::size_t answer_length =
    udp_payload_offset + proto::response_header_size + proto::range_size;
static_assert(answer_length == 74);
inline constexpr std::uint16_t answer_ip_length = answer_length - ether_header_size;     // 60
inline constexpr std::uint16_t answer_udp_length = answer_ip_length - ipv4_header_size;  // 40

// Request word masks (which bytes are checked) and fixed expected values.
// Word 0 (bytes 0..7): destination MAC, and the source MAC's multicast bit.
inline constexpr std::uint64_t mask_mac = 0x0001'ffff'ffff'ffff;
// Word 1 (8..15): EtherType IPv4, version 4 with a 20-byte header.
inline constexpr std::uint64_t mask_type = 0x00ff'ffff'0000'0000;
inline constexpr std::uint64_t expect_type = byte_at(4, 0x08) | byte_at(5, 0x00) | byte_at(6, 0x45);
// Word 2 (16..23): total length, more-fragments flag and fragment offset, protocol UDP.
inline constexpr std::uint64_t mask_ip = 0xff00'ff3f'0000'ffff;
inline constexpr std::uint64_t expect_ip_protocol = byte_at(7, ip_proto_udp);
// Word 3 (24..31): the destination address's first two bytes (bytes 30, 31).
inline constexpr std::uint64_t mask_dst_ip_high = 0xffff'0000'0000'0000;
// Word 4 (32..39): its last two, destination port, UDP length.
inline constexpr std::uint64_t mask_dst_ip_low_port = 0xffff'ffff'0000'ffff;
// Word 5 (40..47): magic, version, opcode GET_IDS, flags 0.
inline constexpr std::uint64_t mask_request_head = 0xffff'ffff'ffff'0000;
inline constexpr std::uint64_t expect_request_head =
    byte_at(2, proto::wire_magic >> 8) | byte_at(3, proto::wire_magic & 0xff) |
    byte_at(4, proto::wire_version) | byte_at(5, static_cast<std::uint8_t>(proto::Opcode::get_ids));
// Word 6 (48..55): reserved 0 (the count and the request id's first bytes follow).
inline constexpr std::uint64_t mask_reserved = 0xffff;

// Answer words that never change: bytes 16..23 (total length 60, id 0, DF, TTL 64, UDP) and the
// response's fixed bytes 42..47 (magic, version, opcode GET_IDS | response, status OK, 1 range).
inline constexpr std::uint64_t answer_ip_words =
    be16_image(answer_ip_length) | byte_at(4, 0x40) | byte_at(6, ip_ttl_answer) | byte_at(7, ip_proto_udp);
inline constexpr std::uint64_t answer_response_head =
    byte_at(2, proto::wire_magic >> 8) | byte_at(3, proto::wire_magic & 0xff) |
    byte_at(4, proto::wire_version) |
    byte_at(5, static_cast<std::uint8_t>(proto::Opcode::get_ids) | proto::opcode_response_bit) |
    byte_at(6, static_cast<std::uint8_t>(proto::Status::ok)) | byte_at(7, 1);

}  // namespace plain_detail

class PlainPath {
 public:
  static constexpr std::size_t answer_length = plain_detail::answer_length;

  PlainPath(const Identity& identity, const TxOffload& tx) : tx_(tx) {
    using namespace plain_detail;
    for (unsigned i = 0; i < 6; ++i) mac_ |= byte_at(i, identity.mac[i]);
    ip_image_ = be32_image(identity.ip);
    port_image_ = be16_image(identity.port);
    expect_dst_ip_high_ = (ip_image_ & 0xffff) << 48;
    expect_dst_ip_low_port_ = (ip_image_ >> 16) | port_image_ << 32;
    // Answer bytes 8..15: our MAC's last four bytes, EtherType IPv4, version 4 / 20 bytes, TOS 0.
    answer_mac_type_ = (mac_ >> 16) | expect_type;
    // The template answer's sums, with the fields that differ between answers at 0.
    // IPv4 header: version/TOS, bytes 16..23, our address (the checksum field counts 0).
    ip_template_ = fold_wide(byte_at(0, 0x45) + halves(answer_ip_words) + halves(ip_image_));
    // UDP pseudo-header: our address, protocol, UDP length (the client's address is added).
    pseudo_template_ =
        fold_wide(halves(ip_image_) + be16_image(ip_proto_udp) + be16_image(answer_udp_length));
  }

  // Once a burst, before answer(): false when no frame of this burst can take the fast path
  // (the handler requires authentication, or is fenced); then call process() for each.
  bool prepare(const core::Handler& handler, const core::Burst& burst) {
    using namespace plain_detail;
    if (!built || !handler.plain_allowed(burst)) return false;
    node_image_ = be16_image(handler.node());
    // UDP without offload: the pseudo-header, our port, the UDP length again, the response's
    // fixed bytes and the node.
    udp_template_ = fold_wide(pseudo_template_ + port_image_ + be16_image(answer_udp_length) +
                              halves(answer_response_head) + node_image_);
    return true;
  }

  // The answer's length (74 bytes: one range), or 0: not taken, see the contract above.
  // Always inlined: GCC keeps a body this size out of line otherwise, and the call with its
  // register saves cost a tenth of the function in the worker's profile.
  [[gnu::always_inline]] std::size_t answer(std::span<std::uint8_t> buffer, std::size_t length,
                                            const RxMeta& rx, core::Handler& handler,
                                            const core::Burst& burst) {
    using namespace plain_detail;
    if (length < request_length_min || length > request_length_max || length > buffer.size() ||
        buffer.size() < buffer_size_min || rx.ip == Checksum::bad || rx.l4 == Checksum::bad) {
      return 0;
    }
    std::uint8_t* frame = buffer.data();
    const std::uint64_t w0 = load64(frame);
    const std::uint64_t w1 = load64(frame + 8);
    const std::uint64_t w2 = load64(frame + 16);
    const std::uint64_t w3 = load64(frame + 24);
    const std::uint64_t w4 = load64(frame + 32);
    const std::uint64_t w5 = load64(frame + 40);
    const std::uint64_t w6 = load64(frame + 48);
    const std::uint64_t request_id = load64(frame + request_id_at);  // bytes 54..61, as stored
    const auto ip_length = static_cast<std::uint16_t>(length - ether_header_size);
    const auto udp_length = static_cast<std::uint16_t>(ip_length - ipv4_header_size);
    // Every fixed field at once: one branch for the lot.
    const std::uint64_t differs =
        ((w0 ^ mac_) & mask_mac) | ((w1 ^ expect_type) & mask_type) |
        ((w2 ^ (be16_image(ip_length) | expect_ip_protocol)) & mask_ip) |
        ((w3 ^ expect_dst_ip_high_) & mask_dst_ip_high) |
        ((w4 ^ (expect_dst_ip_low_port_ | be16_image(udp_length) << 48)) & mask_dst_ip_low_port) |
        ((w5 ^ expect_request_head) & mask_request_head) | (w6 & mask_reserved);
    const std::uint64_t client_ip = (w3 >> 16) & 0xffff'ffff;  // bytes 26..29
    const std::uint64_t client_port = (w4 >> 16) & 0xffff;     // bytes 34..35
    const std::uint64_t count_image = (w6 >> 16) & 0xffff'ffff;
    const std::uint32_t count = __builtin_bswap32(static_cast<std::uint32_t>(count_image));
    // The source must be answerable: not 0/8, 127/8, multicast or above (process()'s rule).
    const auto source_first = static_cast<std::uint8_t>(client_ip);
    if (differs != 0 || client_port == 0 || count - 1 >= proto::count_max || source_first == 0 ||
        source_first == 127 || source_first >= 224) {
      return 0;
    }
    if (length > request_length_min && !padding_is_zero(frame, length)) return 0;
    // The request's checksums where the port did not check them; the words are loaded already.
    if (rx.ip == Checksum::unknown && fold((w1 >> 48) + halves(w2) + halves(w3) + (w4 & 0xffff)) != 0xffff) {
      return 0;
    }
    if (rx.l4 == Checksum::unknown && (w5 & 0xffff) != 0) {
      // Pseudo-header (addresses, protocol, length), UDP header, payload (the padding adds 0).
      const std::uint64_t sum = halves(w3 >> 16) + (w4 & 0xffff) + be16_image(ip_proto_udp) +
                                be16_image(udp_length) + halves(w4 >> 16) + halves(w5) + halves(w6) +
                                halves(request_id >> 16);
      if (fold(sum) != 0xffff) return 0;
    }
    proto::Range range;
    // The per-source bound (docs/fairness.md): the client's bucket pays for the whole count
    // before anything is issued. Refused: process() answers the frame from the same bucket
    // (fewer IDs, or RETRY with the refill time) and counts it. Off: admitted, no table read.
    const core::SourceCharge charge = handler.charge_source(
        core::Source::ipv4(__builtin_bswap32(static_cast<std::uint32_t>(client_ip))), count, burst);
    if (!charge.admitted) return 0;
    if (!handler.issue_plain(count, burst, &range)) {
      handler.refund_source(charge, count);  // the ceiling: process() answers and charges anew
      return 0;
    }

    // The answer, over the request: every word from values in registers.
    const std::uint64_t first_image = __builtin_bswap64(range.first);
    const std::uint64_t ip_checksum = tx_.ipv4_checksum ? 0 : (~fold(ip_template_ + client_ip) & 0xffff);
    std::uint64_t udp_checksum;
    if (tx_.udp_checksum) {  // the port adds the datagram to the pseudo-header sum stored here
      udp_checksum = fold(pseudo_template_ + client_ip);
    } else {
      const std::uint64_t sum =
          udp_template_ + client_ip + client_port + halves(request_id) + halves(first_image) + count_image;
      udp_checksum = ~fold(sum) & 0xffff;
      if (udp_checksum == 0) udp_checksum = 0xffff;  // 0 means "no checksum" in UDP
    }
    const std::uint64_t a0 =
        (w0 >> 48) | ((w1 & 0xffff'ffff) << 16) | (mac_ & 0xffff) << 48;  // to the client
    const std::uint64_t a3 = ip_checksum | ip_image_ << 16 | (client_ip & 0xffff) << 48;
    const std::uint64_t a4 =
        (client_ip >> 16) | port_image_ << 16 | client_port << 32 | be16_image(answer_udp_length) << 48;
    const std::uint64_t a5 = udp_checksum | answer_response_head;
    const std::uint64_t a6 = node_image_ | request_id << 16;
    const std::uint64_t a7 = (request_id >> 48) | first_image << 48;  // the detail (58..61) is 0
    const std::uint64_t a8 = (first_image >> 16) | count_image << 48;
    const auto a9 = static_cast<std::uint16_t>(count_image >> 16);
    std::memcpy(frame, &a0, 8);
    std::memcpy(frame + 8, &answer_mac_type_, 8);
    std::memcpy(frame + 16, &answer_ip_words, 8);
    std::memcpy(frame + 24, &a3, 8);
    std::memcpy(frame + 32, &a4, 8);
    std::memcpy(frame + 40, &a5, 8);
    std::memcpy(frame + 48, &a6, 8);
    std::memcpy(frame + 56, &a7, 8);
    std::memcpy(frame + 64, &a8, 8);
    std::memcpy(frame + 72, &a9, 2);
    ++answered_;
    ids_ += count;
    return answer_length;
  }

  // Once a burst, after the last answer(): the handler's counters for the answers given.
  void finish(core::Handler& handler) {
    if (answered_ == 0) return;
    handler.count_plain(answered_, ids_);
    answered_ = 0;
    ids_ = 0;
  }

  bool offload_ipv4_checksum() const { return tx_.ipv4_checksum; }
  bool offload_udp_checksum() const { return tx_.udp_checksum; }

 private:
  // The bytes after the 20-byte header, up to `length`, are zero (decode_request's
  // trailing_bytes otherwise). Out of line: a padded request is the rarer case.
  [[gnu::noinline]] static bool padding_is_zero(const std::uint8_t* frame, std::size_t length) {
    std::uint64_t padding = 0;
    std::size_t at = plain_detail::request_length_min;
    for (; at + 8 <= length; at += 8) padding |= plain_detail::load64(frame + at);
    for (; at < length; ++at) padding |= frame[at];
    return padding == 0;
  }

  TxOffload tx_;
  // Little-endian images: our MAC (bytes 0..5), address, port; the request's expected words
  // under their masks; the answer's bytes 8..15.
  std::uint64_t mac_ = 0, ip_image_ = 0, port_image_ = 0;
  std::uint64_t expect_dst_ip_high_ = 0, expect_dst_ip_low_port_ = 0;
  std::uint64_t answer_mac_type_ = 0;
  // Template sums, folded to 16 bits: IPv4 header, UDP pseudo-header, and the whole UDP answer
  // (set by prepare(): it holds the handler's node).
  std::uint64_t ip_template_ = 0, pseudo_template_ = 0, udp_template_ = 0;
  std::uint64_t node_image_ = 0;  // the answer's node field, as stored (bytes 48..49)
  std::uint64_t answered_ = 0, ids_ = 0;
};

}  // namespace flurry::dataplane::frame
