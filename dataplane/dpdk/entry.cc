// dataplane/dpdk/entry.cc — the dpdk backend's entry for the factory in dataplane/backend.h.
#include "dataplane/backend.h"
#include "dataplane/dpdk/dpdk_backend.h"

namespace flurry::dataplane {

const bool dpdk_built = true;

Result<std::unique_ptr<Backend>> make_dpdk_entry(int eal_argc, char** eal_argv, const BackendConfig& config,
                                                 core::Shared& shared) {
  return init_eal_and_make_dpdk_backend(eal_argc, eal_argv, config, shared);
}

}  // namespace flurry::dataplane
