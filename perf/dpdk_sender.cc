// perf/dpdk_sender.cc — `flurry-bench-dpdk`: flurry-bench's closed loop sent from a DPDK port,
// so a DPDK server (flurryd --backend dpdk, or dpdk-testpmd as the path's ceiling) is pushed
// by a sender that costs no kernel: on a net_memif pair (perf/memif_compare), an af_xdp veth or
// a real NIC.
//
// Contract:
//   * EAL arguments come before `--`, flurry-bench-dpdk's after it. One port (the first), one
//     queue pair, the main lcore only; bounded by --duration-s.
//   * --window GET_IDS requests for --count IDs stay in flight, spread over --flows UDP source
//     ports (so RSS can spread them over the server's workers). A request is an Ethernet /
//     IPv4 / UDP frame to --dst-ip:--dst-port, its payload padded by
//     proto::request_size_for_ids() as every flurry client does; IPv4 and UDP checksums are
//     computed in software (a memif has no offload), or the UDP one left 0 with
//     --no-udp-checksum (legal in IPv4). Requests differ only in source port and request id,
//     so each is a copy of one template frame whose UDP checksum is updated for those two
//     fields (RFC 1624); the sender's own cost per request stays below the servers' it drives.
//   * The server's MAC is learned by ARP (flurryd answers ARP for its IP), or given with
//     --dst-mac; --echo expects the request back with addresses swapped (testpmd 5tswap) and
//     counts it as the answer.
//   * Answers are matched by request id; a request unanswered for --timeout-ms is lost and its
//     slot reused. Latency is TSC time from the burst that sent it to the burst that received
//     the answer, in perf/histogram.h. Every ID is checked for duplicates (perf/id_ranges.h).
//   * --rate R: an open loop instead: request k is due at start + k / R and sent in the first
//     turn at or after that (at most --window in flight: a request that finds no free slot
//     waits for one), and its latency counts from when it was due, not from when it left, so a
//     stall of the server or the path shows in the percentiles (no coordinated omission).
//   * One JSON object with flurry-bench's keys (--json) or one line; exit 0 only if something
//     was answered and no ID came twice; 1 otherwise; 2 on bad options.
//   flurry-bench-dpdk -l 0 --no-huge -m 512 --file-prefix gen
//   --vdev=net_memif0,role=client,socket=/tmp/m.sock
//     -- --dst-ip 10.99.0.1 --src-ip 10.99.0.2 --window 64 --duration-s 5 --json
#include <arpa/inet.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/cli.h"
#include "dataplane/frame.h"
#include "perf/histogram.h"
#include "perf/id_ranges.h"
#include "proto/layout.h"
#include "proto/wire.h"

namespace cli = flurry::cli;

namespace {

namespace proto = flurry::proto;
namespace frame = flurry::dataplane::frame;
using flurry::perf::Histogram;
using proto::load_be;
using proto::store_be;

constexpr unsigned slot_bits = 12;
constexpr unsigned window_max = 1U << slot_bits;
constexpr unsigned burst = 32;

struct Options {
  std::string src_ip = "10.99.0.2";
  std::string dst_ip = "10.99.0.1";
  std::string dst_mac;  // empty: ARP
  std::uint16_t dst_port = 7420;
  std::uint16_t src_port_base = 40000;
  unsigned flows = 16;
  unsigned window = 32;
  std::uint32_t count = 1;
  std::uint32_t ids_per_range = 4096;
  double duration_s = 5;
  double rate = 0;  // requests a second, open loop; 0: closed loop
  unsigned timeout_ms = 200;
  bool echo = false;
  bool udp_checksum = true;
  bool json = false;
  std::string label;
  std::string hgrm;
  std::string ids_out;
};

struct Slot {
  std::uint64_t request_id = 0;
  std::uint64_t sent_tsc = 0;
  bool busy = false;
};

struct Stats {
  std::uint64_t sent = 0, answered = 0, retry = 0, other_status = 0, lost = 0, malformed = 0, tx_full = 0;
  // Open loop: requests due by the end, and the most any was late to leave (TSC ticks).
  std::uint64_t due = 0, late_max_tsc = 0;
  // TSC ticks of the turns that received or sent something, and of the whole run: how much of
  // its core the sender needed (near 100 % it, not the server, sets the rate).
  std::uint64_t busy_tsc = 0, run_tsc = 0;
  Histogram latency_ns;
  flurry::perf::IdRanges ids;
};

class Sender {
 public:
  Sender(const Options& options, std::uint16_t port, rte_mempool* pool)
      : options_(options), port_(port), pool_(pool) {
    slots_.resize(options.window);
    free_.resize(options.window);
    for (unsigned s = 0; s < options.window; ++s) free_[free_count_++] = options.window - 1 - s;
    stats_.ids.reserve(std::size_t{1} << 20);  // spans: one per millisecond of IDs, or per gap
    inet_pton(AF_INET, options.src_ip.c_str(), &src_ip_);
    inet_pton(AF_INET, options.dst_ip.c_str(), &dst_ip_);
    src_ip_ = ntohl(src_ip_);
    dst_ip_ = ntohl(dst_ip_);
    rte_eth_macaddr_get(port, reinterpret_cast<rte_ether_addr*>(src_mac_.data()));
    request_size_ = proto::request_size_for_ids(options.count, options.ids_per_range);
  }

