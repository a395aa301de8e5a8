// tests/support/child_process.h — a program a test runs as a child process (flurryd, etcd,
// prometheus, promtool): fork/exec with stdout and stderr appended to a log file, stdin from
// /dev/null or a file, extra environment entries. The child is addressed by its PID only,
// never by name, and every wait is bounded. The destructor stops a child still running
// (stop(): SIGCONT, SIGTERM, bounded wait, SIGKILL) and reaps it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flurry::testing {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts `binary args...` (no PATH search) with stdout and stderr appended to `log_path`,
  // `env` entries ("NAME=value") added to this process's environment and stdin read from
  // `stdin_path`. False when the log or stdin cannot be opened or fork fails; an exec that
  // fails writes a line to the log and exits 127.
  [[nodiscard]] bool spawn(const std::string& binary, const std::vector<std::string>& args,
                           const std::string& log_path, const std::vector<std::string>& env = {},
                           const std::string& stdin_path = "/dev/null");

  // The child's PID; -1 before spawn and after stop().
  pid_t pid() const { return pid_; }
  // False once the child exited (it is reaped here, so an exited child is never a zombie
  // that still looks alive).
  bool running();
  // Waits up to timeout_ms for the child to end; its exit status (128 + signal when a signal
  // ended it), or nullopt when it still runs (or was never started).
  std::optional<int> wait(std::uint64_t timeout_ms);
  // Sends `signal_number` to the child, if it still runs.
  void signal(int signal_number);
  // SIGCONT (in case it is stopped), SIGTERM, waits up to timeout_ms, then SIGKILL and a
  // bounded wait. Afterwards pid() is -1.
  void stop(std::uint64_t timeout_ms = 5000);

  // Everything in the log file so far.
  std::string log() const;
  // Polls the log for `text` up to timeout_ms; false on timeout or when the child exited
  // without writing it.
  bool wait_for_log(const std::string& text, std::uint64_t timeout_ms);

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  std::optional<int> status_;
};

struct RunResult {
  int exit_code = -1;  // 128 + signal when a signal ended it; -1 when it could not start
  std::string output;  // stdout and stderr
};

// Runs `binary args...` to its end (stdin from `stdin_path`), bounded by timeout_ms: a child
// still running then is killed with SIGKILL (exit code 137).
RunResult run_to_end(const std::string& binary, const std::vector<std::string>& args,
                     std::uint64_t timeout_ms = 10'000, const std::string& stdin_path = "/dev/null");

// The value of an environment variable meson sets for the test (a binary's path); prints its
// name and aborts when it is unset.
std::string env_or_die(const char* name);

}  // namespace flurry::testing
