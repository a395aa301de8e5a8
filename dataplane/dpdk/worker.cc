// dataplane/dpdk/worker.cc — see worker.h.
#include "dataplane/dpdk/worker.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_prefetch.h>

#include "core/slice.h"
#include "dataplane/plain_path.h"

namespace flurry::dataplane::dpdk {

namespace {

// How many packets ahead of the one being handled the loop prefetches (l3fwd's PREFETCH_OFFSET).
constexpr std::uint16_t prefetch_ahead = 3;

frame::Checksum ip_checksum_state(std::uint64_t flags) {
  switch (flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) {
    case RTE_MBUF_F_RX_IP_CKSUM_GOOD:
    case RTE_MBUF_F_RX_IP_CKSUM_NONE:  // not in the packet, but the data was verified
      return frame::Checksum::good;
    case RTE_MBUF_F_RX_IP_CKSUM_BAD:
      return frame::Checksum::bad;
    default:
      return frame::Checksum::unknown;
  }
}

frame::Checksum l4_checksum_state(std::uint64_t flags) {
  switch (flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) {
    case RTE_MBUF_F_RX_L4_CKSUM_GOOD:
    case RTE_MBUF_F_RX_L4_CKSUM_NONE:
      return frame::Checksum::good;
    case RTE_MBUF_F_RX_L4_CKSUM_BAD:
      return frame::Checksum::bad;
    default:
      return frame::Checksum::unknown;
  }
}

class Worker {
 public:
  explicit Worker(WorkerContext& context)
      : context_(context),
        config_(*context.config),
        shared_(*context.shared),
        stats_(context.shared->stats[context.index]),
        counters_(*context.counters),
        slice_(slice_config(context), *context.shared),
        plain_(context.identity, context.tx) {}

  void run();

 private:
  static core::SliceConfig slice_config(const WorkerContext& context);
  void tick(std::uint64_t tsc);
  void handle_burst(rte_mbuf** packets, std::uint16_t count, std::uint64_t tsc);

