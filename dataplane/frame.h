// dataplane/frame.h — Ethernet frame handling for the DPDK backend, as pure functions over
// a byte span (no EAL, no mbuf: unit-tested on plain buffers in tests/dataplane/).
//
// Contract of process():
//   * every frame leaves exactly one way: answered in place (ARP reply, ICMP echo reply,
//     UDP answer from core::Handler) or dropped with one named Drop reason;
//   * it never reads past `length` nor writes past `buffer`, never allocates, never throws;
//   * an answer is built in the same bytes: MACs, IPs and ports swapped, fresh IPv4 header
//     checksum and UDP / ICMP checksum, computed here in software unless the caller says
//     the port offloads them (then the IPv4 checksum is left 0 and the UDP checksum field
//     holds the pseudo-header sum, as DPDK's TX checksum offload expects);
//   * only what is ours is answered: unicast to our MAC (ARP also broadcast), IPv4 to our
//     IP without options or fragments, UDP to our port; sources that cannot be answered
//     safely (multicast / broadcast MAC or IP, 0.0.0.0, loopback, UDP port 0) are dropped
//     so the appliance never reflects traffic at a third party.
// The checksums the NIC already verified (RxMeta) are not computed again.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/handler.h"
#include "proto/wire.h"

namespace flurry::dataplane::frame {

inline constexpr std::size_t ether_header_size = 14;
inline constexpr std::size_t arp_body_size = 28;     // Ethernet / IPv4 ARP
inline constexpr std::size_t ipv4_header_size = 20;  // no options: anything longer is dropped
inline constexpr std::size_t udp_header_size = 8;
inline constexpr std::size_t icmp_header_size = 8;
inline constexpr std::size_t udp_payload_offset = ether_header_size + ipv4_header_size + udp_header_size;
// The writable room a frame buffer must have: headers plus the largest answer.
inline constexpr std::size_t buffer_size_min = udp_payload_offset + proto::datagram_size_max;
static_assert(udp_payload_offset == 42);
static_assert(buffer_size_min == 1514);

inline constexpr std::uint16_t ether_type_ipv4 = 0x0800;
inline constexpr std::uint16_t ether_type_arp = 0x0806;
inline constexpr std::uint8_t ip_proto_icmp = 1;
inline constexpr std::uint8_t ip_proto_udp = 17;
inline constexpr std::uint8_t ip_ttl_answer = 64;

using MacAddress = std::array<std::uint8_t, 6>;

// Why a frame was dropped. Names are the metric label values (to_string).
enum class Drop : std::uint8_t {
  too_short,            // shorter than the headers it announces
  not_contiguous,       // spread over several buffers (jumbo / chained mbuf)
  l2_not_for_us,        // destination MAC neither ours nor (for ARP) broadcast
  l2_bad_source,        // source MAC multicast or broadcast
  ether_type_other,     // neither IPv4 nor ARP (IPv6, VLAN tag, LLDP...)
  arp_malformed,        // not an Ethernet/IPv4 ARP packet
  arp_not_request,      // ARP reply or other operation
  arp_not_for_us,       // ARP request for another IP
  ip_bad_header,        // version not 4 or header length below 20
  ip_options,           // IPv4 header with options
  ip_bad_length,        // total length below the header or past the frame
  ip_fragment,          // more-fragments flag or a fragment offset
  ip_bad_checksum,      // header checksum wrong
  ip_not_for_us,        // destination is not our IP
  ip_bad_source,        // source 0.0.0.0, loopback, multicast or broadcast
  ip_proto_other,       // neither UDP nor ICMP
  icmp_not_echo,        // ICMP other than echo request
  icmp_bad_checksum,    // ICMP checksum wrong
  udp_bad_length,       // UDP length below 8 or past the IPv4 payload
  udp_wrong_port,       // UDP to another port
  udp_bad_source_port,  // UDP source port 0 (cannot be answered)
  udp_bad_checksum,     // UDP checksum wrong
  no_room,              // buffer below buffer_size_min (a set-up error; never expected)
  count_,
};
inline constexpr std::size_t drop_count = static_cast<std::size_t>(Drop::count_);
std::string_view to_string(Drop drop);

// `payload_dropped`: a UDP datagram for us that core::Handler dropped; the handler already
// counted it by reason (request_errors), so the caller frees it without a second count.
enum class Action : std::uint8_t { drop, payload_dropped, arp_reply, icmp_echo_reply, udp_answer };

// The appliance's address on this port. `ip` in host byte order.
struct Identity {
  MacAddress mac{};
  std::uint32_t ip = 0;
  std::uint16_t port = 0;
};

// What the port already checked on receive (DPDK RX checksum flags).
enum class Checksum : std::uint8_t { unknown, good, bad };
struct RxMeta {
  Checksum ip = Checksum::unknown;
  Checksum l4 = Checksum::unknown;
};

// What the port computes on transmit (UDP answers only; ARP / ICMP are rare and done here).
struct TxOffload {
  bool ipv4_checksum = false;
  bool udp_checksum = false;
};

struct Result {
  Action action = Action::drop;
  Drop drop = Drop::too_short;  // valid when action == drop
  std::size_t length = 0;       // frame length to transmit
  // UDP answers only: the caller sets the mbuf's TX offload flags for these.
  bool offload_ipv4_checksum = false;
  bool offload_udp_checksum = false;
};

// Handles one received frame in place. `buffer` is the writable room of the frame (at least
// buffer_size_min bytes to answer UDP); the received frame is its first `length` bytes.
// UDP payloads for us go to handler.handle(payload, same bytes, burst).
Result process(std::span<std::uint8_t> buffer, std::size_t length, const RxMeta& rx, const Identity& identity,
               const TxOffload& tx, core::Handler& handler, const core::Burst& burst);

// The fast path of the common request (a plain GET_IDS answered with one range) is
// PlainPath, in dataplane/plain_path.h: inline, so that it compiles into the worker's loop.

// ---- building blocks, exposed for tests and for answers built elsewhere ----

// One's-complement sum of `bytes` (odd length padded with a zero byte) added to `sum`,
// not folded and not inverted.
std::uint32_t checksum_add(std::uint32_t sum, std::span<const std::uint8_t> bytes);
// Folds a sum to 16 bits and inverts it: the value to store in a checksum field.
std::uint16_t checksum_finish(std::uint32_t sum);
// The IPv4 / UDP pseudo-header sum (source, destination, protocol, UDP length), not inverted.
std::uint32_t pseudo_header_sum(std::uint32_t source_ip, std::uint32_t destination_ip, std::uint8_t protocol,
                                std::uint16_t length);
// RFC 1624 eqn. 3: a checksum field's new value after one 16-bit word of the data it covers
// changed from `old_word` to `new_word`: HC' = ~(~HC + ~m + m'). Equals the checksum summed
// afresh over the changed data, with no -0 / +0 ambiguity (RFC 1624 section 3).
std::uint16_t checksum_update(std::uint16_t checksum, std::uint16_t old_word, std::uint16_t new_word);

}  // namespace flurry::dataplane::frame
