// dataplane/frame.cc — see frame.h. Byte order goes through proto::load_be / store_be only.
#include "dataplane/frame.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <optional>

namespace flurry::dataplane::frame {

namespace {

using proto::load_be;
using proto::ones_sum_add;  // a + b with the carry out of bit 63 added back in (add, adc)
using proto::store_be;

// Ethernet header offsets.
constexpr std::size_t eth_destination = 0, eth_source = 6, eth_type = 12;
// ARP offsets, from the start of the ARP body.
namespace arp {
constexpr std::size_t hardware_type = 0, protocol_type = 2, hardware_size = 4, protocol_size = 5,
                      operation = 6, sender_mac = 8, sender_ip = 14, target_mac = 18, target_ip = 24;
constexpr std::uint16_t operation_request = 1, operation_reply = 2;
}  // namespace arp
// IPv4 offsets, from the start of the IPv4 header.
namespace ip {
constexpr std::size_t version_ihl = 0, tos = 1, total_length = 2, id = 4, fragment = 6, ttl = 8, protocol = 9,
                      checksum = 10, source = 12, destination = 16;
constexpr std::uint16_t flag_dont_fragment = 0x4000, flag_more_fragments = 0x2000,
                        fragment_offset_mask = 0x1fff;
constexpr std::uint8_t version_ihl_plain = 0x45;  // version 4, 5 words: no options
}  // namespace ip
// UDP / ICMP offsets, from the start of their header.
namespace udp {
constexpr std::size_t source_port = 0, destination_port = 2, length = 4, checksum = 6;
}
namespace icmp {
constexpr std::size_t type = 0, code = 1, checksum = 2;
constexpr std::uint8_t type_echo_reply = 0, type_echo_request = 8;
}  // namespace icmp

constexpr std::size_t ip_offset = ether_header_size;
constexpr std::size_t l4_offset = ether_header_size + ipv4_header_size;

// ---- the one's-complement sum (RFC 1071) ----
// RFC 1071 section 2: the sum does not depend on byte order, so bytes are added as 64-bit
// host-order words with the carry out of bit 63 wrapped around to bit 0 (2^64 = 1 modulo
// 2^16 - 1), folded to 16 bits once at the end, and swapped to network order. Loads go
// through memcpy, so any start address is fine; the 16-bit lanes stay aligned with the
// buffer's start because every step below consumes a multiple of 2 bytes but the last.

template <typename T>
[[gnu::always_inline]] inline T load_host(const std::uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

// The sum of `size` bytes as host-order 16-bit lanes, not folded. Two accumulators over 32
// bytes a round so that the carry chains of neighbouring words overlap.
[[gnu::always_inline]] inline std::uint64_t sum_host_order(const std::uint8_t* data, std::size_t size) {
  std::uint64_t a = 0, b = 0;
  for (; size >= 32; data += 32, size -= 32) {
    a = ones_sum_add(a, load_host<std::uint64_t>(data));
    b = ones_sum_add(b, load_host<std::uint64_t>(data + 8));
    a = ones_sum_add(a, load_host<std::uint64_t>(data + 16));
    b = ones_sum_add(b, load_host<std::uint64_t>(data + 24));
  }
  a = ones_sum_add(a, b);
  if ((size & 16) != 0) {
    a = ones_sum_add(a, load_host<std::uint64_t>(data));
    a = ones_sum_add(a, load_host<std::uint64_t>(data + 8));
    data += 16;
  }
  if ((size & 8) != 0) {
    a = ones_sum_add(a, load_host<std::uint64_t>(data));
    data += 8;
  }
  if ((size & 4) != 0) {
    a = ones_sum_add(a, load_host<std::uint32_t>(data));
    data += 4;
  }
  if ((size & 2) != 0) {
    a = ones_sum_add(a, load_host<std::uint16_t>(data));
    data += 2;
  }
  if ((size & 1) != 0) {  // the odd last byte is the high byte of a zero-padded 16-bit word
    a = ones_sum_add(
        a, std::endian::native == std::endian::little ? std::uint64_t{data[0]} : std::uint64_t{data[0]} << 8);
  }
  return a;
}

// The same sum in 4-byte loads, for bytes just written by the handler: proto's encoders store
// 8- and 4-byte fields at 4-byte offsets, so every load here lies inside one store and is
// forwarded from the store buffer; an 8-byte load spanning two stores waits for both to
// reach the cache (that wait was a quarter of process() in a memif profile). Up to 2^32 words
// fit the accumulator without a carry.
[[gnu::always_inline]] inline std::uint64_t sum_host_order_stored(const std::uint8_t* data,
                                                                  std::size_t size) {
  std::uint64_t a = 0;
  for (; size >= 4; data += 4, size -= 4) a += load_host<std::uint32_t>(data);
  if ((size & 2) != 0) {
    a += load_host<std::uint16_t>(data);
    data += 2;
  }
  if ((size & 1) != 0)
    a += std::endian::native == std::endian::little ? data[0] : std::uint32_t{data[0]} << 8;
  return a;
}

// Folds a 64-bit one's-complement sum to 16 bits (not inverted); each step keeps the value
// congruent modulo 2^16 - 1 and the last leaves it at most 0xffff.
[[gnu::always_inline]] inline std::uint16_t fold_to_16(std::uint64_t sum) {
  sum = (sum & 0xffffffff) + (sum >> 32);  // <= 0x1'ffff'fffe
  sum = (sum & 0xffffffff) + (sum >> 32);  // <= 0xffff'ffff
  sum = (sum & 0xffff) + (sum >> 16);      // <= 0x1'fffe
  sum = (sum & 0xffff) + (sum >> 16);      // <= 0xffff
  return static_cast<std::uint16_t>(sum);
}

// checksum_finish, inlined where the frame path needs it.
[[gnu::always_inline]] inline std::uint16_t finish_sum(std::uint32_t sum) {
  return static_cast<std::uint16_t>(~fold_to_16(sum));
}

// A folded host-order sum as the value of big-endian words.
[[gnu::always_inline]] inline std::uint16_t to_network_order(std::uint16_t folded) {
  if constexpr (std::endian::native == std::endian::little) {
    return static_cast<std::uint16_t>(folded << 8 | folded >> 8);
  }
  return folded;
}

// The sum of the big-endian words of the two addresses (a swap leaves it unchanged).
[[gnu::always_inline]] inline std::uint32_t address_sum(std::uint32_t a, std::uint32_t b) {
  return (a >> 16) + (a & 0xffff) + (b >> 16) + (b & 0xffff);
}

Result dropped(Drop reason) {
  Result result;
  result.action = Action::drop;
  result.drop = reason;
  return result;
}

// MACs compared as a 4-byte and a 2-byte word (std::equal on 6 bytes became a memcmp call).
bool is_mac(const std::uint8_t* mac, const MacAddress& expected) {
  return load_host<std::uint32_t>(mac) == load_host<std::uint32_t>(expected.data()) &&
         load_host<std::uint16_t>(mac + 4) == load_host<std::uint16_t>(expected.data() + 4);
}
bool is_broadcast(const std::uint8_t* mac) {
  return load_host<std::uint32_t>(mac) == 0xffffffff && load_host<std::uint16_t>(mac + 4) == 0xffff;
}
bool is_multicast(const std::uint8_t* mac) { return (mac[0] & 0x01) != 0; }

// Sources an answer must never go to: 0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/4 and above
// (multicast, reserved, broadcast).
bool is_unanswerable_source(std::uint32_t address) {
  const std::uint32_t first = address >> 24;
  return first == 0 || first == 127 || first >= 224;
}

// Ethernet: the answer goes back to the sender, from our MAC.
void answer_ethernet(std::uint8_t* frame, const MacAddress& our_mac) {
  std::copy_n(frame + eth_source, 6, frame + eth_destination);
  std::copy(our_mac.begin(), our_mac.end(), frame + eth_source);
}

// IPv4: swap addresses, fresh header (no options, DF, TTL 64), checksum unless offloaded.
void answer_ipv4(std::uint8_t* header, std::uint16_t total_length, bool offload_checksum) {
  const std::uint32_t source = load_be<std::uint32_t>(header + ip::source);
  const std::uint32_t destination = load_be<std::uint32_t>(header + ip::destination);
  header[ip::version_ihl] = ip::version_ihl_plain;
  header[ip::tos] = 0;
  store_be<std::uint16_t>(header + ip::total_length, total_length);
  store_be<std::uint16_t>(header + ip::id, 0);
  store_be<std::uint16_t>(header + ip::fragment, ip::flag_dont_fragment);
  header[ip::ttl] = ip_ttl_answer;
  store_be<std::uint32_t>(header + ip::source, destination);
  store_be<std::uint32_t>(header + ip::destination, source);
  store_be<std::uint16_t>(header + ip::checksum, 0);
  if (!offload_checksum) {
    // The sum of the words just written, from their values: reading the header back would
    // wait on the byte stores above.
    const std::uint32_t sum =
        (std::uint32_t{ip::version_ihl_plain} << 8) + std::uint32_t{total_length} + ip::flag_dont_fragment +
        (std::uint32_t{ip_ttl_answer} << 8 | header[ip::protocol]) + address_sum(source, destination);
    store_be<std::uint16_t>(header + ip::checksum, finish_sum(sum));
  }
}

Result answer_arp(std::span<std::uint8_t> buffer, std::size_t length, const Identity& identity) {
  if (length < ether_header_size + arp_body_size) return dropped(Drop::too_short);
  std::uint8_t* frame = buffer.data();
  std::uint8_t* body = frame + ether_header_size;
  if (load_be<std::uint16_t>(body + arp::hardware_type) != 1 ||
      load_be<std::uint16_t>(body + arp::protocol_type) != ether_type_ipv4 || body[arp::hardware_size] != 6 ||
      body[arp::protocol_size] != 4) {
    return dropped(Drop::arp_malformed);
  }
  if (load_be<std::uint16_t>(body + arp::operation) != arp::operation_request) {
    return dropped(Drop::arp_not_request);
  }
  if (load_be<std::uint32_t>(body + arp::target_ip) != identity.ip) {
    return dropped(Drop::arp_not_for_us);
  }
  if (is_multicast(body + arp::sender_mac)) return dropped(Drop::l2_bad_source);

  // The request's sender becomes the reply's target; we are the sender.
  std::copy_n(body + arp::sender_mac, 10, body + arp::target_mac);  // MAC + IP
  std::copy(identity.mac.begin(), identity.mac.end(), body + arp::sender_mac);
  store_be<std::uint32_t>(body + arp::sender_ip, identity.ip);
  store_be<std::uint16_t>(body + arp::operation, arp::operation_reply);
  answer_ethernet(frame, identity.mac);

  Result result;
  result.action = Action::arp_reply;
  result.length = ether_header_size + arp_body_size;
  return result;
}

Result answer_icmp(std::span<std::uint8_t> buffer, std::uint16_t ip_total_length, const Identity& identity) {
  std::uint8_t* frame = buffer.data();
  const std::size_t icmp_length = ip_total_length - ipv4_header_size;
  if (icmp_length < icmp_header_size) return dropped(Drop::too_short);
  std::uint8_t* message = frame + l4_offset;
  if (message[icmp::type] != icmp::type_echo_request || message[icmp::code] != 0) {
    return dropped(Drop::icmp_not_echo);
  }
  const std::span<const std::uint8_t> icmp_bytes(message, icmp_length);
  if (finish_sum(checksum_add(0, icmp_bytes)) != 0) return dropped(Drop::icmp_bad_checksum);

  message[icmp::type] = icmp::type_echo_reply;
  store_be<std::uint16_t>(message + icmp::checksum, 0);
  store_be<std::uint16_t>(message + icmp::checksum, finish_sum(checksum_add(0, icmp_bytes)));
  answer_ipv4(frame + ip_offset, ip_total_length, false);
  answer_ethernet(frame, identity.mac);

  Result result;
  result.action = Action::icmp_echo_reply;
  result.length = ether_header_size + ip_total_length;
  return result;
}

Result answer_udp(std::span<std::uint8_t> buffer, std::uint16_t ip_total_length, const RxMeta& rx,
                  const Identity& identity, const TxOffload& tx, core::Handler& handler,
                  const core::Burst& burst) {
  std::uint8_t* frame = buffer.data();
  std::uint8_t* ip_header = frame + ip_offset;
  std::uint8_t* udp_header = frame + l4_offset;
  const std::size_t ip_payload = ip_total_length - ipv4_header_size;
  if (ip_payload < udp_header_size) return dropped(Drop::too_short);
  const std::uint16_t udp_length = load_be<std::uint16_t>(udp_header + udp::length);
  if (udp_length < udp_header_size || udp_length > ip_payload) return dropped(Drop::udp_bad_length);
  if (load_be<std::uint16_t>(udp_header + udp::destination_port) != identity.port) {
    return dropped(Drop::udp_wrong_port);
  }
  const std::uint16_t source_port = load_be<std::uint16_t>(udp_header + udp::source_port);
  if (source_port == 0) return dropped(Drop::udp_bad_source_port);
  const std::uint32_t source_ip = load_be<std::uint32_t>(ip_header + ip::source);
  // The pseudo-header's addresses, the same for the request and the answer (swapped).
  const std::uint32_t addresses = address_sum(source_ip, identity.ip);
  if (rx.l4 == Checksum::bad) return dropped(Drop::udp_bad_checksum);
  // A zero UDP checksum means "none" in IPv4 (RFC 768).
  if (rx.l4 == Checksum::unknown && load_be<std::uint16_t>(udp_header + udp::checksum) != 0) {
    const std::uint32_t sum = addresses + ip_proto_udp + std::uint32_t{udp_length} +
                              to_network_order(fold_to_16(sum_host_order(udp_header, udp_length)));
    if (finish_sum(sum) != 0) return dropped(Drop::udp_bad_checksum);
  }
  if (buffer.size() < buffer_size_min) return dropped(Drop::no_room);

  // The handler reads the request and writes the answer into the same bytes.
  std::uint8_t* payload = frame + udp_payload_offset;
  const std::size_t answer_size = handler.handle(
      std::span<const std::uint8_t>(payload, udp_length - udp_header_size),
      std::span<std::uint8_t>(payload, proto::datagram_size_max), burst, core::Source::ipv4(source_ip));
  if (answer_size == 0) {
    Result result;
    result.action = Action::payload_dropped;
    return result;
  }

  const auto answer_udp_length = static_cast<std::uint16_t>(udp_header_size + answer_size);
  const auto answer_ip_length = static_cast<std::uint16_t>(ipv4_header_size + answer_udp_length);
  store_be<std::uint16_t>(udp_header + udp::source_port, identity.port);
  store_be<std::uint16_t>(udp_header + udp::destination_port, source_port);
  store_be<std::uint16_t>(udp_header + udp::length, answer_udp_length);
  std::uint32_t sum = addresses + ip_proto_udp + std::uint32_t{answer_udp_length};  // pseudo-header
  if (tx.udp_checksum) {
    // The port adds the datagram to the pseudo-header sum stored here (not inverted).
    store_be<std::uint16_t>(udp_header + udp::checksum, fold_to_16(sum));
  } else {
    // The UDP header from the values just written (its checksum field counts as 0), then the
    // answer the handler wrote: from the values it encoded where it knows their sum (reading
    // bytes just stored back waits on the stores: half of process() in a memif profile).
    sum += std::uint32_t{identity.port} + source_port + answer_udp_length;
    const std::optional<std::uint64_t> answer_sum = handler.answer_sum();
    sum += answer_sum ? fold_to_16(*answer_sum)
                      : to_network_order(fold_to_16(sum_host_order_stored(payload, answer_size)));
    const std::uint16_t value = finish_sum(sum);
    store_be<std::uint16_t>(udp_header + udp::checksum, value == 0 ? 0xffff : value);
  }
  answer_ipv4(ip_header, answer_ip_length, tx.ipv4_checksum);
  answer_ethernet(frame, identity.mac);

  Result result;
  result.action = Action::udp_answer;
  result.length = ether_header_size + answer_ip_length;
  result.offload_ipv4_checksum = tx.ipv4_checksum;
  result.offload_udp_checksum = tx.udp_checksum;
  return result;
}

}  // namespace

std::string_view to_string(Drop drop) {
  switch (drop) {
    case Drop::too_short:
      return "too_short";
    case Drop::not_contiguous:
      return "not_contiguous";
    case Drop::l2_not_for_us:
      return "l2_not_for_us";
    case Drop::l2_bad_source:
      return "l2_bad_source";
    case Drop::ether_type_other:
      return "ether_type_other";
    case Drop::arp_malformed:
      return "arp_malformed";
    case Drop::arp_not_request:
      return "arp_not_request";
    case Drop::arp_not_for_us:
      return "arp_not_for_us";
    case Drop::ip_bad_header:
      return "ip_bad_header";
    case Drop::ip_options:
      return "ip_options";
    case Drop::ip_bad_length:
      return "ip_bad_length";
    case Drop::ip_fragment:
      return "ip_fragment";
    case Drop::ip_bad_checksum:
      return "ip_bad_checksum";
    case Drop::ip_not_for_us:
      return "ip_not_for_us";
    case Drop::ip_bad_source:
      return "ip_bad_source";
    case Drop::ip_proto_other:
      return "ip_proto_other";
    case Drop::icmp_not_echo:
      return "icmp_not_echo";
    case Drop::icmp_bad_checksum:
      return "icmp_bad_checksum";
    case Drop::udp_bad_length:
      return "udp_bad_length";
    case Drop::udp_wrong_port:
      return "udp_wrong_port";
    case Drop::udp_bad_source_port:
      return "udp_bad_source_port";
    case Drop::udp_bad_checksum:
      return "udp_bad_checksum";
    case Drop::no_room:
      return "no_room";
    case Drop::count_:
      break;
  }
  return "unknown";
}

std::uint32_t checksum_add(std::uint32_t sum, std::span<const std::uint8_t> bytes) {
  const std::uint64_t total =
      std::uint64_t{sum} + to_network_order(fold_to_16(sum_host_order(bytes.data(), bytes.size())));
  return static_cast<std::uint32_t>((total & 0xffffffff) + (total >> 32));
}

std::uint16_t checksum_finish(std::uint32_t sum) { return static_cast<std::uint16_t>(~fold_to_16(sum)); }

std::uint32_t pseudo_header_sum(std::uint32_t source_ip, std::uint32_t destination_ip, std::uint8_t protocol,
                                std::uint16_t length) {
  std::uint64_t sum = (source_ip >> 16) + (source_ip & 0xffff) + (destination_ip >> 16) +
                      (destination_ip & 0xffff) + protocol + length;
  while (sum >> 32) sum = (sum & 0xffffffff) + (sum >> 32);
  return static_cast<std::uint32_t>(sum);
}

std::uint16_t checksum_update(std::uint16_t checksum, std::uint16_t old_word, std::uint16_t new_word) {
  const std::uint32_t sum = std::uint32_t{static_cast<std::uint16_t>(~checksum)} +
                            static_cast<std::uint16_t>(~old_word) + std::uint32_t{new_word};
  return static_cast<std::uint16_t>(~fold_to_16(sum));
}

Result process(std::span<std::uint8_t> buffer, std::size_t length, const RxMeta& rx, const Identity& identity,
               const TxOffload& tx, core::Handler& handler, const core::Burst& burst) {
  length = std::min(length, buffer.size());
  if (length < ether_header_size) return dropped(Drop::too_short);
  std::uint8_t* frame = buffer.data();
  if (is_multicast(frame + eth_source)) return dropped(Drop::l2_bad_source);
  const bool to_us = is_mac(frame + eth_destination, identity.mac);
  const std::uint16_t type = load_be<std::uint16_t>(frame + eth_type);

  if (type == ether_type_arp) {
    if (!to_us && !is_broadcast(frame + eth_destination)) return dropped(Drop::l2_not_for_us);
    return answer_arp(buffer, length, identity);
  }
  if (type != ether_type_ipv4) return dropped(Drop::ether_type_other);
  if (!to_us) return dropped(Drop::l2_not_for_us);

  // IPv4 header.
  if (length < l4_offset) return dropped(Drop::too_short);
  const std::uint8_t* ip_header = frame + ip_offset;
  const std::uint8_t version_ihl = ip_header[ip::version_ihl];
  if ((version_ihl >> 4) != 4 || (version_ihl & 0x0f) < 5) return dropped(Drop::ip_bad_header);
  if ((version_ihl & 0x0f) != 5) return dropped(Drop::ip_options);
  const std::uint16_t total_length = load_be<std::uint16_t>(ip_header + ip::total_length);
  // Frames may carry Ethernet padding past the IPv4 packet, never less than it.
  if (total_length < ipv4_header_size || total_length > length - ether_header_size) {
    return dropped(Drop::ip_bad_length);
  }
  const std::uint16_t fragment = load_be<std::uint16_t>(ip_header + ip::fragment);
  if ((fragment & (ip::flag_more_fragments | ip::fragment_offset_mask)) != 0) {
    return dropped(Drop::ip_fragment);
  }
  if (rx.ip == Checksum::bad) return dropped(Drop::ip_bad_checksum);
  // A header with a correct checksum sums to 0xffff (checksum_finish gives 0).
  if (rx.ip == Checksum::unknown && fold_to_16(sum_host_order(ip_header, ipv4_header_size)) != 0xffff) {
    return dropped(Drop::ip_bad_checksum);
  }
  if (load_be<std::uint32_t>(ip_header + ip::destination) != identity.ip) {
    return dropped(Drop::ip_not_for_us);
  }
  if (is_unanswerable_source(load_be<std::uint32_t>(ip_header + ip::source))) {
    return dropped(Drop::ip_bad_source);
  }

  switch (ip_header[ip::protocol]) {
    case ip_proto_udp:
      return answer_udp(buffer, total_length, rx, identity, tx, handler, burst);
    case ip_proto_icmp:
      return answer_icmp(buffer, total_length, identity);
    default:
      return dropped(Drop::ip_proto_other);
  }
}

}  // namespace flurry::dataplane::frame
