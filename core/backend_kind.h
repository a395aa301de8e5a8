// core/backend_kind.h — which packet backend serves, chosen once at start (CONTRIBUTING.md: decide
// modes at start). Here, not in dataplane/, so that control/'s config can name it without
// depending on the dataplane.
#pragma once

#include <optional>
#include <string_view>

namespace flurry::core {

enum class BackendKind { socket, dpdk };

inline std::optional<BackendKind> parse_backend(std::string_view name) {
  if (name == "socket") return BackendKind::socket;
  if (name == "dpdk") return BackendKind::dpdk;
  return std::nullopt;
}

inline std::string_view to_string(BackendKind kind) {
  switch (kind) {
    case BackendKind::socket:
      return "socket";
    case BackendKind::dpdk:
      return "dpdk";
  }
  return "unknown";
}

}  // namespace flurry::core
