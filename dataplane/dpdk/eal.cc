// dataplane/dpdk/eal.cc — EAL start and cleanup, with errors that name the fix.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/dpdk/dpdk_backend.h"

namespace flurry::dataplane {

namespace {

std::atomic<bool> eal_started{false};
std::atomic<bool> eal_ready{false};
std::atomic<bool> eal_cleaned{false};

bool has_argument(int argc, char** argv, std::string_view name) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).starts_with(name)) return true;
  }
  return false;
}

void cleanup_at_exit() { eal_cleanup(); }

}  // namespace

Status eal_init(int argc, char** argv) {
  if (eal_started.exchange(true)) return Error{"EAL was already initialised in this process"};
  // rte_eal_init may permute argv; give it a copy of the pointers.
  std::vector<char*> args(argv, argv + argc);
  args.push_back(nullptr);
  const int parsed = rte_eal_init(argc, args.data());
  if (parsed < 0) {
    const int code = rte_errno;
    std::string text = "DPDK EAL init failed (" + std::string(rte_strerror(code)) + ")";
    const bool no_huge = has_argument(argc, argv, "--no-huge");
    if (code == EALREADY) {
      text += ": EAL already initialised";
    } else if (!no_huge && (code == EACCES || code == ENOMEM)) {
      text +=
          ": no usable hugepages — reserve them (scripts/lab up --hugepages 512, or "
          "dpdk-hugepages.py -p 2M --setup 1G) or pass --no-huge -m 256 for a test run";
    } else if (code == EACCES || code == EPERM) {
      text += ": run as root (or with CAP_SYS_ADMIN, CAP_NET_RAW, CAP_IPC_LOCK)";
    } else if (code == EINVAL) {
      text += ": check the EAL arguments before `--` (e.g. -l 0-1 --vdev=net_af_xdp0,iface=flv0)";
    } else if (code == EBUSY || code == EEXIST) {
      text += ": another DPDK process uses the same runtime directory; pass --file-prefix NAME";
    } else {
      text += "; see the EAL messages above";
    }
    return Error{text};
  }
  eal_ready.store(true);
  std::atexit(cleanup_at_exit);
  return {};
}

bool eal_initialized() { return eal_ready.load() && !eal_cleaned.load(); }

std::uint32_t eal_worker_lcores() {
  if (!eal_initialized()) return 0;
  const unsigned count = rte_lcore_count();
  return count == 0 ? 0 : count - 1;
}

void eal_cleanup() {
  if (!eal_ready.load() || eal_cleaned.exchange(true)) return;
  rte_eal_cleanup();
}

}  // namespace flurry::dataplane
