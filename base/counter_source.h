// base/counter_source.h — what the control loop (flurryd's main thread) may read of a packet
// backend without depending on it: its name and its own counters (transport drops by reason, tx
// failures). dataplane::Backend implements it; control/report reads it. Called on the control loop only.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace flurry {

// One backend-specific counter, e.g. {"rx_dropped", "ip_fragment", worker 0, 12}.
using CounterVisitor = std::function<void(std::string_view name, std::string_view reason,
                                          std::uint32_t worker, std::uint64_t value)>;

class CounterSource {
 public:
  virtual ~CounterSource() = default;
  virtual std::string_view name() const = 0;
  virtual void visit_counters(const CounterVisitor& visit) const = 0;
};

}  // namespace flurry
