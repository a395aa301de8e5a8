// tests/support/log_capture.h — what the code under test logged (base/log.h), for tests that
// check a warning was (or was not) given. While a LogCapture lives, log lines go to it instead
// of stderr; warnings() takes the "warn" texts logged so far (oldest first) and forgets them.
// One at a time per process; thread-safe.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/log.h"

namespace flurry::testing {

class LogCapture {
 public:
  LogCapture() {
    set_log_sink([this](std::string_view level, std::string_view text) {
      std::lock_guard lock(mutex_);
      if (level == "warn") warnings_.emplace_back(text);
    });
  }
  ~LogCapture() { set_log_sink({}); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<std::string> warnings() {
    std::lock_guard lock(mutex_);
    return std::exchange(warnings_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> warnings_;
};

}  // namespace flurry::testing
