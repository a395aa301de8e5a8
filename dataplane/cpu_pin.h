// dataplane/cpu_pin.h — which CPU each socket-backend worker is pinned to (--pin-workers).
//
// Worker i runs on the i-th CPU, wrapping, of the CPUs the process may run on when the backend
// starts: `taskset`, a cgroup cpuset and systemd's CPUAffinity= hold for the workers too.
// (Pinning worker i to CPU i of the machine moved a worker out of the operator's set: under
// `taskset -c 1 flurryd` the polling worker landed on CPU 0, beside the client it was meant
// to leave alone.) Pure, apart from reading the process's own mask.
#pragma once

#include <sched.h>

#include <cstdint>
#include <vector>

namespace flurry::dataplane {

// The CPUs in `set`, ascending.
inline std::vector<int> cpus_in(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// The CPUs this thread may run on (in the main thread before any pinning: the process's set);
// empty when the kernel does not say.
inline std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return {};
  return cpus_in(set);
}

// Worker `index`'s CPU: the (index % size)-th of `allowed`; -1 (do not pin) when it is empty.
inline int worker_cpu(const std::vector<int>& allowed, std::uint32_t index) {
  if (allowed.empty()) return -1;
  return allowed[index % allowed.size()];
}

}  // namespace flurry::dataplane
