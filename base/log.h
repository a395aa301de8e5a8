// base/log.h — the one logger of the daemon: every log line of flurryd, whatever folder it
// comes from (control, node, dataplane, persist, cluster), goes through log_line().
//
// Text (the default): "flurryd: <UTC time> <level> <text>". JSON (--log-format json, for log
// shippers): one object a line with the stable keys {"time": ISO-8601 UTC, "level":
// "info"|"warn"|"error", "msg": text, "service": "flurryd", "pid": N}; a text with several
// lines stays one event. Written whole to stderr with one write, flushed.
//
// Threads: any thread may log (one write a line; lines of two threads never interleave).
// Workers' hot paths never log: they count (base/counter.h). set_log_format() and
// set_log_sink() are called once at start (or by a test), before other threads log.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <string_view>

namespace flurry {

enum class LogFormat : std::uint8_t { text, json };
void set_log_format(LogFormat format);
LogFormat log_format();

// Where events go instead of stderr, unformatted (a test that checks what was logged); an
// empty function restores stderr.
using LogSink = std::function<void(std::string_view level, std::string_view text)>;
void set_log_sink(LogSink sink);

void log_line(std::string_view level, std::string_view text);

template <typename... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) {
  log_line("info", fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> format, Args&&... args) {
  log_line("warn", fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void log_error(fmt::format_string<Args...> format, Args&&... args) {
  log_line("error", fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace flurry
