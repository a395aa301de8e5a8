// control/log.h — one log event to stderr. Text (the default): "flurryd: <UTC time> <level>
// <text>". JSON (--log-format json, for log shippers): one object a line with the stable keys
// {"time": ISO-8601 UTC, "level": "info"|"warn"|"error", "msg": text, "service": "flurryd",
// "pid": N}; a text with several lines stays one event.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

namespace flurry::control {

enum class LogFormat : std::uint8_t { text, json };
// Set once at start, before any thread logs.
void set_log_format(LogFormat format);
LogFormat log_format();

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

}  // namespace flurry::control
