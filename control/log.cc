// control/log.cc — see log.h. Control core and start-up only; never called by workers.
#include "control/log.h"

#include <chrono>
#include <cstdio>

#include "proto/layout.h"

namespace flurry::control {

void log_line(std::string_view level, std::string_view text) {
  const auto now_ms = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                     std::chrono::system_clock::now().time_since_epoch())
                                                     .count());
  const std::string line = fmt::format("flurryd: {} {} {}\n", proto::format_unix_ms(now_ms), level, text);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace flurry::control
