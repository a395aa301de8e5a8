// core/assignment.h — which node id the workers serve and the floor they start above.
//
// WatermarkScheduler::reassign changes it (flurryd's main thread at start; the renew thread,
// flurry-renew, after a re-claim) in this order: fence the ceiling, publish() (bumps
// `generation`, release), and only then publish a ceiling for the new assignment. Workers
// read both once per burst with load_burst_ceiling() below, which never pairs a ceiling with
// the wrong assignment. In local mode it is published once at start; in cluster mode again
// after every re-claim.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/ceiling.h"

namespace flurry::core {

struct alignas(64) Assignment {
  std::atomic<std::uint32_t> node_id{0};
  std::atomic<std::uint64_t> floor_t{0};
  // The wall clock (Unix ms) when this process began serving node_id: signed requests stamped
  // before it are refused (core/handler.h), since this process cannot know whether they were
  // served before (by its previous run, or by the node id's previous holder).
  std::atomic<std::uint64_t> since_unix_ms{0};
  std::atomic<std::uint64_t> generation{0};

  void publish(std::uint32_t node, std::uint64_t floor, std::uint64_t since_ms) {
    // Release/acquire on every field, not only the generation: with two reassigns back to
    // back a worker must never combine one's node id with the other's floor.
    node_id.store(node, std::memory_order_release);
    floor_t.store(floor, std::memory_order_release);
    since_unix_ms.store(since_ms, std::memory_order_release);
    generation.fetch_add(1, std::memory_order_release);
  }
  std::uint64_t current_generation() const { return generation.load(std::memory_order_acquire); }
};

// Once per burst: the ceiling to issue under, consistent with the worker's assignment.
// `rebuild()` must rebuild the worker's handler from `assignment` (new node id,
// start_above(floor_t)) and set `seen_generation` to the generation it used.
//
// Why a loop: a ceiling is published only after the assignment it belongs to, so if the
// generation read *after* the ceiling (acquire on both) is the one the worker already
// serves, the ceiling belongs to that assignment (or is fenced / 0). Otherwise the ceiling may
// predate the fence of the old assignment, or belong to the new one while the handler is the
// old one: issuing under either pairing could put IDs on a node id above a watermark that is
// not durable for it. So rebuild and read again until the two agree. Never blocks; in steady
// state it is two plain loads and a compare.
template <typename Rebuild>
std::uint64_t load_burst_ceiling(const Ceiling& ceiling, const Assignment& assignment,
                                 const std::uint64_t& seen_generation, Rebuild&& rebuild) {
  for (;;) {
    const std::uint64_t ceiling_t = ceiling.load();
    if (assignment.current_generation() == seen_generation) return ceiling_t;
    rebuild();
  }
}

}  // namespace flurry::core
