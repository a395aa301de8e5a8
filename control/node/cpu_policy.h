// control/node/cpu_policy.h — what the machine allows the workers: whether a socket worker may
// poll (--poll-spin-us) given the CPUs online, the process's CPU affinity and its cgroup's CPU
// quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us). Read once at start, on flurryd's main thread.
#pragma once

#include <string>

#include "control/config.h"

namespace flurry::control {

// Why the socket workers must not poll on this machine, or "" when they may (or the flag is
// off, or the backend is not the socket one).
std::string poll_off_reason(const Config& config);

}  // namespace flurry::control
