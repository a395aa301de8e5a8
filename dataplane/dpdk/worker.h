// dataplane/dpdk/worker.h — one worker lcore's poll loop (internal to dpdk/).
//
// Loop shape (l2fwd / grout main_loop): RX burst; read the TSC once; on the tick (every
// tick_tsc cycles, never per packet) check Shared::stop, the Assignment generation and the
// clock calibration; then clock and ceiling once per burst, frame::process() each mbuf in
// place, free the drops in bulk, TX burst the answers, count what the TX queue refused,
// publish last_t. No allocation, lock or system call inside the loop: everything here is
// sized at start.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "base/counter.h"
#include "dataplane/backend.h"
#include "dataplane/dpdk/tsc_clock.h"
#include "dataplane/frame.h"

namespace flurry::dataplane::dpdk {

inline constexpr std::uint32_t burst_size_max = 256;

// Frame-level counters of one worker, written only by it, on its own cache lines.
struct alignas(64) PortCounters {
  std::array<Counter, frame::drop_count> dropped;  // by frame::Drop
  Counter rx_frames;
  Counter arp_replies;
  Counter icmp_echo_replies;
  Counter udp_answers;
  Counter tx_refused;  // answers the TX queue did not take (freed, client retries)
};

struct WorkerContext {
  std::uint32_t index = 0;  // core index in IDs, RX/TX queue id
  unsigned lcore_id = 0;
  std::uint16_t port_id = 0;
  std::uint32_t burst_size = 32;
  std::uint64_t tick_tsc = 0;  // TSC cycles between ticks
  frame::Identity identity;
  frame::TxOffload tx;
  bool rx_ip_checksum = false;
  bool rx_udp_checksum = false;
  bool rx_checksums_trusted = false;  // Port::rx_checksums_trusted
  const BackendConfig* config = nullptr;
  core::Shared* shared = nullptr;
  const TscClockSync* clock = nullptr;
  PortCounters* counters = nullptr;
  std::atomic<bool> running{false};
};

// rte_eal_remote_launch entry point; `arg` is a WorkerContext*. Returns 0 when stopped.
int worker_main(void* arg);

}  // namespace flurry::dataplane::dpdk
