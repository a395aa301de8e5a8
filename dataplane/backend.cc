// dataplane/backend.cc — the backend factory (see backend.h).
#include "dataplane/backend.h"

namespace flurry::dataplane {

std::string backend_missing(BackendKind kind) {
  switch (kind) {
    case BackendKind::socket:
      return {};
    case BackendKind::dpdk:
      return dpdk_built ? std::string()
                        : "the dpdk backend is not part of this build (libdpdk-dev was not found when it was "
                          "configured): use --backend socket, or run scripts/setup and rebuild";
  }
  return "unknown backend";
}

Result<std::unique_ptr<Backend>> make_backend(BackendKind kind, int eal_argc, char** eal_argv,
                                              const BackendConfig& config, core::Shared& shared) {
  switch (kind) {
    case BackendKind::socket:
      return make_socket_backend(config, shared);
    case BackendKind::dpdk:
      return make_dpdk_entry(eal_argc, eal_argv, config, shared);
  }
  return Error{"unknown backend"};
}

}  // namespace flurry::dataplane
