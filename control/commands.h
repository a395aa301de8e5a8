// control/commands.h — the control socket's commands, in one table: flurryd dispatches on
// Command with a switch (so -Wswitch names a command it forgot), flurryctl takes its choices
// and help from it, and error answers list it. Adding a command means one row here and one
// case in flurryd.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace flurry::control {

enum class Command {
  status,
  stats,
  lease,
  watermark,
  config,
  health,
  metrics,
  drain,
  keys_list,
  keys_reload,
  seq
};

struct CommandInfo {
  Command command;
  std::string_view name;
  std::string_view help;
};

inline constexpr std::array<CommandInfo, 11> commands = {{
    {Command::status, "status",
     "state, health and its cause, backend, node, layout, lease, watermark summary"},
    {Command::stats, "stats",
     "per-worker and total counters: datagrams, IDs, answers by status, rejects by reason"},
    {Command::lease, "lease",
     "cluster mode: node id, lease, etcd endpoint; local mode: {\"mode\":\"local\"}"},
    {Command::watermark, "watermark",
     "durable watermark, published ceiling, headroom, run-ahead, write latency and stalls, clock-step "
     "alarms"},
    {Command::config, "config", "the effective configuration"},
    {Command::health, "health",
     "healthy only while serving and able to issue, with the cause otherwise (exit 3)"},
    {Command::metrics, "metrics", "Prometheus text exposition"},
    {Command::drain, "drain", "stop issuing for good before a planned stop (GET_IDS answered FENCED)"},
    {Command::keys_list, "keys-list",
     "authentication keys: name, id, permissions and limits (never a secret); `flurryctl keys list`"},
    {Command::keys_reload, "keys-reload",
     "reload --key-file without a restart (like SIGHUP); `flurryctl keys reload`"},
    {Command::seq, "seq",
     "named sequences: seq create NAME [--start N] [--mode segment|monotonic], seq list, seq show NAME, "
     "seq delete NAME"},
}};

inline std::optional<Command> parse_command(std::string_view name) {
  for (const CommandInfo& info : commands) {
    if (info.name == name) return info.command;
  }
  return std::nullopt;
}

// "status, stats, lease, ..." for error answers and help texts.
inline std::string command_names(std::string_view separator = ", ") {
  std::string out;
  for (const CommandInfo& info : commands) {
    if (!out.empty()) out += separator;
    out += info.name;
  }
  return out;
}

}  // namespace flurry::control
