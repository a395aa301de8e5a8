// dataplane/dpdk/dpdk_backend.h — flurryd --backend dpdk: answers ID requests straight from
// the NIC (or a virtual device: net_af_xdp / net_af_packet on a veth for tests).
//
// Use, from flurryd's main thread (which becomes the main lcore and runs the control loop; the
// scheduler's writes run on flurry-renew, on the same CPU by inherited affinity):
//   1. eal_init(args before `--`) — after the process has set its signal mask, so EAL's
//      threads inherit it;
//   2. make_dpdk_backend(config, shared)->start(): sets up the first ethdev port (one RX and
//      one TX queue per worker, RSS over UDP when there are several workers), then launches
//      worker i on the i-th worker lcore;
//   3. stop(): workers return, the port stops and closes, mempools are freed;
//   4. eal_cleanup() (also registered with atexit by eal_init, so a normal exit runs it).
// The appliance IP is BackendConfig::listen's address; it is owned on the port: ARP requests
// for it and ICMP echo to it are answered, UDP to its port goes to core::Handler, every
// other frame is dropped with a per-reason counter (visit_counters: "rx_dropped").
// Startup failures return false with one sentence naming the fix.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dataplane/backend.h"

namespace flurry::dataplane {

// Initialises DPDK's EAL with `argv[0..argc)` (program name first, then EAL options such as
// `-l 0-1 --vdev=net_af_xdp0,iface=flv0 --no-huge`). Idempotent per process: a second call
// fails. A failure says what failed and the fix.
Status eal_init(int argc, char** argv);

// True after a successful eal_init() and before eal_cleanup().
bool eal_initialized();

// How many worker lcores EAL gave us (all lcores but the main one); 0 before eal_init.
std::uint32_t eal_worker_lcores();

// Releases EAL resources (rte_eal_cleanup). Safe to call twice; after every backend stopped.
void eal_cleanup();

// The DPDK backend. Needs eal_init() first; config.workers <= eal_worker_lcores().
std::unique_ptr<Backend> make_dpdk_backend(const BackendConfig& config, core::Shared& shared);

// flurryd's one call: eal_init(eal_argc, argv) (argv[0] and the EAL arguments before `--`),
// then make_dpdk_backend(). Fails when EAL does not start.
Result<std::unique_ptr<Backend>> init_eal_and_make_dpdk_backend(int eal_argc, char** argv,
                                                                const BackendConfig& config,
                                                                core::Shared& shared);

}  // namespace flurry::dataplane
