// tests/dataplane/cpu_pin_test.cc — which CPU a socket-backend worker is pinned to
// (dataplane/cpu_pin.h): the process's own CPUs, in order, wrapping.
#include "dataplane/cpu_pin.h"

#include <gtest/gtest.h>

namespace flurry::dataplane {
namespace {

cpu_set_t set_of(std::initializer_list<int> cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  return set;
}

TEST(CpuPin, ListsTheCpusOfASetInOrder) {
  EXPECT_EQ(cpus_in(set_of({})), std::vector<int>{});
  EXPECT_EQ(cpus_in(set_of({5, 2, 63, 64})), (std::vector<int>{2, 5, 63, 64}));
  EXPECT_EQ(cpus_in(set_of({CPU_SETSIZE - 1})), std::vector<int>{CPU_SETSIZE - 1});
}

TEST(CpuPin, WorkersTakeTheAllowedCpusInTurn) {
  const std::vector<int> allowed = {1};  // taskset -c 1 on a two-CPU machine
  EXPECT_EQ(worker_cpu(allowed, 0), 1);
  EXPECT_EQ(worker_cpu(allowed, 1), 1);
  const std::vector<int> cpuset = {2, 3, 6};
  EXPECT_EQ(worker_cpu(cpuset, 0), 2);
  EXPECT_EQ(worker_cpu(cpuset, 1), 3);
  EXPECT_EQ(worker_cpu(cpuset, 2), 6);
  EXPECT_EQ(worker_cpu(cpuset, 3), 2);
  EXPECT_EQ(worker_cpu({}, 0), -1) << "no set known: do not pin";
}

TEST(CpuPin, TheProcessSetIsWhatTheKernelSays) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const std::vector<int> allowed = allowed_cpus();
  EXPECT_EQ(allowed, cpus_in(set));
  EXPECT_EQ(static_cast<int>(allowed.size()), CPU_COUNT(&set));
}

}  // namespace
}  // namespace flurry::dataplane
