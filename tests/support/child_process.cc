// tests/support/child_process.cc — see child_process.h.
#include "tests/support/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

extern char** environ;

namespace flurry::testing {
namespace {

int exit_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

ChildProcess::~ChildProcess() { stop(); }

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), log_path_(std::move(other.log_path_)), status_(other.status_) {
  other.pid_ = -1;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    stop();
    pid_ = other.pid_;
    log_path_ = std::move(other.log_path_);
    status_ = other.status_;
    other.pid_ = -1;
  }
  return *this;
}

bool ChildProcess::spawn(const std::string& binary, const std::vector<std::string>& args,
                         const std::string& log_path, const std::vector<std::string>& env,
                         const std::string& stdin_path) {
  stop();  // one child per object
  log_path_ = log_path;
  status_.reset();
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) environment.emplace_back(*entry);
  for (const auto& extra : env) environment.push_back(extra);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const std::string exec_failed = "cannot exec " + binary + "\n";

  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return false;
  const int stdin_fd = open(stdin_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (stdin_fd < 0) {
    close(log_fd);
    return false;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // The child dies with the test: a test that aborts (a sanitizer report, a crash) must not
    // leave a flurryd behind holding its node id and port for every test after it. (The
    // signal follows the forking thread; tests spawn from their main thread.)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the test died before prctl took effect
    dup2(stdin_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execve(argv[0], argv.data(), envp.data());
    const ssize_t ignored = write(2, exec_failed.data(), exec_failed.size());
    (void)ignored;
    _exit(127);
  }
  close(stdin_fd);
  close(log_fd);
  if (pid < 0) return false;
  pid_ = pid;
  return true;
}

bool ChildProcess::running() {
  if (pid_ <= 0 || status_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    status_ = exit_status(status);
    return false;
  }
  return true;
}

std::optional<int> ChildProcess::wait(std::uint64_t timeout_ms) {
  const std::uint64_t deadline = now_ms() + timeout_ms;
  while (running()) {
    if (now_ms() >= deadline) return std::nullopt;
    sleep_ms(10);
  }
  return status_;
}

void ChildProcess::signal(int signal_number) {
  if (running()) kill(pid_, signal_number);
}

void ChildProcess::stop(std::uint64_t timeout_ms) {
  if (pid_ <= 0) return;
  if (running()) {
    kill(pid_, SIGCONT);
    kill(pid_, SIGTERM);
    if (!wait(timeout_ms)) {
      kill(pid_, SIGKILL);
      wait(5000);
    }
  }
  pid_ = -1;
}

std::string ChildProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool ChildProcess::wait_for_log(const std::string& text, std::uint64_t timeout_ms) {
  const std::uint64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    if (log().find(text) != std::string::npos) return true;
    if (!running() || now_ms() >= deadline) return log().find(text) != std::string::npos;
    sleep_ms(20);
  }
}

RunResult run_to_end(const std::string& binary, const std::vector<std::string>& args,
                     std::uint64_t timeout_ms, const std::string& stdin_path) {
  const TempDir dir("flurry-run-");
  RunResult result;
  ChildProcess child;
  if (!child.spawn(binary, args, dir.sub("output.log"), {}, stdin_path)) {
    result.output =
        "cannot start " + binary + " (log or stdin " + stdin_path + " not opened, or fork failed)";
    return result;
  }
  std::optional<int> code = child.wait(timeout_ms);
  if (!code) {
    child.signal(SIGKILL);
    code = child.wait(10'000);
  }
  result.exit_code = code.value_or(-1);
  result.output = child.log();
  return result;
}

std::string env_or_die(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) {
    std::fprintf(stderr, "environment variable %s is not set (run through meson test)\n", name);
    std::abort();
  }
  return value;
}

}  // namespace flurry::testing
