// core/front_end_kind.h — which front doors flurryd can open besides UDP (--resp-listen,
// --http-listen, --memcache-listen). Here, not in dataplane/, so that control/'s config can
// list them without depending on the dataplane (as core/backend_kind.h). Each one opened takes the next core
// slice after the workers' (control/config.h Config::front_ends).
#pragma once

#include <cstdint>
#include <string_view>

namespace flurry::core {

enum class FrontEndKind : std::uint8_t { resp, http, memcache };

inline std::string_view to_string(FrontEndKind kind) {
  switch (kind) {
    case FrontEndKind::resp:
      return "resp";
    case FrontEndKind::http:
      return "http";
    case FrontEndKind::memcache:
      return "memcache";
  }
  return "unknown";
}

}  // namespace flurry::core
