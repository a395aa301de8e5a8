// control/flurryctl.cc — the ops CLI: asks flurryd's control socket and prints the answer.
//
//   flurryctl [--control-socket PATH | --state-dir DIR] COMMAND [--json] [--watch [--interval-ms N] [--count
//   N]]
// COMMAND is one of control/commands.h (`flurryctl --help` lists them); to decode an ID, use
// `flurry decode`.
// Exit codes: 0 ok, 1 flurryd unreachable or answered an error, 2 bad flags,
// 3 `health` answered unhealthy.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "control/commands.h"
#include "control/control_server.h"

namespace {

void print_human(const std::string& cmd, const nlohmann::json& reply) {
  if (cmd == "metrics") {
    std::fputs(reply.value("metrics", "").c_str(), stdout);
    return;
  }
  if (cmd == "config") {
    std::fputs(reply.value("config", "").c_str(), stdout);
    return;
  }
  if (cmd == "stats") {
    const auto& total = reply["total"];
    fmt::print("{:>7} {:>14} {:>14} {:>10} {:>10} {:>10} {:>12}\n", "worker", "rx", "ids", "ok", "retry",
               "dropped", "bad_request");
    for (const auto& worker : reply["workers"]) {
      fmt::print("{:>7} {:>14} {:>14} {:>10} {:>10} {:>10} {:>12}\n", worker.value("worker", 0),
                 worker.value("rx_datagrams", 0ULL), worker.value("ids_issued", 0ULL),
                 worker.value("answered_ok", 0ULL), worker.value("answered_retry", 0ULL),
                 worker.value("dropped", 0ULL), worker.value("answered_bad_request", 0ULL));
    }
    fmt::print("{:>7} {:>14} {:>14} {:>10} {:>10} {:>10} {:>12}\n", "total",
               total.value("rx_datagrams", 0ULL), total.value("ids_issued", 0ULL),
               total.value("answered_ok", 0ULL), total.value("answered_retry", 0ULL),
               total.value("dropped", 0ULL), total.value("answered_bad_request", 0ULL));
    for (const auto& [reason, value] : total["request_errors"].items()) {
      if (value.get<std::uint64_t>() != 0)
        fmt::print("  rejected {}: {}\n", reason, value.get<std::uint64_t>());
    }
    return;
  }
  nlohmann::json shown = reply;
  shown.erase("ok");
  for (const auto& [key, value] : shown.items()) {
    if (value.is_object()) {
      fmt::print("{}:\n", key);
      for (const auto& [inner, inner_value] : value.items())
        fmt::print("  {}: {}\n", inner, inner_value.dump());
    } else {
      fmt::print("{}: {}\n", key, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flurryctl — operate a running flurryd through its control socket"};
  std::string socket_path;
  std::string state_dir = "/var/lib/flurry";  // flurryd's default
  std::string cmd;
  bool json = false;
  bool watch = false;
  unsigned interval_ms = 1000;
  unsigned count = 0;
  app.add_option("--control-socket", socket_path,
                 "flurryd's control socket (default <state-dir>/flurryd.sock)");
  app.add_option("--state-dir", state_dir, "flurryd's state directory")->capture_default_str();
  std::vector<std::string> names;
  std::string commands_help = "one of:";
  for (const auto& info : flurry::control::commands) {
    names.emplace_back(info.name);
    commands_help += fmt::format("\n  {:<10} {}", info.name, info.help);
  }
  app.add_option("command", cmd, commands_help)->required()->check(CLI::IsMember(names));
  app.add_flag("--json", json, "print the raw JSON answer");
  app.add_flag("--watch", watch, "repeat until interrupted (or --count times)");
  app.add_option("--interval-ms", interval_ms, "--watch period")
      ->check(CLI::Range(100U, 3'600'000U))
      ->capture_default_str();
  app.add_option("--count", count, "--watch: stop after this many answers (0: never)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  }
  if (socket_path.empty()) socket_path = state_dir + "/flurryd.sock";
  for (unsigned round = 0;; ++round) {
    const flurry::Result<nlohmann::json> answered = flurry::control::control_request(socket_path, cmd);
    if (!answered.ok()) {
      std::fprintf(stderr, "flurryctl: %s\n", answered.message().c_str());
      return 1;
    }
    const nlohmann::json& reply = *answered;
    if (!reply.value("ok", false)) {
      std::fprintf(stderr, "flurryctl: flurryd answered: %s\n", reply.value("error", "?").c_str());
      return 1;
    }
    if (json) {
      std::puts(reply.dump().c_str());
    } else {
      if (watch) fmt::print("--- {}\n", round);
      print_human(cmd, reply);
    }
    std::fflush(stdout);
    if (!watch || (count != 0 && round + 1 >= count)) {
      if (cmd == "health" && !reply.value("healthy", false)) return 3;
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
}
