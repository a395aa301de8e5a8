// dataplane/dpdk/port.h — one ethdev port set up for flurry's workers (internal to dpdk/).
//
// open_port() configures the port once, at start: one RX and one TX queue per worker, RSS
// over IPv4/UDP when there is more than one worker and the port supports it, RX/TX checksum
// offloads where the port advertises them, one mempool on the port's NUMA node sized from
// the worker count, queue depths and burst size (nothing grows later). close_port() stops
// and closes the port and frees the pool; it is safe on a half-opened Port.
#pragma once

#include <cstdint>
#include <string>

#include "dataplane/frame.h"

struct rte_mempool;

#include "base/status.h"

namespace flurry::dataplane::dpdk {

struct PortOptions {
  std::uint32_t queues = 1;  // = workers
  std::uint32_t burst_size = 32;
  std::uint16_t rx_descriptors = 1024;
  std::uint16_t tx_descriptors = 1024;
};

struct Port {
  std::uint16_t port_id = 0;
  int socket_id = 0;
  std::string name;    // device name, e.g. net_af_xdp0 or 0000:01:00.0
  std::string driver;  // PMD name, e.g. net_af_xdp
  rte_mempool* pool = nullptr;
  std::uint32_t pool_size = 0;
  frame::MacAddress mac{};
  bool rss = false;              // RSS spreads flows over the queues
  bool rx_ip_checksum = false;   // port verifies IPv4 header checksums
  bool rx_udp_checksum = false;  // port verifies UDP checksums
  // The port is shared memory with a local process (net_memif): like the kernel's loopback and
  // veth, received checksums are not verified again (nothing crossed a wire); answers still
  // carry computed ones.
  bool rx_checksums_trusted = false;
  frame::TxOffload tx;  // port computes answer checksums
  bool configured = false;
  bool started = false;

  // One line for the start-up log.
  std::string describe() const;
};

// Opens the first available ethdev port; fails naming the fix.
Status open_port(const PortOptions& options, Port* port);
void close_port(Port* port);

}  // namespace flurry::dataplane::dpdk
