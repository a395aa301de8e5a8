// base/time_text.cc — see time_text.h.
#include "base/time_text.h"

#include <cstdio>
#include <ctime>

namespace flurry {

std::string format_unix_ms(std::uint64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[96];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<unsigned>(unix_ms % 1000));
  return text;
}

}  // namespace flurry
