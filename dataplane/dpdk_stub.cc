// dataplane/dpdk_stub.cc — linked instead of dataplane/dpdk/ when libdpdk is not found: the
// dpdk backend is then refused at start with a sentence (backend_missing), never compiled
// out with #ifdef.
#include "dataplane/backend.h"

namespace flurry::dataplane {

const bool dpdk_built = false;

Result<std::unique_ptr<Backend>> make_dpdk_entry(int, char**, const BackendConfig&, core::Shared&) {
  return Error{backend_missing(BackendKind::dpdk), StatusCode::refused};
}

Status register_dpdk_telemetry(const std::vector<TelemetryCommand>&, TelemetryAnswer) {
  return Error{backend_missing(BackendKind::dpdk), StatusCode::refused};
}

}  // namespace flurry::dataplane
