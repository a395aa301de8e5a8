// dataplane/dpdk/port.cc — see port.h.
#include "dataplane/dpdk/port.h"

#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cstdio>

#include "base/log.h"

namespace flurry::dataplane::dpdk {

namespace {

std::string errno_text(int code) { return rte_strerror(code < 0 ? -code : code); }

// The smallest 2^n - 1 that holds `count` (rte_mempool is most memory-efficient there).
std::uint32_t pool_size_for(std::uint64_t count) {
  std::uint64_t size = 1;
  while (size - 1 < count) size <<= 1;
  return static_cast<std::uint32_t>(size - 1);
}

}  // namespace

std::string Port::describe() const {
  char text[512];
  std::snprintf(
      text, sizeof text,
      "port %u %s (driver %s, NUMA socket %d), MAC %02x:%02x:%02x:%02x:%02x:%02x, "
      "%u mbufs, RSS %s, RX checksum offload ip %s udp %s%s, TX checksum offload ip %s udp %s",
      port_id, name.c_str(), driver.c_str(), socket_id, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5],
      pool_size, rss ? "on" : "off", rx_ip_checksum ? "on" : "off", rx_udp_checksum ? "on" : "off",
      rx_checksums_trusted ? " (shared memory with a local process: RX checksums not verified)" : "",
      tx.ipv4_checksum ? "on" : "off", tx.udp_checksum ? "on" : "off");
  return text;
}

namespace {

// The first free port: its id, name, driver, NUMA socket; enough queue pairs for the workers.
Status find_port(std::uint32_t queues, Port* port, rte_eth_dev_info* info) {
  if (rte_eth_dev_count_avail() == 0) {
    return Error{
        "no DPDK port found: bind a NIC to vfio-pci (dpdk-devbind.py -b vfio-pci "
        "0000:01:00.0) or add a virtual device before `--` (e.g. "
        "--vdev=net_af_xdp0,iface=flv0 after scripts/lab up); a --vdev that failed to "
        "probe is named in the EAL lines above (does its iface exist?)"};
  }
  const auto port_id = static_cast<std::uint16_t>(rte_eth_find_next_owned_by(0, RTE_ETH_DEV_NO_OWNER));
  port->port_id = port_id;
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(port_id, name);
  port->name = name;
  const int rc = rte_eth_dev_info_get(port_id, info);
  if (rc != 0) return Error{"cannot read device info of port " + port->name + ": " + errno_text(rc)};
  port->driver = info->driver_name != nullptr ? info->driver_name : "?";
  if (queues > info->max_rx_queues || queues > info->max_tx_queues) {
    return Error{"port " + port->name + " (" + port->driver + ") offers " +
                 std::to_string(std::min(info->max_rx_queues, info->max_tx_queues)) + " queue pair(s) but " +
                 std::to_string(queues) + " workers need one each: use fewer lcores (-l 0-" +
                 std::to_string(std::min(info->max_rx_queues, info->max_tx_queues)) +
                 ") or give the device more queues (net_af_xdp: queue_count=N with ethtool -L "
                 "combined N; net_af_packet: qpairs=N)"};
  }
  // The port's NUMA node; virtual devices have none: use the first worker's.
  port->socket_id = rte_eth_dev_socket_id(port_id);
  if (port->socket_id < 0) {
    const unsigned worker = rte_get_next_lcore(-1, 1, 0);
    port->socket_id = worker < RTE_MAX_LCORE ? static_cast<int>(rte_lcore_to_socket_id(worker))
                                             : static_cast<int>(rte_socket_id());
  }
  return {};
}

// RSS over the workers' queues where the device hashes IPv4/UDP, and the checksum offloads
// it has; what was granted is recorded on the port.
rte_eth_conf port_conf(std::uint32_t queues, const rte_eth_dev_info& info, Port* port) {
  rte_eth_conf conf{};
  if (queues > 1) {
    const std::uint64_t hash =
        info.flow_type_rss_offloads & (RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV4);
    if (hash != 0) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_key = nullptr;  // the driver's default key
      conf.rx_adv_conf.rss_conf.rss_hf = hash;
      port->rss = true;
    }
    // Without RSS the driver may still spread flows itself (af_packet fanout, af_xdp with
    // several NIC queues); the start-up log says RSS off so an operator can tell.
  }
  const std::uint64_t rx_wanted = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
  const std::uint64_t tx_wanted =
      RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM | RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
  conf.rxmode.offloads = info.rx_offload_capa & rx_wanted;
  conf.txmode.offloads = info.tx_offload_capa & tx_wanted;
  port->rx_ip_checksum = (conf.rxmode.offloads & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) != 0;
  port->rx_udp_checksum = (conf.rxmode.offloads & RTE_ETH_RX_OFFLOAD_UDP_CKSUM) != 0;
  port->rx_checksums_trusted = port->driver == "net_memif";
  port->tx.ipv4_checksum = (conf.txmode.offloads & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0;
  port->tx.udp_checksum = (conf.txmode.offloads & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) != 0;
  return conf;
}

// Every mbuf a queue can hold at once, plus bursts in flight, plus what an af_xdp fill ring
// keeps posted (2048 per queue), plus the per-lcore caches.
Status make_pool(const PortOptions& options, std::uint16_t rx_descriptors, std::uint16_t tx_descriptors,
                 Port* port) {
  const std::uint32_t cache = std::min<std::uint32_t>(256, RTE_MEMPOOL_CACHE_MAX_SIZE);
  const std::uint64_t needed = std::uint64_t{options.queues} *
                               (rx_descriptors + tx_descriptors + 4ULL * options.burst_size + 2048 + cache);
  port->pool_size = pool_size_for(std::max<std::uint64_t>(needed, 4095));
  const std::string pool_name = "flurry_pool_" + std::to_string(port->port_id);
  port->pool = rte_pktmbuf_pool_create(pool_name.c_str(), port->pool_size, cache, 0,
                                       RTE_MBUF_DEFAULT_BUF_SIZE, port->socket_id);
  if (port->pool != nullptr) return {};
  return Error{"cannot create a pool of " + std::to_string(port->pool_size) + " mbufs on NUMA socket " +
               std::to_string(port->socket_id) + " (" + errno_text(rte_errno) +
               "): reserve more hugepages on that node, or raise -m with --no-huge (e.g. -m 256)"};
}

Status setup_queues(std::uint32_t queues, const rte_eth_dev_info& info, const rte_eth_conf& conf,
                    std::uint16_t rx_descriptors, std::uint16_t tx_descriptors, Port* port) {
  for (std::uint32_t q = 0; q < queues; ++q) {
    rte_eth_rxconf rxconf = info.default_rxconf;
    rxconf.offloads = conf.rxmode.offloads;
    int rc = rte_eth_rx_queue_setup(port->port_id, static_cast<std::uint16_t>(q), rx_descriptors,
                                    static_cast<unsigned>(port->socket_id), &rxconf, port->pool);
    if (rc != 0) {
      return Error{
          "port " + port->name + " refused RX queue " + std::to_string(q) + " (" +
          std::to_string(rx_descriptors) + " descriptors): " + errno_text(rc) +
          (port->driver == "net_af_xdp"
               ? "; for net_af_xdp mount bpffs (scripts/lab up) and check the interface exists and is up"
               : "")};
    }
    rte_eth_txconf txconf = info.default_txconf;
    txconf.offloads = conf.txmode.offloads;
    rc = rte_eth_tx_queue_setup(port->port_id, static_cast<std::uint16_t>(q), tx_descriptors,
                                static_cast<unsigned>(port->socket_id), &txconf);
    if (rc != 0) {
      return Error{"port " + port->name + " refused TX queue " + std::to_string(q) + " (" +
                   std::to_string(tx_descriptors) + " descriptors): " + errno_text(rc)};
    }
  }
  return {};
}

}  // namespace

