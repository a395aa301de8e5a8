// base/log.cc — see log.h.
#include "base/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "base/time_text.h"

namespace flurry {

namespace {
LogFormat format_ = LogFormat::text;
// Made on first use: a sink set from another file's static initialiser (a test's capture)
// must not be wiped by this file's.
LogSink& sink_() {
  static LogSink sink;
  return sink;
}
}  // namespace

void set_log_format(LogFormat format) { format_ = format; }
LogFormat log_format() { return format_; }
void set_log_sink(LogSink sink) { sink_() = std::move(sink); }

void log_line(std::string_view level, std::string_view text) {
  if (const LogSink& sink = sink_()) {
    sink(level, text);
    return;
  }
  const auto now_ms = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                     std::chrono::system_clock::now().time_since_epoch())
                                                     .count());
  std::string line;
  if (format_ == LogFormat::json) {
    const nlohmann::json event = {{"time", format_unix_ms(now_ms)},
                                  {"level", level},
                                  {"msg", text},
                                  {"service", "flurryd"},
                                  {"pid", static_cast<long>(getpid())}};
    // Invalid UTF-8 in a message (a name from a bad request) is replaced, never thrown on.
    line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else {
    line = fmt::format("flurryd: {} {} {}\n", format_unix_ms(now_ms), level, text);
  }
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace flurry
