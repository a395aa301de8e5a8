// control/node/state_dir.h — flurryd's state directory at start: the operator mistakes that would
// issue IDs twice are refused here, or made harmless (docs/architecture.md, the invariant).
//
//   * A state dir without a watermark is a new node only with --init (local mode); --init on a
//     state dir that has one is refused. A mistyped or lost --state-dir never silently starts
//     from zero. A new node's first IDs lie at least `lead` above the clock, so a node
//     re-initialised on the same host right after losing its state dir cannot reissue the run-
//     ahead of the instance before it. Cluster mode needs no --init: etcd's watermark is the floor.
//   * Another identity in the record (node id, layout):
//       - the same ID space but for the worker count (core bits from the sequence): adopted;
//       - another node id (local mode): needs --accept-state-change; the watermark is kept;
//       - another layout: needs --accept-state-change; the watermark is carried into the new
//         layout's units so every new ID is numerically above every ID the old layout could
//         have issued (proto::carry_watermark), or the change is refused when that floor lies
//         beyond the new layout's range or more than carry_ahead_ms_max ahead of the clock;
//       - a record of format 1 (layout not recorded) under another layout: refused.
// Part of the node (control/node/node.h): it sees persist/ and proto/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "control/config.h"
#include "persist/watermark_store.h"

namespace flurry::control {

// A carried floor further ahead of the clock than this is refused: the node's IDs would look
// that far in the future for good (run-ahead is bounded by the clock, which never catches up).
inline constexpr std::uint64_t carry_ahead_ms_max = 3'600'000;

struct OpenedState {
  std::unique_ptr<persist::WatermarkStore> store;
  std::uint64_t floor_t = 0;  // workers start above this (local mode; cluster mode adds etcd's)
};

persist::Identity identity_of(const Config& config);

// Opens (or with --init creates) config.state_dir and settles its identity. Fails (one
// sentence with the fix) when the start must be refused. `io`: persist/'s disk (nullptr: the
// system's; a test passes a simulated one).
Result<OpenedState> open_state(const Config& config, const Clock& clock, persist::Io* io = nullptr);

}  // namespace flurry::control