  bool resolve(std::string& error);
  // Builds the template frame; after the destination MAC is known, before run().
  void prepare();
  void run();
  Stats& stats() { return stats_; }
  const frame::MacAddress& dst_mac() const { return dst_mac_; }
  void set_dst_mac(const frame::MacAddress& mac) { dst_mac_ = mac; }

 private:
  void build(rte_mbuf* m, unsigned slot_index, std::uint64_t request_id);
  // Both return how many frames they handled (0: an idle turn).
  unsigned fill(std::uint64_t now);
  unsigned receive(std::uint64_t now);
  void on_payload(std::span<const std::uint8_t> payload, std::uint64_t now);
  void on_payload_checked(std::span<const std::uint8_t> payload, std::uint64_t now);
  // Frees the slot of `request_id` and records its latency; false (counted) if none is waiting.
  bool answered(std::uint64_t request_id, std::uint64_t now);
  void expire(std::uint64_t now);

  const Options& options_;
  const std::uint16_t port_;
  rte_mempool* pool_;
  std::uint32_t src_ip_ = 0, dst_ip_ = 0;
  frame::MacAddress src_mac_{}, dst_mac_{};
  std::size_t request_size_ = proto::request_header_size;
  // The request frame with source port 0 and request id 0, and the one's-complement sum of
  // its UDP pseudo-header, header and payload (folded, not inverted) with the checksum 0.
  std::array<std::uint8_t, frame::buffer_size_min> template_{};
  std::size_t template_size_ = 0;
  std::uint32_t udp_sum_template_ = 0;
  // Latency: nanoseconds per TSC tick with 32 fraction bits (no division per answer).
  std::uint64_t ns_per_tsc_q32_ = 0;
  // The first bytes every answer of the usual shape carries (a one-range GET_IDS OK answer:
  // magic, version, opcode, status, range count; the node is not checked, as decode_response
  // does not), and with --echo the request's bytes before its id: see on_payload().
  std::uint64_t answer_prefix_ = 0, answer_prefix_mask_ = 0;
  std::uint64_t echo_prefix_ = 0;
  std::uint32_t echo_prefix_tail_ = 0;
  std::vector<Slot> slots_;
  std::vector<unsigned> free_;  // a stack of free slot indexes, [0, free_count_) in use
  unsigned free_count_ = 0;
  std::uint64_t sequence_ = 0;
  // Open loop (--rate): TSC ticks between requests, the run's start, requests scheduled so far.
  double interval_tsc_ = 0;
  std::uint64_t start_tsc_ = 0;
  std::uint64_t scheduled_ = 0;
  Stats stats_;
};

// Writes Ethernet + IPv4 + UDP headers for a `payload`-byte UDP payload; returns the frame size.
std::size_t write_headers(std::uint8_t* p, const frame::MacAddress& dst, const frame::MacAddress& src,
                          std::uint32_t src_ip, std::uint32_t dst_ip, std::uint16_t src_port,
                          std::uint16_t dst_port, std::size_t payload) {
  std::memcpy(p, dst.data(), 6);
  std::memcpy(p + 6, src.data(), 6);
  store_be<std::uint16_t>(p + 12, frame::ether_type_ipv4);
  std::uint8_t* ip = p + frame::ether_header_size;
  const auto ip_length =
      static_cast<std::uint16_t>(frame::ipv4_header_size + frame::udp_header_size + payload);
  ip[0] = 0x45;
  ip[1] = 0;
  store_be<std::uint16_t>(ip + 2, ip_length);
  store_be<std::uint32_t>(ip + 4, 0x00004000);  // id 0, DF
  ip[8] = 64;
  ip[9] = frame::ip_proto_udp;
  store_be<std::uint16_t>(ip + 10, 0);
  store_be<std::uint32_t>(ip + 12, src_ip);
  store_be<std::uint32_t>(ip + 16, dst_ip);
  store_be<std::uint16_t>(ip + 10, frame::checksum_finish(frame::checksum_add(
                                       0, std::span<const std::uint8_t>(ip, frame::ipv4_header_size))));
  std::uint8_t* udp = ip + frame::ipv4_header_size;
  store_be<std::uint16_t>(udp, src_port);
  store_be<std::uint16_t>(udp + 2, dst_port);
  store_be<std::uint16_t>(udp + 4, static_cast<std::uint16_t>(frame::udp_header_size + payload));
  store_be<std::uint16_t>(udp + 6, 0);
  return frame::udp_payload_offset + payload;
}

void Sender::prepare() {
  proto::Request get;
  get.opcode = proto::Opcode::get_ids;
  get.count = options_.count;
  get.request_id = 0;
  std::uint8_t* p = template_.data();
  proto::encode_request(get, std::span<std::uint8_t>(p + frame::udp_payload_offset, request_size_),
                        request_size_);
  template_size_ =
      write_headers(p, dst_mac_, src_mac_, src_ip_, dst_ip_, 0, options_.dst_port, request_size_);
  const std::uint8_t* udp = p + frame::ether_header_size + frame::ipv4_header_size;
  const auto udp_length = static_cast<std::uint16_t>(frame::udp_header_size + request_size_);
  const std::uint32_t sum =
      frame::checksum_add(frame::pseudo_header_sum(src_ip_, dst_ip_, frame::ip_proto_udp, udp_length),
                          std::span<const std::uint8_t>(udp, udp_length));
  udp_sum_template_ = static_cast<std::uint16_t>(~frame::checksum_finish(sum));
  ns_per_tsc_q32_ = (std::uint64_t{1'000'000'000} << 32) / rte_get_tsc_hz();

  std::array<std::uint8_t, proto::response_header_size> answer{};
  proto::ResponseHeader header;
  header.opcode = proto::Opcode::get_ids;
  header.status = proto::Status::ok;
  header.range_count = 1;
  proto::encode_response_header(header, answer);
  static_assert(proto::response_offset::range_count == 5 && proto::response_offset::node == 6);
  const std::array<std::uint8_t, 8> mask{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0};
  std::memcpy(&answer_prefix_mask_, mask.data(), 8);
  std::memcpy(&answer_prefix_, answer.data(), 8);
  answer_prefix_ &= answer_prefix_mask_;
  static_assert(proto::request_offset::request_id == 12);
  std::memcpy(&echo_prefix_, p + frame::udp_payload_offset, 8);
  std::memcpy(&echo_prefix_tail_, p + frame::udp_payload_offset + 8, 4);
}

void Sender::build(rte_mbuf* m, unsigned slot_index, std::uint64_t request_id) {
  auto* p = rte_pktmbuf_mtod(m, std::uint8_t*);
  std::memcpy(p, template_.data(), template_size_);
  const auto src_port = static_cast<std::uint16_t>(options_.src_port_base + slot_index % options_.flows);
  std::uint8_t* udp = p + frame::ether_header_size + frame::ipv4_header_size;
  store_be<std::uint16_t>(udp, src_port);
  store_be<std::uint64_t>(p + frame::udp_payload_offset + proto::request_offset::request_id, request_id);
  if (options_.udp_checksum) {
    // RFC 1624: the template's fields were 0, so the new words are only added.
    const std::uint32_t sum = udp_sum_template_ + src_port + static_cast<std::uint32_t>(request_id >> 48) +
                              static_cast<std::uint32_t>(request_id >> 32 & 0xffff) +
                              static_cast<std::uint32_t>(request_id >> 16 & 0xffff) +
                              static_cast<std::uint32_t>(request_id & 0xffff);
    const std::uint16_t value = frame::checksum_finish(sum);
    store_be<std::uint16_t>(udp + 6, value == 0 ? 0xffff : value);
  }
  m->data_len = m->pkt_len = static_cast<std::uint32_t>(template_size_);
}

unsigned Sender::fill(std::uint64_t now) {
  unsigned n = std::min(burst, free_count_);
  std::uint64_t first_due = scheduled_;  // open loop: the schedule index of the first request
  if (interval_tsc_ > 0) {
    const auto due = static_cast<std::uint64_t>(static_cast<double>(now - start_tsc_) / interval_tsc_) + 1;
    n = static_cast<unsigned>(std::min<std::uint64_t>(n, due - std::min(due, scheduled_)));
  }
  if (n == 0) return 0;
  // Not zeroed: only [0, n) is read (a zeroing rep stos a turn showed in the profile).
  std::array<rte_mbuf*, burst> out;
  // One pool call a burst, not one a request.
  if (rte_pktmbuf_alloc_bulk(pool_, out.data(), n) != 0) return 0;  // pool empty: next turn
  std::array<unsigned, burst> taken;
  for (unsigned i = 0; i < n; ++i) {
    const unsigned slot_index = free_[--free_count_];
    const std::uint64_t request_id =
        ((sequence_++ & ((std::uint64_t{1} << 40) - 1)) << slot_bits) | slot_index;
    build(out[i], slot_index, request_id);
    // Open loop: the latency counts from when the request was due (no coordinated omission).
    const std::uint64_t stamp =
        interval_tsc_ > 0
            ? start_tsc_ + static_cast<std::uint64_t>(static_cast<double>(first_due + i) * interval_tsc_)
            : now;
    slots_[slot_index] = {request_id, stamp, true};
    taken[i] = slot_index;
  }
  const std::uint16_t sent = rte_eth_tx_burst(port_, 0, out.data(), static_cast<std::uint16_t>(n));
  stats_.sent += sent;
  if (interval_tsc_ > 0 && sent != 0) {
    const auto due_tsc =
        start_tsc_ + static_cast<std::uint64_t>(static_cast<double>(first_due) * interval_tsc_);
    stats_.late_max_tsc = std::max(stats_.late_max_tsc, now > due_tsc ? now - due_tsc : 0);
    scheduled_ += sent;  // the refused ones stay due and go next turn, their due time unchanged
  }
  if (sent < n) {  // the ring is full: give the slots back, try next turn
    for (unsigned i = sent; i < n; ++i) {
      slots_[taken[i]].busy = false;
      free_[free_count_++] = taken[i];
    }
    stats_.tx_full += n - sent;
    rte_pktmbuf_free_bulk(out.data() + sent, n - sent);
  }
  return n;
}

bool Sender::answered(std::uint64_t request_id, std::uint64_t now) {
  const auto slot_index = static_cast<unsigned>(request_id & (window_max - 1));
  if (slot_index >= slots_.size() || !slots_[slot_index].busy ||
      slots_[slot_index].request_id != request_id) {
    ++stats_.malformed;  // late (counted lost) or not ours
    return false;
  }
  Slot& slot = slots_[slot_index];
  slot.busy = false;
  free_[free_count_++] = slot_index;
  ++stats_.answered;
  const std::uint64_t ticks =
      now > slot.sent_tsc ? now - slot.sent_tsc : 0;  // (open loop: due a hair after now)
  stats_.latency_ns.record(ticks < (std::uint64_t{1} << 31) ? (ticks * ns_per_tsc_q32_) >> 32
                                                            : ticks * 1'000'000'000ULL / rte_get_tsc_hz());
  return true;
}

// The usual answer is checked in place: every check decode_response would make of it, by
// comparing its fixed bytes with the expected ones (answer_prefix_) and its one range with
// check_ranges' conditions. Anything else (RETRY, several ranges, an error) takes the full
// decode. --echo gets the same treatment: the echoed request's fixed bytes are compared with
// the template's and only its id is read. Both paths so do the same kind of work a frame:
// fixed-byte compare, request id match, latency; a flurryd answer adds its span of IDs, every
// one of which goes to the duplicate check.
void Sender::on_payload(std::span<const std::uint8_t> payload, std::uint64_t now) {
  const std::uint8_t* p = payload.data();
  if (options_.echo) {
    std::uint64_t head;
    std::uint32_t tail;
    std::memcpy(&head, p, 8);
    std::memcpy(&tail, p + 8, 4);
    if (payload.size() == request_size_ && head == echo_prefix_ && tail == echo_prefix_tail_) {
      answered(load_be<std::uint64_t>(p + proto::request_offset::request_id), now);
      return;
    }
    return on_payload_checked(payload, now);
  }
  constexpr std::size_t one_range = proto::response_header_size + proto::range_size;
  constexpr std::uint64_t id_limit = std::uint64_t{1} << flurry::proto::id_bits_max;
  if (payload.size() == one_range) {
    std::uint64_t head;
    std::memcpy(&head, p, 8);
    const std::uint64_t first = load_be<std::uint64_t>(p + proto::response_header_size);
    const std::uint32_t count = load_be<std::uint32_t>(p + proto::response_header_size + 8);
    if ((head & answer_prefix_mask_) == answer_prefix_ && count != 0 && first < id_limit &&
        id_limit - first >= count) {
      if (answered(load_be<std::uint64_t>(p + proto::response_offset::request_id), now))
        stats_.ids.add(first, count);
      return;
    }
  }
  on_payload_checked(payload, now);
}

// Each branch decodes into its own const view: no view is built, zeroed or copied twice.
void Sender::on_payload_checked(std::span<const std::uint8_t> payload, std::uint64_t now) {
  if (options_.echo) {
    const proto::RequestView echoed = proto::decode_request(payload);
    if (echoed.error != proto::RequestError::ok) return void(++stats_.malformed);
    answered(echoed.request.request_id, now);
    return;
  }
  const proto::ResponseView view = proto::decode_response(payload);
  if (view.error != proto::ResponseError::ok) return void(++stats_.malformed);
  if (!answered(view.header.request_id, now)) return;
  if (view.header.status == proto::Status::retry) return void(++stats_.retry);
  if (view.header.status != proto::Status::ok) return void(++stats_.other_status);
  for (std::size_t i = 0; i < view.header.range_count; ++i) {
    const proto::Range range = view.range(i);
    stats_.ids.add(range.first, range.count);
  }
}

unsigned Sender::receive(std::uint64_t now) {
  std::array<rte_mbuf*, burst> in;  // the driver writes [0, n)
  const std::uint16_t n = rte_eth_rx_burst(port_, 0, in.data(), burst);
  for (std::uint16_t i = 0; i < n; ++i) {
    const auto* p = rte_pktmbuf_mtod(in[i], const std::uint8_t*);
    const std::size_t length = rte_pktmbuf_data_len(in[i]);
    if (length > frame::udp_payload_offset && load_be<std::uint16_t>(p + 12) == frame::ether_type_ipv4 &&
        p[frame::ether_header_size + 9] == frame::ip_proto_udp) {
      const std::uint8_t* udp = p + frame::ether_header_size + frame::ipv4_header_size;
      const std::size_t udp_length = std::min<std::size_t>(load_be<std::uint16_t>(udp + 4), length - 34);
      if (udp_length >= frame::udp_header_size) {
        on_payload({udp + frame::udp_header_size, udp_length - frame::udp_header_size}, now);
      }
    }
  }
  rte_pktmbuf_free_bulk(in.data(), n);  // one call a burst, not one a packet
  return n;
}

void Sender::expire(std::uint64_t now) {
  const std::uint64_t timeout = rte_get_tsc_hz() / 1000 * options_.timeout_ms;
  for (unsigned s = 0; s < slots_.size(); ++s) {
    if (!slots_[s].busy || now - slots_[s].sent_tsc < timeout) continue;
    slots_[s].busy = false;
    free_[free_count_++] = s;
    ++stats_.lost;
  }
}

void Sender::run() {
  const std::uint64_t hz = rte_get_tsc_hz();
  const std::uint64_t start = rte_rdtsc();
  start_tsc_ = start;
  interval_tsc_ = options_.rate > 0 ? static_cast<double>(hz) / options_.rate : 0;
  const auto end = start + static_cast<std::uint64_t>(options_.duration_s * static_cast<double>(hz));
  std::uint64_t next_expire = start + hz / 1000;
  // One clock read a turn (about 10 ns on a VM): answers are stamped before they are received
  // and requests before the receive pass that precedes their send, so a latency counts that
  // pass too, for every server alike.
  std::uint64_t now = start;
  while (now < end) {
    const unsigned frames = receive(now) + fill(now);
    if (now >= next_expire) {
      expire(now);
      next_expire = now + hz / 1000;
    }
    const std::uint64_t next = rte_rdtsc();
    if (frames != 0) stats_.busy_tsc += next - now;
    now = next;
  }
  stats_.run_tsc = now - start;
  if (interval_tsc_ > 0)
    stats_.due = static_cast<std::uint64_t>(static_cast<double>(now - start) / interval_tsc_) + 1;
}

// Sends ARP requests for --dst-ip (every 100 ms, for up to 5 s) and takes the first reply's MAC.
bool Sender::resolve(std::string& error) {
  const std::uint64_t hz = rte_get_tsc_hz();
  const std::uint64_t end = rte_rdtsc() + 5 * hz;
  std::uint64_t next_ask = 0;
  while (rte_rdtsc() < end) {
    if (rte_rdtsc() >= next_ask) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool_);
      if (m == nullptr) return error = "mempool empty", false;
      auto* p = rte_pktmbuf_mtod(m, std::uint8_t*);
      std::memset(p, 0xff, 6);
      std::memcpy(p + 6, src_mac_.data(), 6);
      store_be<std::uint16_t>(p + 12, frame::ether_type_arp);
      std::uint8_t* arp = p + frame::ether_header_size;
      store_be<std::uint32_t>(arp, 0x00010800);      // Ethernet, IPv4
      store_be<std::uint32_t>(arp + 4, 0x06040001);  // sizes 6 and 4, request
      std::memcpy(arp + 8, src_mac_.data(), 6);
      store_be<std::uint32_t>(arp + 14, src_ip_);
      std::memset(arp + 18, 0, 6);
      store_be<std::uint32_t>(arp + 24, dst_ip_);
      m->data_len = m->pkt_len = 60;
      if (rte_eth_tx_burst(port_, 0, &m, 1) != 1) rte_pktmbuf_free(m);
      next_ask = rte_rdtsc() + hz / 10;
    }
    std::array<rte_mbuf*, burst> in{};
    const std::uint16_t n = rte_eth_rx_burst(port_, 0, in.data(), burst);
    bool found = false;
    for (std::uint16_t i = 0; i < n; ++i) {
      const auto* p = rte_pktmbuf_mtod(in[i], const std::uint8_t*);
      const std::uint8_t* arp = p + frame::ether_header_size;
      if (!found && rte_pktmbuf_data_len(in[i]) >= 42 &&
          load_be<std::uint16_t>(p + 12) == frame::ether_type_arp && load_be<std::uint16_t>(arp + 6) == 2 &&
          load_be<std::uint32_t>(arp + 14) == dst_ip_) {
        std::memcpy(dst_mac_.data(), arp + 8, 6);
        found = true;
      }
      rte_pktmbuf_free(in[i]);
    }
    if (found) return true;
  }
  error = fmt::format("no ARP reply for {} in 5 s (is the server up on the other end of the port?)",
                      options_.dst_ip);
  return false;
}

std::optional<int> parse(int argc, char** argv, Options& o) {
  cli::App app{"flurry-bench-dpdk — flurry-bench's closed loop from a DPDK port (EAL arguments before --)"};
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", FLURRY_VERSION);
  app.footer("EAL arguments come first, then --, then these options.");
  app.add_option("--src-ip", o.src_ip, "this sender's IPv4 address");
  app.add_option("--dst-ip", o.dst_ip, "the server's IPv4 address");
  app.add_option("--dst-mac", o.dst_mac, "the server's MAC (default: ARP for --dst-ip)");
  app.add_option("--dst-port", o.dst_port, "the server's UDP port");
  app.add_option("--src-port-base", o.src_port_base, "first UDP source port");
  app.add_option("--flows", o.flows, "UDP source ports in use")->check(cli::Range(1U, 1024U));
  app.add_option("--window", o.window, "requests in flight")->check(cli::Range(1U, window_max));
  app.add_option("--count", o.count, "IDs per request")->check(cli::Range(1U, proto::count_max));
  app.add_option("--ids-per-range", o.ids_per_range, "IDs one range holds (request padding)")
      ->check(cli::Range(1U, proto::count_max));
  app.add_option("--duration-s", o.duration_s, "how long to run")->check(cli::Range(0.1, 600.0));
  app.add_option("--rate", o.rate,
                 "open loop: send this many requests a second (latency from when each was due; "
                 "0: closed loop with --window in flight)")
      ->check(cli::Range(0.0, 1e9));
  app.add_option("--timeout-ms", o.timeout_ms, "a request unanswered this long is lost")
      ->check(cli::Range(1U, 10'000U));
  app.add_flag("--echo", o.echo, "the server bounces the request (testpmd 5tswap)");
  app.add_flag("!--no-udp-checksum", o.udp_checksum, "send UDP checksum 0 (none, legal in IPv4)");
  app.add_option("--label", o.label, "a name for this run");
  app.add_option("--hgrm", o.hgrm, "write HdrHistogram's percentile distribution (us) here");
  app.add_option("--ids-out", o.ids_out, "write the IDs received as spans (first, count: 2 x u64 LE) here");
  app.add_flag("--json", o.json, "print one JSON object");
  try {
    app.parse(argc, argv);
  } catch (const cli::ParseError& e) {
    return app.exit(e);
  }
  return std::nullopt;
}

bool parse_mac(const std::string& text, frame::MacAddress& mac) {
  unsigned b[6];
  if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
    return false;
  for (int i = 0; i < 6; ++i) mac[i] = static_cast<std::uint8_t>(b[i]);
  return true;
}

// One port, one queue pair, promiscuous; false with a message on failure.
bool open_port(std::uint16_t& port, rte_mempool*& pool, std::string& error) {
  if (rte_eth_dev_count_avail() == 0) return error = "no DPDK port: pass one with --vdev or -a", false;
  port = static_cast<std::uint16_t>(rte_eth_find_next_owned_by(0, RTE_ETH_DEV_NO_OWNER));
  pool = rte_pktmbuf_pool_create("sender", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
  rte_eth_conf conf{};
  if (pool == nullptr || rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
      rte_eth_rx_queue_setup(port, 0, 1024, rte_eth_dev_socket_id(port), nullptr, pool) != 0 ||
      rte_eth_tx_queue_setup(port, 0, 1024, rte_eth_dev_socket_id(port), nullptr) != 0 ||
      rte_eth_dev_start(port) != 0) {
    return error = "port set-up failed (see the EAL messages above)", false;
  }
  rte_eth_promiscuous_enable(port);
  return true;
}

// The IDs of this run as spans, for a check across runs (perf/memif_compare).
bool write_spans(const std::string& path, std::vector<flurry::perf::IdSpan>& spans) {
  if (path.empty()) return true;
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) return false;
  const bool ok = std::fwrite(spans.data(), sizeof(flurry::perf::IdSpan), spans.size(), out) == spans.size();
  return std::fclose(out) == 0 && ok;
}

int report(const Options& o, Stats& stats, double seconds) {
  const std::uint64_t ids = stats.ids.ids();
  if (!write_spans(o.ids_out, stats.ids.spans())) {
    std::fprintf(stderr, "flurry-bench-dpdk: --ids-out %s: %s\n", o.ids_out.c_str(), std::strerror(errno));
    return 1;
  }
  const std::uint64_t duplicates = flurry::perf::count_duplicate_ids_parallel(stats.ids.spans());
  const auto us = [](std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
  const Histogram& h = stats.latency_ns;
  const nlohmann::json json = {
      {"label", o.label},
      {"sender", "dpdk"},
      {"window", o.window},
      {"count", o.count},
      {"echo", o.echo},
      {"flows", o.flows},
      {"udp_checksum", o.udp_checksum},
      {"request_bytes", proto::request_size_for_ids(o.count, o.ids_per_range)},
      {"rate", o.rate},
      {"requests_due", stats.due},
      {"late_max_us", static_cast<double>(stats.late_max_tsc) * 1e6 / static_cast<double>(rte_get_tsc_hz())},
      {"seconds", seconds},
      {"requests_sent", stats.sent},
      {"requests_answered", stats.answered},
      {"requests_per_second", static_cast<double>(stats.answered) / seconds},
      {"ids", ids},
      {"ids_per_second", static_cast<double>(ids) / seconds},
      {"retry", stats.retry},
      {"other_status", stats.other_status},
      {"lost", stats.lost},
      {"malformed_or_late", stats.malformed},
      {"tx_ring_full", stats.tx_full},
      {"sender_busy_percent",
       stats.run_tsc == 0 ? 0.0
                          : 100.0 * static_cast<double>(stats.busy_tsc) / static_cast<double>(stats.run_tsc)},
      {"p50_us", us(h.value_at_percentile(50))},
      {"p90_us", us(h.value_at_percentile(90))},
      {"p99_us", us(h.value_at_percentile(99))},
      {"p999_us", us(h.value_at_percentile(99.9))},
      {"max_us", us(h.max())},
      {"ids_checked", ids},
      {"duplicates", duplicates}};
  if (o.json) {
    std::puts(json.dump().c_str());
  } else {
    fmt::print(
        "{}dpdk sender, window {}, count {}{}: {:.0f} req/s, {:.0f} IDs/s; p50 {:.1f} us, p99 {:.1f} us; "
        "lost {}; {} IDs checked, {} duplicates\n",
        o.label.empty() ? "" : o.label + ": ", o.window, o.count, o.echo ? " (echo)" : "",
        json["requests_per_second"].get<double>(), json["ids_per_second"].get<double>(),
        json["p50_us"].get<double>(), json["p99_us"].get<double>(), stats.lost, ids, duplicates);
  }
  if (!o.hgrm.empty()) {
    if (std::FILE* out = std::fopen(o.hgrm.c_str(), "w")) {
      h.write_percentile_distribution(out, 1000.0);
      std::fclose(out);
    }
  }
  if (duplicates != 0)
    std::fprintf(stderr, "flurry-bench-dpdk: %llu DUPLICATE IDs\n",
                 static_cast<unsigned long long>(duplicates));
  return duplicates == 0 && stats.answered > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // --help and --version answer without starting EAL (help2man reads them for the man page).
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "--version") == 0)) {
    Options options;
    return parse(argc, argv, options).value_or(0);
  }
  const int eal = rte_eal_init(argc, argv);
  if (eal < 0) {
    std::fprintf(stderr, "flurry-bench-dpdk: EAL init failed (check the arguments before --)\n");
    return 2;
  }
  Options options;
  if (const auto code = parse(argc - eal, argv + eal, options)) return *code;
  std::uint16_t port = 0;
  rte_mempool* pool = nullptr;
  std::string error;
  if (!open_port(port, pool, error)) {
    std::fprintf(stderr, "flurry-bench-dpdk: %s\n", error.c_str());
    return 1;
  }
  Sender sender(options, port, pool);
  frame::MacAddress mac{0x02, 0, 0, 0, 0, 0x01};
  if (!options.dst_mac.empty() && !parse_mac(options.dst_mac, mac)) {
    std::fprintf(stderr, "flurry-bench-dpdk: --dst-mac '%s' must be xx:xx:xx:xx:xx:xx\n",
                 options.dst_mac.c_str());
    return 2;
  }
  sender.set_dst_mac(mac);
  if (!options.echo && options.dst_mac.empty() && !sender.resolve(error)) {
    std::fprintf(stderr, "flurry-bench-dpdk: %s\n", error.c_str());
    return 1;
  }
  sender.prepare();
  const auto started = std::chrono::steady_clock::now();
  sender.run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const int code = report(options, sender.stats(), seconds);
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
  rte_eal_cleanup();
  return code;
}
