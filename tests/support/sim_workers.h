// tests/support/sim_workers.h — the workers of a simulated node, stepped by the test: one
// core::Handler per core, rebuilt from the published Assignment exactly as a backend's worker
// does on its tick (new node id, start above the floor). Used with core::load_burst_ceiling.
#pragma once

#include <cstdint>
#include <vector>

#include "core/handler.h"
#include "core/shared.h"
#include "proto/layout.h"

namespace flurry::testing {

struct SimWorkers {
  std::vector<core::Handler> handlers;
  std::uint64_t seen_generation = ~std::uint64_t{0};

  // Picks up a new assignment, if one was published since the last call.
  void sync(core::Shared& shared, const proto::Layout& layout, std::uint32_t workers) {
    const std::uint64_t generation = shared.assignment.current_generation();
    if (generation == seen_generation) return;
    seen_generation = generation;
    handlers.clear();
    handlers.reserve(workers);
    core::HandlerConfig config;
    config.layout = layout;
    config.workers = workers;
    config.node_id = shared.assignment.node_id.load();
    for (std::uint32_t core = 0; core < workers; ++core) {
      config.core = core;
      handlers.emplace_back(config, shared.stats[core]);
      handlers.back().start_above(shared.assignment.floor_t.load());
    }
  }
};

}  // namespace flurry::testing
