// core/assignment.h — which node id the workers serve and the floor they start above.
//
// Written by the control core only while the ceiling is 0 or fenced (so nothing is issued
// meanwhile), then `generation` is bumped with release order. Each worker checks
// `generation` on its tick (never per packet) and, when it moved, rebuilds its handler with
// the new node id and start_above(floor_t). In local mode it is published once at start;
// in cluster mode again after every re-claim.
#pragma once

#include <atomic>
#include <cstdint>

namespace flurry::core {

struct alignas(64) Assignment {
  std::atomic<std::uint32_t> node_id{0};
  std::atomic<std::uint64_t> floor_t{0};
  std::atomic<std::uint64_t> generation{0};

  void publish(std::uint32_t node, std::uint64_t floor) {
    node_id.store(node, std::memory_order_relaxed);
    floor_t.store(floor, std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_release);
  }
  std::uint64_t current_generation() const { return generation.load(std::memory_order_acquire); }
};

}  // namespace flurry::core
