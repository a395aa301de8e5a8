// control/flurryd.cc — flurryd's main: parse the flags, block the signals, take the locks,
// open the node (control/node/node.h: the state dir, cluster mode's claim, the stores), start
// it, run its control loop until SIGINT/SIGTERM, stop it. Everything between is the node's.
//
// Start order keeps the invariant: the watermark file is opened and the first watermark made
// durable *before* any ceiling is published; workers start above the durable watermark.
// SIGINT/SIGTERM stop the workers first; the watermark file stays valid (it only ever holds
// durable values above everything issued).
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "control/config.h"
#include "control/listen_lock.h"
#include "control/node/node.h"

namespace flurry::control {
namespace {

int fail(const std::string& text, int code = 1) {
  log_line("error", text);
  return code;
}

// EAL arguments (dpdk backend) come before `--`; flurryd's own after it. Returns the exit
// code when flurryd must not go on (help printed, or bad flags).
std::optional<int> parse_arguments(int argc, char** argv, Config* config, int* eal_argc) {
  int own_begin = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      own_begin = i;
      break;
    }
  }
  *eal_argc = own_begin == 0 ? 1 : own_begin;
  std::vector<const char*> own_args = {argv[0]};
  for (int i = own_begin == 0 ? 1 : own_begin + 1; i < argc; ++i) own_args.push_back(argv[i]);
  const Result<Parsed> parsed = parse_config(static_cast<int>(own_args.size()), own_args.data(), config);
  if (!parsed.ok()) return fail(parsed.message(), 2);
  set_log_format(config->log_format == "json" ? LogFormat::json : LogFormat::text);
  if (parsed->help_asked()) {
    std::fputs(parsed->help.c_str(), stdout);
    return 0;
  }
  return std::nullopt;
}

// Signals are taken by the control loop through a signalfd; block them before any worker
// thread exists so every thread (EAL's too) inherits the mask.
int block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // reloads the key file
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
}

// One state dir, one flurryd (first, when the directory exists: a second start on it is told
// so, with the holder's pid; a new one is locked right after open_state made it); one address,
// one flurryd; in local mode also one node id per host: taken before the state dir is opened,
// so a second instance is refused with the holder's pid whatever its state dir
// (control/listen_lock.h).
Status take_locks(const Config& config, ListenLock& lock) {
  struct stat info {};
  if (stat(config.state_dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    if (Status taken = lock.acquire_state_dir(config.state_dir); !taken.ok()) return taken;
  }
  Result<std::string> dir = lock_dir(config.lock_dir, config.state_dir);
  if (!dir.ok()) return dir.status();
  if (Status taken = lock.acquire(*dir, config.listen.address, config.listen.port); !taken.ok()) return taken;
  if (config.etcd.empty()) return lock.acquire_node(*dir, config.node_id);
  return {};
}

int run(int argc, char** argv) {
  Config config;
  int eal_argc = 1;
  if (const auto exit_code = parse_arguments(argc, argv, &config, &eal_argc)) return *exit_code;
  const int signal_fd = block_signals();
  if (signal_fd < 0) return fail(std::string("signalfd: ") + std::strerror(errno));
  log_info("starting; effective configuration:\n{}", describe(config));
  if (Status checked = Node::check(config); !checked.ok()) return fail(checked.message(), 2);

  ListenLock lock;
  if (Status taken = take_locks(config, lock); !taken.ok()) return fail(taken.message());
  const SystemClock clock(config.clock_offset_ms);
  int exit_code = 1;
  Result<std::unique_ptr<Node>> node = Node::open(
      config,
      NodeOptions{
          .clock = &clock, .signal_fd = signal_fd, .lock = &lock, .eal_argc = eal_argc, .eal_argv = argv},
      &exit_code);
  if (!node.ok()) return fail(node.message(), exit_code);
  if (Status started = (*node)->start(); !started.ok()) {
    (*node)->stop();
    return fail(started.message());
  }
  (*node)->run();
  (*node)->stop();
  log_info("stopped; durable watermark {} stays valid, the next start issues above it",
           (*node)->durable_watermark_t());
  return 0;
}

}  // namespace
}  // namespace flurry::control

int main(int argc, char** argv) { return flurry::control::run(argc, argv); }
