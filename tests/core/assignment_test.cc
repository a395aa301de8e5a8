// tests/core/assignment_test.cc — load_burst_ceiling never pairs a ceiling with the wrong
// assignment. The interleavings a second thread could produce are replayed by letting
// `rebuild` (which runs between the two reads) apply the renew thread's (flurry-renew's) next stores.
#include <gtest/gtest.h>

#include "core/assignment.h"

namespace flurry::core {
namespace {

TEST(LoadBurstCeiling, SteadyStateReturnsTheCeilingWithoutRebuilding) {
  Ceiling ceiling;
  Assignment assignment;
  assignment.publish(3, 100, 1000);
  ceiling.publish(500);
  std::uint64_t seen = assignment.current_generation();
  int rebuilds = 0;
  EXPECT_EQ(load_burst_ceiling(ceiling, assignment, seen, [&] { ++rebuilds; }), 500U);
  EXPECT_EQ(rebuilds, 0);
}

TEST(LoadBurstCeiling, NewAssignmentIsPickedUpBeforeItsCeilingIsUsed) {
  Ceiling ceiling;
  Assignment assignment;
  assignment.publish(3, 100, 1000);
  ceiling.publish(500);
  std::uint64_t seen = assignment.current_generation();
  std::uint32_t node_used = 3;
  // The renew thread (flurry-renew): fence, reassign to node 7 above 900, publish its ceiling 1200.
  ceiling.fence();
  assignment.publish(7, 900, 2000);
  ceiling.publish(1200);
  const std::uint64_t got = load_burst_ceiling(ceiling, assignment, seen, [&] {
    seen = assignment.current_generation();
    node_used = assignment.node_id.load();
  });
  EXPECT_EQ(got, 1200U);
  EXPECT_EQ(node_used, 7U) << "the new ceiling was used with the old node id";
}

TEST(LoadBurstCeiling, CeilingReadBeforeTheFenceIsNotUsedWithTheNewAssignment) {
  // The worker reads the old node's ceiling (500), then flurry-renew fences and
  // publishes the new assignment before the worker reads the generation. The old ceiling
  // must not be used with the new node id: after the rebuild the ceiling is read again.
  Ceiling ceiling;
  Assignment assignment;
  assignment.publish(3, 100, 1000);
  ceiling.publish(500);
  std::uint64_t seen = assignment.current_generation();
  bool control_moved = false;
  // Make the generation change visible on the first check, as if it happened right after the
  // worker's ceiling load; the fence store precedes it in flurry-renew's order.
  ceiling.fence();
  assignment.publish(7, 900, 2000);
  ceiling.value.store(500);  // what the worker's first load saw (before the fence)
  const std::uint64_t got = load_burst_ceiling(ceiling, assignment, seen, [&] {
    seen = assignment.current_generation();
    // By now the fence (ordered before the generation bump) is visible to this worker.
    ceiling.fence();
    control_moved = true;
  });
  EXPECT_TRUE(control_moved);
  EXPECT_EQ(got, ceiling_fenced) << "a pre-fence ceiling was paired with the new node id";
}

}  // namespace
}  // namespace flurry::core
