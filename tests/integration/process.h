// tests/integration/process.h — start and stop real flurryd processes for integration tests.
//
// A Daemon is one flurryd child: started with fork/exec, its stdout+stderr in a log file,
// stopped by PID (never by name). The destructor kills and reaps a child still running.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace flurry::testing {

inline std::string env_or_die(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) {
    std::fprintf(stderr, "environment variable %s is not set (run through meson test)\n", name);
    std::abort();
  }
  return value;
}

// A port on 127.0.0.1 that was free a moment ago (type: SOCK_DGRAM or SOCK_STREAM).
inline std::uint16_t free_port(int type) {
  const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}
inline std::uint16_t free_udp_port() { return free_port(SOCK_DGRAM); }
inline std::uint16_t free_tcp_port() { return free_port(SOCK_STREAM); }

inline std::string make_temp_dir(const std::string& prefix) {
  std::string pattern = "/tmp/" + prefix + "XXXXXX";
  char* made = mkdtemp(pattern.data());
  if (made == nullptr) std::abort();
  return made;
}

class Daemon {
 public:
  Daemon() = default;
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  ~Daemon() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }

  // Starts `binary args...`, output to `log_path`.
  void start(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path) {
    log_path_ = log_path;
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
  }

  void kill(int signal) {
    if (pid_ > 0) ::kill(pid_, signal);
  }

  // Waits for the child to end; returns its exit code (128 + signal when killed).
  int wait() {
    if (pid_ <= 0) return exit_code_;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }

  // Waits at most `timeout` for the child to end by itself.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const pid_t done = waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  bool running() const { return pid_ > 0 && ::kill(pid_, 0) == 0; }
  pid_t pid() const { return pid_; }

  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
  std::string log_path_;
};

// Runs `binary args...` to completion (bounded by `timeout`), returning exit code and output.
struct RunResult {
  int exit_code = -1;
  std::string output;
};
inline RunResult run_to_end(const std::string& binary, const std::vector<std::string>& args,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000)) {
  const std::string dir = make_temp_dir("flurry-run-");
  const std::string log = dir + "/out.log";
  Daemon process;
  process.start(binary, args, log);
  RunResult result;
  auto code = process.wait_for(timeout);
  if (!code) {
    process.kill(SIGKILL);
    code = process.wait();
  }
  result.exit_code = *code;
  result.output = process.log();
  unlink(log.c_str());
  rmdir(dir.c_str());
  return result;
}

}  // namespace flurry::testing
