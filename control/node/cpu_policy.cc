// control/node/cpu_policy.cc — see cpu_policy.h.
#include "control/node/cpu_policy.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace flurry::control {
namespace {

// The first line of a file, or "" if it cannot be read.
std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A CPU quota on this process's cgroup ("cpu.max 50000 100000" or cgroup v1's
// "cpu.cfs_quota_us 50000"), or "" when it has none.
std::string cpu_quota() {
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    // "0::/path" (v2) or "N:cpu,cpuacct:/path" (v1).
    const std::size_t first = line.find(':');
    const std::size_t second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (path == "/") path.clear();
    if (controllers.empty()) {
      const std::string max = first_line("/sys/fs/cgroup" + path + "/cpu.max");
      if (!max.empty() && max.rfind("max", 0) != 0) return "cpu.max " + max;
    } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
      const std::string quota = first_line("/sys/fs/cgroup/" + controllers + path + "/cpu.cfs_quota_us");
      if (!quota.empty() && quota[0] != '-' && quota != "0") return "cpu.cfs_quota_us " + quota;
    }
  }
  return "";
}

}  // namespace

// Why the socket workers must not poll on this machine (--poll-spin-us), or "": a polling
// worker needs a CPU of its own, the machine a CPU beyond the workers' for everything else
// (the clients on it, the control thread), and a CPU quota would be spent on polling. A
// process pinned to as many CPUs as it has workers on a larger machine (taskset, cpuset) is
// a deliberate placement: it polls.
std::string poll_off_reason(const Config& config) {
  if (config.backend_kind != core::BackendKind::socket || config.poll_spin_us == 0) return "";
  const auto plural = [](long n) { return n == 1 ? "" : "s"; };
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online > 0 && static_cast<std::uint64_t>(online) <= config.workers) {
    return fmt::format("{} CPU{} online for {} worker{}: a polling worker would hold up everything else here",
                       online, plural(online), config.workers, plural(config.workers));
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 &&
      static_cast<std::uint32_t>(CPU_COUNT(&allowed)) < config.workers) {
    return fmt::format("{} CPU{} allowed for {} workers: polling workers would hold each other up",
                       CPU_COUNT(&allowed), plural(CPU_COUNT(&allowed)), config.workers);
  }
  if (const std::string quota = cpu_quota(); !quota.empty()) {
    return "this cgroup has a CPU quota (" + quota + "): polling would spend it";
  }
  return "";
}

}  // namespace flurry::control
