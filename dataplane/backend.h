// dataplane/backend.h — what flurryd's main thread (start and stop; the control loop's reports) needs
// from a packet backend.
//
// A backend owns the worker threads (socket) or worker lcores (DPDK). Each worker builds one
// core::Handler for its core index, starts it above the published Assignment, and then loops:
// read the clock and the ceiling once per burst, receive a burst (the socket backend may poll
// for it a while before it blocks; the DPDK backend always polls), handle() each datagram,
// send the answers, publish last_t; on its tick it checks the stop flag and the Assignment
// generation. Workers never allocate, lock or block the control threads (control loop, flurry-renew,
// flurry-seq).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/counter_source.h"
#include "base/endpoint.h"
#include "base/status.h"
#include "core/assignment.h"
#include "core/backend_kind.h"
#include "core/ceiling.h"
#include "core/handler.h"
#include "core/shared.h"
#include "proto/layout.h"

namespace flurry::dataplane {

struct BackendConfig {
  Endpoint listen{"127.0.0.1", 7420};  // UDP (dpdk: the appliance's IP, owned on the port)
  std::uint32_t workers = 1;
  std::uint32_t burst_size = 32;
  bool pin_workers = true;  // socket backend: worker i on the (i % n)-th of the process's n CPUs
  bool udp_gso = true;      // socket backend: answers to one peer as one UDP GSO send
  bool udp_gro = true;      // socket backend: a client's run of datagrams as one receive
  // Socket backend: poll up to this long after a burst (dataplane/poll_governor.h); 0: off.
  std::uint32_t poll_spin_us = 0;
  proto::Layout layout;  // validated, core_bits set
  std::uint32_t retry_hint_us = 1000;
  std::int64_t clock_offset_ms = 0;  // test only: shifts the workers' wall clock
  // The socket backend's workers read wall time from here once per burst; null means the
  // system clock shifted by clock_offset_ms. Tests pass a clock they step. Outlives the backend.
  const Clock* clock = nullptr;
  // --auth: mode, window, MAC function and the replay filter shared by every worker; the keys
  // come from Shared::keys, published by the control loop (flurryd's main thread).
  core::AuthConfig auth;
};

using ::flurry::CounterVisitor;

class Backend : public CounterSource {
 public:
  virtual ~Backend() = default;
  // Sets up sockets / ports and starts the workers. Fails with one sentence naming what
  // failed and the fix.
  virtual Status start() = 0;
  // Sets Shared::stop, waits for every worker to return, releases sockets / ports.
  virtual void stop() = 0;
  // name() and visit_counters() (transport drops by reason, tx failures...): CounterSource.
};

// Kernel UDP sockets: one SO_REUSEPORT socket and one thread per worker, recvmmsg/sendmmsg.
std::unique_ptr<Backend> make_socket_backend(const BackendConfig& config, core::Shared& shared);

using core::BackendKind;
// Whether this build has the backend (dpdk: libdpdk was found when it was configured; meson
// links dataplane/dpdk/ or dataplane/dpdk_stub.cc). Empty when built, else the sentence why not.
std::string backend_missing(BackendKind kind);

// The backend flurryd serves with. dpdk starts the EAL first with eal_argv[0..eal_argc) (the
// program name and the arguments before `--`); call it after the signal mask is set, so EAL's
// threads inherit it. Fails (one sentence with the fix) when it cannot be made.
Result<std::unique_ptr<Backend>> make_backend(BackendKind kind, int eal_argc, char** eal_argv,
                                              const BackendConfig& config, core::Shared& shared);

// Implemented by dataplane/dpdk/entry.cc, or by dataplane/dpdk_stub.cc in a build without DPDK.
Result<std::unique_ptr<Backend>> make_dpdk_entry(int eal_argc, char** eal_argv, const BackendConfig& config,
                                                 core::Shared& shared);
extern const bool dpdk_built;

// DPDK's telemetry library (dpdk-telemetry.py; the socket dpdk_telemetry.v2 in EAL's runtime
// directory): registers a read-only command /flurry/<name> for each entry. DPDK's telemetry
// thread answers it with answer(name), the text of a JSON object (flurryd: its control socket's
// answer to the command of that name, so /flurry/status shows what `flurryctl status` does),
// turned into telemetry data by dataplane/dpdk/telemetry.cc. Call once, after the dpdk backend
// was made (EAL started); fails in a build without DPDK, or when DPDK refuses a command.
struct TelemetryCommand {
  std::string name;  // "status": the command is /flurry/status
  std::string help;  // at most 63 characters are kept
};
using TelemetryAnswer = std::function<Result<std::string>(const std::string& name)>;
Status register_dpdk_telemetry(const std::vector<TelemetryCommand>& commands, TelemetryAnswer answer);

}  // namespace flurry::dataplane
