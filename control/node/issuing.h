// control/node/issuing.h — the node's issuing part: the packet backend (its workers: socket
// threads flurry-w<i> or DPDK lcores) and the list of front ends (RESP, HTTP), each on a core
// slice of its own, plus what the workers authenticate with (the replay table and the key
// table, reloaded on SIGHUP or `flurryctl keys reload`). The threads it starts are in the
// thread table of control/node/node.h.
//
// Order (Node::start): make() after the first durable watermark (the backend is made, EAL
// started for dpdk, nothing served), open_front_ends() (their ports bound, so a taken port
// stops the start with its name), and start() last, once the control socket answers: the
// workers, then the front ends.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "control/config.h"
#include "control/keys_file.h"
#include "control/report.h"
#include "core/keys.h"
#include "core/shared.h"
#include "dataplane/backend.h"
#include "dataplane/frontend.h"

namespace flurry::control {

// The backend's part of the configuration (the workers').
dataplane::BackendConfig backend_config_of(const Config& config);

class Issuing {
 public:
  // `sources`: the reports' sources (the node's), to which the front ends are added.
  Issuing(const Config& config, const Clock& clock, core::Shared& shared, ReportSources& sources);

  // --auth optional|required (libsodium, the replay table, the first key table), then the
  // backend, made but not serving; dpdk starts EAL here with eal_argv[0..eal_argc).
  Status make(int eal_argc, char** eal_argv);
  // Bound before the workers serve, so a taken port stops flurryd at start with its name.
  Status open_front_ends();
  // The workers, then the front ends; logs where the node serves.
  Status start();
  // Stops the workers, then the front ends (each joins its threads).
  void stop();

  // SIGHUP and `flurryctl keys reload`: the whole file or nothing; the workers switch at their
  // next burst and the old table is freed once each has (KeyTableSlot). Control loop only.
  Status reload_keys();

  const dataplane::Backend* backend() const { return backend_.get(); }
  // --seq-auto-create: what the front doors call on an unknown sequence name (set before
  // open_front_ends; unset: they refuse it).
  void set_create_sequence(std::function<Status(const std::string& name)> create) {
    create_sequence_ = std::move(create);
  }
  // Config::front_ends, in order: core slices workers, workers + 1, ...
  const std::vector<std::unique_ptr<dataplane::Frontend>>& front_ends() const { return front_ends_; }

 private:
  Status start_auth(dataplane::BackendConfig* backend_config);
  void start_source_limit();  // Shared::source_limit from --source-share, with a random seed
  dataplane::FrontendConfig front_end_config(std::uint32_t core, const Config::FrontEnd& front_end) const;

  const Config& config_;
  const Clock& clock_;
  core::Shared& shared_;
  ReportSources& sources_;
  std::unique_ptr<dataplane::Backend> backend_;
  std::vector<std::unique_ptr<dataplane::Frontend>> front_ends_;  // Config::front_ends, in order
  KeySlots key_slots_;  // key id -> counter slot, kept across reloads
  std::function<Status(const std::string& name)> create_sequence_;  // --seq-auto-create; empty: off
  std::unique_ptr<core::ReplayFilter> replay_;  // --auth optional|required: shared by the workers
};

}  // namespace flurry::control