  WorkerContext& context_;
  const BackendConfig& config_;
  core::Shared& shared_;
  core::WorkerStats& stats_;
  PortCounters& counters_;
  core::Slice slice_;       // its handler is rebuilt in place when the assignment moves
  frame::PlainPath plain_;  // the common request's fast path (plain_path.h)
  TscCalibration calibration_;
  std::uint64_t next_tick_tsc_ = 0;
  std::uint64_t busy_tsc_ = 0;       // TSC ticks on non-empty bursts since the last tick
  std::uint64_t busy_from_tsc_ = 0;  // the clock of the last burst if it carried packets, else 0
  // The clock in layout units for the last millisecond seen: a division by the time unit is
  // done once a millisecond, not once a burst.
  std::uint64_t now_unix_ms_ = ~std::uint64_t{0};
  std::uint64_t now_t_ = 0;
  bool stopping_ = false;
};

core::SliceConfig Worker::slice_config(const WorkerContext& context) {
  core::SliceConfig out;
  out.layout = context.config->layout;
  out.core = context.index;
  out.workers = context.config->workers;
  out.retry_hint_us = context.config->retry_hint_us;
  out.auth = context.config->auth;
  return out;
}

void Worker::tick(std::uint64_t tsc) {
  next_tick_tsc_ = tsc + context_.tick_tsc;
  if (shared_.stop.load(std::memory_order_relaxed)) stopping_ = true;
  slice_.refresh();  // the assignment moved: its handler is rebuilt here, between bursts
  context_.clock->try_read(&calibration_);  // keeps the old copy if a write is in progress
  if (calibration_.calibrated() && busy_tsc_ != 0) {
    const std::uint64_t hz = calibration_.tsc_hz;  // split so that no product overflows
    stats_.busy_ns.add(busy_tsc_ / hz * 1'000'000'000ULL + busy_tsc_ % hz * 1'000'000'000ULL / hz);
    busy_tsc_ = 0;
  }
}

void Worker::handle_burst(rte_mbuf** packets, std::uint16_t count, std::uint64_t tsc) {
  core::Burst burst;
  burst.now_unix_ms = calibration_.unix_ms(tsc);
  if (burst.now_unix_ms != now_unix_ms_) {
    now_unix_ms_ = burst.now_unix_ms;
    now_t_ = config_.layout.time_from_unix_ms(now_unix_ms_);
  }
  burst.now_t = now_t_;
  burst.keys = shared_.keys.load();  // the loop quiesces before every burst
  // Until a calibration arrived (tick re-reads it) the clock reads nothing: answer RETRY.
  burst.ceiling_t = issue_ceiling(calibration_, slice_.load_ceiling());

  std::array<rte_mbuf*, burst_size_max> answers;
  std::array<rte_mbuf*, burst_size_max> drops;
  std::uint16_t answer_count = 0;
  std::uint16_t drop_count = 0;
  // Counted here and added once per burst: a counter add is a load and a store on the stats line.
  std::uint16_t arp_count = 0;
  std::uint16_t icmp_count = 0;
  std::uint16_t udp_count = 0;
  const frame::RxMeta no_offload = context_.rx_checksums_trusted
                                       ? frame::RxMeta{frame::Checksum::good, frame::Checksum::good}
                                       : frame::RxMeta{};
  const bool plain = plain_.prepare(slice_.handler(), burst);
  for (std::uint16_t i = 0; i < count && i < prefetch_ahead; ++i) {
    rte_prefetch0(rte_pktmbuf_mtod(packets[i], void*));
  }
  for (std::uint16_t i = 0; i < count; ++i) {
    rte_mbuf* m = packets[i];
    if (i + prefetch_ahead < count) rte_prefetch0(rte_pktmbuf_mtod(packets[i + prefetch_ahead], void*));
    if (m->nb_segs != 1) {
      counters_.dropped[static_cast<std::size_t>(frame::Drop::not_contiguous)].add();
      drops[drop_count++] = m;
      continue;
    }
    frame::RxMeta rx = no_offload;
    if (context_.rx_ip_checksum) rx.ip = ip_checksum_state(m->ol_flags);
    if (context_.rx_udp_checksum) rx.l4 = l4_checksum_state(m->ol_flags);
    const std::span<std::uint8_t> buffer(rte_pktmbuf_mtod(m, std::uint8_t*),
                                         static_cast<std::size_t>(m->buf_len - m->data_off));
    frame::Result result;
    // A plain GET_IDS is admitted here: PlainPath::answer() checks the frame, then issues its one
    // range at Handler::issue_plain (plain_path.h), the client's address in hand (`client_ip`).
    // Its client's per-source bucket is charged there too, before anything is issued; a refused
    // request falls through to process(), which answers it from the same bucket.
    if (plain && (result.length = plain_.answer(buffer, m->data_len, rx, slice_.handler(), burst)) != 0) {
      result.action = frame::Action::udp_answer;
      result.offload_ipv4_checksum = plain_.offload_ipv4_checksum();
      result.offload_udp_checksum = plain_.offload_udp_checksum();
    } else {
      result =
          frame::process(buffer, m->data_len, rx, context_.identity, context_.tx, slice_.handler(), burst);
    }
    switch (result.action) {
      case frame::Action::drop:
        counters_.dropped[static_cast<std::size_t>(result.drop)].add();
        drops[drop_count++] = m;
        continue;
      case frame::Action::payload_dropped:  // counted once, by the handler
        drops[drop_count++] = m;
        continue;
      case frame::Action::arp_reply:
        ++arp_count;
        break;
      case frame::Action::icmp_echo_reply:
        ++icmp_count;
        break;
      case frame::Action::udp_answer:
        ++udp_count;
        break;
    }
    m->data_len = static_cast<std::uint16_t>(result.length);
    m->pkt_len = static_cast<std::uint32_t>(result.length);
    std::uint64_t tx_flags = 0;
    if (result.offload_ipv4_checksum || result.offload_udp_checksum) {
      tx_flags = RTE_MBUF_F_TX_IPV4;
      if (result.offload_ipv4_checksum) tx_flags |= RTE_MBUF_F_TX_IP_CKSUM;
      if (result.offload_udp_checksum) tx_flags |= RTE_MBUF_F_TX_UDP_CKSUM;
      m->l2_len = frame::ether_header_size;
      m->l3_len = frame::ipv4_header_size;
    }
    m->ol_flags = tx_flags;
    answers[answer_count++] = m;
  }
  plain_.finish(slice_.handler());
  counters_.rx_frames.add(count);
  if (udp_count != 0) counters_.udp_answers.add(udp_count);
  if (arp_count != 0) counters_.arp_replies.add(arp_count);
  if (icmp_count != 0) counters_.icmp_echo_replies.add(icmp_count);
  if (drop_count != 0) rte_pktmbuf_free_bulk(drops.data(), drop_count);
  if (answer_count != 0) {
    const std::uint16_t sent = rte_eth_tx_burst(context_.port_id, static_cast<std::uint16_t>(context_.index),
                                                answers.data(), answer_count);
    if (sent < answer_count) {
      counters_.tx_refused.add(answer_count - sent);
      rte_pktmbuf_free_bulk(answers.data() + sent, answer_count - sent);
    }
  }
  slice_.publish();
}

void Worker::run() {
  // The backend publishes a calibration before launching workers; wait for it boundedly.
  // Without one, bursts are answered RETRY (issue_ceiling) until a tick reads one.
  for (int i = 0; i < 1000 && !context_.clock->try_read(&calibration_); ++i) rte_pause();
  context_.running.store(true, std::memory_order_release);

  std::array<rte_mbuf*, burst_size_max> packets;
  const std::uint16_t burst_size = static_cast<std::uint16_t>(context_.burst_size);
  const auto queue_id = static_cast<std::uint16_t>(context_.index);
  next_tick_tsc_ = rte_rdtsc() + context_.tick_tsc;
  while (!stopping_) {
    shared_.keys.quiesce(context_.index);  // between bursts: holds no key table
    const std::uint16_t count = rte_eth_rx_burst(context_.port_id, queue_id, packets.data(), burst_size);
    // The one clock read of this poll (about 10 ns on the VM of README's figures). A burst's
    // busy time runs to the next poll's read, so that no burst pays a second one: it counts the
    // next receive call too.
    const std::uint64_t tsc = rte_rdtsc();
    if (busy_from_tsc_ != 0) {
      busy_tsc_ += tsc - busy_from_tsc_;
      busy_from_tsc_ = 0;
    }
    if (tsc >= next_tick_tsc_) tick(tsc);
    if (count != 0) {
      handle_burst(packets.data(), count, tsc);
      busy_from_tsc_ = tsc;
    }
  }
  shared_.keys.leave(context_.index);
  context_.running.store(false, std::memory_order_release);
}

}  // namespace

int worker_main(void* arg) {
  auto* context = static_cast<WorkerContext*>(arg);
  Worker worker(*context);
  worker.run();
  return 0;
}

}  // namespace flurry::dataplane::dpdk