Status open_port(const PortOptions& options, Port* port) {
  const auto fail = [&](Status failure) {
    close_port(port);
    return failure;
  };
  const std::uint32_t queues = options.queues;
  rte_eth_dev_info info{};
  if (Status found = find_port(queues, port, &info); !found.ok()) return fail(found);
  const rte_eth_conf conf = port_conf(queues, info, port);
  const std::uint16_t port_id = port->port_id;
  int rc = rte_eth_dev_configure(port_id, static_cast<std::uint16_t>(queues),
                                 static_cast<std::uint16_t>(queues), &conf);
  if (rc != 0) {
    return fail(Error{"port " + port->name + " refused the configuration (" + std::to_string(queues) +
                      " queue pairs, RSS " + (port->rss ? "on" : "off") + "): " + errno_text(rc)});
  }
  port->configured = true;
  std::uint16_t rx_descriptors = options.rx_descriptors;
  std::uint16_t tx_descriptors = options.tx_descriptors;
  rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_descriptors, &tx_descriptors);
  if (rc != 0) return fail(Error{"port " + port->name + " refused queue depths: " + errno_text(rc)});
  if (Status made = make_pool(options, rx_descriptors, tx_descriptors, port); !made.ok()) return fail(made);
  if (Status set = setup_queues(queues, info, conf, rx_descriptors, tx_descriptors, port); !set.ok()) {
    return fail(set);
  }
  rte_ether_addr mac{};
  rc = rte_eth_macaddr_get(port_id, &mac);
  if (rc != 0)
    return fail(Error{"cannot read the MAC address of port " + port->name + ": " + errno_text(rc)});
  std::copy(std::begin(mac.addr_bytes), std::end(mac.addr_bytes), port->mac.begin());
  rc = rte_eth_dev_start(port_id);
  if (rc != 0) return fail(Error{"port " + port->name + " did not start: " + errno_text(rc)});
  port->started = true;
  return {};
}

void close_port(Port* port) {
  if (port->started) {
    const int rc = rte_eth_dev_stop(port->port_id);
    if (rc != 0) {
      log_warn("stopping port {}: {}", port->name, errno_text(rc));
    }
    port->started = false;
  }
  if (port->configured) {
    rte_eth_dev_close(port->port_id);
    port->configured = false;
  }
  if (port->pool != nullptr) {
    rte_mempool_free(port->pool);
    port->pool = nullptr;
  }
}

}  // namespace flurry::dataplane::dpdk
