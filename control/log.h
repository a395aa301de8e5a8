// control/log.h — one log line to stderr: "flurryd: <UTC time> <level> <text>".
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace flurry::control {

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
