// control/flurryctl.cc — the ops CLI: asks flurryd's control socket and prints the answer.
//
//   flurryctl [--control-socket PATH | --state-dir DIR] COMMAND [--json] [--watch [--interval-ms N] [--count
//   N]]
//   flurryctl top [--interval-ms N] [--count N] [--json]
//   flurryctl keys hash-password < FILE   (a door password as a key file's door_password_hash)
// COMMAND is one of control/commands.h (`flurryctl --help` lists them); to decode an ID, use
// `flurry decode`. `top` is flurryctl's own: `stats` with rates per second (per worker and
// total: requests, IDs, RETRY, FENCED, dropped, busy %) under a status line (state, headroom),
// every interval. On a terminal, --watch and top redraw in place (ANSI home + clear); into a
// pipe or file they print one block after another. `top --json` prints one JSON object a line
// per interval instead (the same rates; the first object's are 0, having no interval before it).
// Which flurryd: the first of --control-socket PATH, --state-dir DIR (DIR/flurryd.sock), the
// environment's FLURRY_CONTROL_SOCKET or FLURRY_STATE_DIR, then the first socket that exists
// of the packaged service's (/run/flurry/flurryd.sock, control/ops/flurryd.service), the
// default state dir's (/var/lib/flurry/flurryd.sock) and the scripts/run server's
// (build/run-state/flurryd.sock next to this binary's build/control/).
// When none exists, flurryctl says what it tried. `--verbose` names the socket it used.
// Exit codes: 0 ok, 1 flurryd unreachable or answered an error, 2 bad flags,
// 3 `health` answered unhealthy.
#include <fmt/format.h>

#include <sodium.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "base/cli.h"
#include "control/commands.h"
#include "control/control_server.h"
#include "control/keys_file.h"

namespace cli = flurry::cli;

namespace {

// `flurryctl keys hash-password`: one line of stdin (the terminal's echo off while it is typed)
// as the key file's door_password_hash line (control/keys_file.h). Local: no flurryd is asked.
int hash_password() {
  const bool terminal = isatty(STDIN_FILENO) == 1;
  termios saved{};
  if (terminal && tcgetattr(STDIN_FILENO, &saved) == 0) {
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    std::fputs("door password (not shown): ", stderr);
  }
  std::string password;
  for (int c = std::getchar(); c != EOF && c != '\n' && password.size() <= 4096; c = std::getchar()) {
    password.push_back(static_cast<char>(c));
  }
  if (terminal) {
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    std::fputs("\n", stderr);
  }
  if (!password.empty() && password.back() == '\r') password.pop_back();
  const flurry::Result<std::string> hash = flurry::control::hash_door_password(password);
  sodium_memzero(password.data(), password.size());
  if (!hash.ok()) {
    std::fprintf(stderr, "flurryctl: %s\n", hash.message().c_str());
    return 2;
  }
  std::printf("door_password_hash = \"%s\"\n", hash->c_str());
  return 0;
}

void print_human(const std::string& cmd, const nlohmann::json& reply) {
  if (cmd == "metrics") {
    std::fputs(reply.value("metrics", "").c_str(), stdout);
    return;
  }
  if (cmd == "keys-list" || cmd == "keys-reload") {
    fmt::print("{:<24} {:>10} {:<24} {:>10} {:>13} {:>10} {:>8} {:>4}  {}\n", "name", "id", "opcodes",
               "batch_max", "seq_batch_max", "rate/s", "answer", "door", "sequences");
    for (const auto& key : reply["keys"]) {
      std::string opcodes, sequences;
      for (const auto& op : key["opcodes"]) opcodes += (opcodes.empty() ? "" : ",") + op.get<std::string>();
      for (const auto& name : key["sequences"])
        sequences += (sequences.empty() ? "" : ",") + name.get<std::string>();
      fmt::print("{:<24} {:>10} {:<24} {:>10} {:>13} {:>10} {:>8} {:>4}  {}\n", key.value("name", ""),
                 key.value("id", 0U), opcodes, key.value("batch_max", 0U), key.value("seq_batch_max", 0U),
                 key.value("rate_per_s", 0U), key.value("answer_bytes_max", 0U),
                 key.value("door_password", false) ? "yes" : "no", sequences);
    }
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

std::uint64_t count_of(const nlohmann::json& block, const char* key) { return block.value(key, 0ULL); }

// Per second between two `stats` answers `seconds` apart.
double per_second(const nlohmann::json& now, const nlohmann::json& before, const char* key, double seconds) {
  const std::uint64_t a = count_of(now, key), b = count_of(before, key);
  return a >= b && seconds > 0 ? static_cast<double>(a - b) / seconds : 0.0;
}

// The rates of one worker (or the total) between two `stats` answers `seconds` apart.
nlohmann::json rates_of(const nlohmann::json& now, const nlohmann::json& before, double seconds) {
  return {{"requests_per_s", per_second(now, before, "rx_datagrams", seconds)},
          {"ids_per_s", per_second(now, before, "ids_issued", seconds)},
          {"retry_per_s", per_second(now, before, "answered_retry", seconds)},
          {"fenced_per_s", per_second(now, before, "answered_fenced", seconds)},
          {"dropped_per_s", per_second(now, before, "dropped", seconds)},
          {"busy_percent", 100.0 * per_second(now, before, "busy_ns", seconds) / 1e9}};
}

// One `top` sample: the status line's facts and the rates per worker and in total.
nlohmann::json top_sample(const nlohmann::json& status, const nlohmann::json& stats,
                          const nlohmann::json& before, double seconds) {
  const auto& watermark = status.contains("watermark") ? status["watermark"] : nlohmann::json::object();
  nlohmann::json sample = {{"pid", status.value("pid", 0)},
                           {"node_id", status.value("node_id", 0)},
                           {"listen", status.value("listen", "")},
                           {"state", status.value("state", "?")},
                           {"cause", status.value("cause", "")},
                           {"headroom_ms", watermark.value("headroom_ms", 0LL)},
                           {"run_ahead_ms", watermark.value("run_ahead_ms", 0LL)},
                           {"interval_s", seconds},
                           {"workers", nlohmann::json::array()}};
  const auto& workers = stats["workers"];
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const nlohmann::json& previous = before.is_null() ? workers[i] : before["workers"][i];
    sample["workers"].push_back(rates_of(workers[i], previous, seconds));
    sample["workers"].back()["worker"] = i;
  }
  const nlohmann::json& total = stats["total"];
  sample["total"] = rates_of(total, before.is_null() ? total : before["total"], seconds);
  // The counters the rates come from, as the node counted them since it started: a script
  // can sum intervals or notice a restart (a count that went down).
  sample["counts"] = {{"requests", count_of(total, "rx_datagrams")},
                      {"ids_issued", count_of(total, "ids_issued")}};
  return sample;
}

void print_rates_row(const std::string& name, const nlohmann::json& rates) {
  fmt::print("{:>7} {:>11.0f} {:>12.0f} {:>9.0f} {:>9.0f} {:>9.0f} {:>6.1f}\n", name,
             rates["requests_per_s"].get<double>(), rates["ids_per_s"].get<double>(),
             rates["retry_per_s"].get<double>(), rates["fenced_per_s"].get<double>(),
             rates["dropped_per_s"].get<double>(), rates["busy_percent"].get<double>());
}

// `top`: a status line, then rates per worker and in total since the previous answer.
void print_top(const nlohmann::json& sample) {
  const std::string cause = sample["cause"].get<std::string>();
  fmt::print("flurryd pid {} node {} {} | state {}{} | headroom {} ms | run-ahead {} ms\n",
             sample["pid"].get<int>(), sample["node_id"].get<int>(), sample["listen"].get<std::string>(),
             sample["state"].get<std::string>(), cause.empty() ? "" : " (" + cause + ")",
             sample["headroom_ms"].get<long long>(), sample["run_ahead_ms"].get<long long>());
  fmt::print("{:>7} {:>11} {:>12} {:>9} {:>9} {:>9} {:>6}\n", "worker", "req/s", "IDs/s", "retry/s",
             "fenced/s", "drop/s", "busy%");
  for (const auto& worker : sample["workers"])
    print_rates_row(std::to_string(worker["worker"].get<int>()), worker);
  print_rates_row("total", sample["total"]);
}

flurry::Result<nlohmann::json> ask(const std::string& socket_path, const nlohmann::json& request,
                                   unsigned timeout_ms) {
  flurry::Result<nlohmann::json> answered =
      flurry::control::control_request_object(socket_path, request, static_cast<int>(timeout_ms));
  // control_request's timeout: "no answer from PATH within N ms".
  if (!answered.ok() && answered.message().rfind("no answer from ", 0) == 0 &&
      answered.message().find(" within ") != std::string::npos) {
    return flurry::Error{answered.message() +
                         " (flurryd stopped, or too busy to answer yet: --timeout-ms waits longer)"};
  }
  if (answered.ok() && !answered->value("ok", false)) {
    return flurry::Error{"flurryd answered: " + answered->value("error", std::string("?"))};
  }
  return answered;
}

int run_top(const std::string& socket_path, unsigned interval_ms, unsigned count, bool json,
            unsigned timeout_ms) {
  const bool terminal = isatty(STDOUT_FILENO) == 1 && !json;
  nlohmann::json before;
  auto before_at = std::chrono::steady_clock::now();
  for (unsigned round = 0; count == 0 || round < count; ++round) {
    flurry::Result<nlohmann::json> stats = ask(socket_path, nlohmann::json{{"cmd", "stats"}}, timeout_ms);
    flurry::Result<nlohmann::json> status =
        stats.ok() ? ask(socket_path, nlohmann::json{{"cmd", "status"}}, timeout_ms) : stats;
    if (!status.ok()) {
      std::fprintf(stderr, "flurryctl: %s\n", status.message().c_str());
      return 1;
    }
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - before_at).count();
    const nlohmann::json sample = top_sample(*status, *stats, before, before.is_null() ? 0.0 : seconds);
    if (terminal) std::fputs("\x1b[H\x1b[2J", stdout);  // home, clear: redraw in place
    if (json) {
      std::puts(sample.dump().c_str());
    } else {
      print_top(sample);
    }
    std::fflush(stdout);
    before = *stats;
    before_at = now;
    if (count != 0 && round + 1 >= count) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  return 0;
}

// `seq OP [NAME]` with --start / --mode: the request of the "seq" command, or why not.
flurry::Result<nlohmann::json> seq_request(const std::vector<std::string>& args, const std::string& start,
                                           const std::string& mode) {
  const std::string op = args.empty() ? "" : args[0];
  const bool named = op == "create" || op == "show" || op == "delete";
  if (!named && op != "list")
    return flurry::Error{"usage: flurryctl seq create|show|delete NAME, or seq list"};
  if (named != (args.size() == 2) || args.size() > 2) {
    return flurry::Error{named ? "seq " + op + " takes one NAME" : "seq list takes no NAME"};
  }
  nlohmann::json request = {{"cmd", "seq"}, {"op", op}};
  if (named) request["name"] = args[1];
  if (op == "create") {
    request["mode"] = mode;
    if (!start.empty()) {
      std::uint64_t value = 0;
      const auto [end, error] = std::from_chars(start.data(), start.data() + start.size(), value);
      if (error != std::errc() || end != start.data() + start.size()) {
        return flurry::Error{"--start must be a number from 0 to 2^63 - 1, not '" + start + "'"};
      }
      request["start"] = value;
    }
  } else if (!start.empty() || mode != "segment") {
    return flurry::Error{"--start and --mode belong to seq create"};
  }
  return request;
}

// The control request of `cmd` with its arguments, or what is wrong with them.
flurry::Result<nlohmann::json> request_of(const std::string& cmd, const std::vector<std::string>& args,
                                          const std::string& start, const std::string& mode) {
  if (cmd == "seq") return seq_request(args, start, mode);
  if (!args.empty()) return flurry::Error{cmd + " takes no argument ('" + args[0] + "')"};
  return nlohmann::json{{"cmd", cmd}};
}

bool is_socket(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISSOCK(info.st_mode);
}

// The control socket to ask, and where it came from (for --verbose and for the error when it
// is not there); see the file comment for the order.
struct Found {
  std::string path;
  std::string source;
  std::vector<std::string> tried;  // when nothing was found: each candidate and its source
};

Found find_control_socket(const std::string& socket_flag, const std::string& state_dir_flag) {
  if (!socket_flag.empty()) return {socket_flag, "--control-socket", {}};
  if (!state_dir_flag.empty()) return {state_dir_flag + "/flurryd.sock", "--state-dir", {}};
  if (const char* env = std::getenv("FLURRY_CONTROL_SOCKET"); env != nullptr && *env != '\0') {
    return {env, "FLURRY_CONTROL_SOCKET", {}};
  }
  if (const char* env = std::getenv("FLURRY_STATE_DIR"); env != nullptr && *env != '\0') {
    return {std::string(env) + "/flurryd.sock", "FLURRY_STATE_DIR", {}};
  }
  std::vector<std::pair<std::string, std::string>> candidates = {
      {"/run/flurry/flurryd.sock", "the packaged service's, flurryd.service"},
      {"/var/lib/flurry/flurryd.sock", "the default state dir"}};
  std::error_code error;
  const std::filesystem::path self = std::filesystem::canonical("/proc/self/exe", error);
  if (!error && self.parent_path().filename() == "control") {
    candidates.emplace_back((self.parent_path().parent_path() / "run-state" / "flurryd.sock").string(),
                            "the scripts/run server's state dir");
  }
  Found found;
  for (const auto& [path, source] : candidates) {
    if (is_socket(path)) return {path, source, {}};
    found.tried.push_back(path + " (" + source + ")");
  }
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  cli::App app{"flurryctl — operate a running flurryd through its control socket"};
  std::string socket_path;
  std::string state_dir;
  std::string cmd;
  bool verbose = false;
  bool json = false;
  bool watch = false;
  unsigned interval_ms = 1000;
  unsigned count = 0;
  unsigned timeout_ms = flurry::control::control_timeout_ms_default;
  app.add_option("--control-socket", socket_path,
                 "flurryd's control socket (default <state-dir>/flurryd.sock; env FLURRY_CONTROL_SOCKET)");
  app.add_option("--state-dir", state_dir,
                 "flurryd's state directory (env FLURRY_STATE_DIR; default: the first socket found of "
                 "/run/flurry, /var/lib/flurry and the scripts/run server's build/run-state)");
  app.add_flag("-v,--verbose", verbose, "say which control socket was asked, and why");
  app.set_version_flag("--version", "flurryctl " FLURRY_VERSION);
  std::vector<std::string> names;
  std::string commands_help = "one of:";
  for (const auto& info : flurry::control::commands) {
    names.emplace_back(info.name);
    commands_help += fmt::format("\n  {:<10} {}", info.name, info.help);
  }
  names.emplace_back("top");
  commands_help += fmt::format("\n  {:<10} {}", "top", "rates per second per worker, redrawn every interval");
  names.emplace_back("keys");
  commands_help += fmt::format("\n  {:<10} {}", "keys list", "the same as keys-list");
  commands_help += fmt::format("\n  {:<10} {}", "keys reload", "the same as keys-reload");
  commands_help +=
      fmt::format("\n  {:<10} {}", "keys hash-password",
                  "a door password (stdin) as a key file's door_password_hash line; asks no flurryd");
  app.add_option("command", cmd, commands_help)->required()->check(cli::IsMember(names));
  std::vector<std::string> args;
  std::string seq_start;
  std::string seq_mode = "segment";
  app.add_option("args", args, "keys: list|reload|hash-password; seq: create|show|delete NAME, or list");
  app.add_option("--start", seq_start, "seq create: the first number (default 0)");
  app.add_option("--mode", seq_mode, "seq create: segment (increasing per core) or monotonic (per node)")
      ->check(cli::IsMember({"segment", "monotonic"}))
      ->capture_default_str();
  app.add_flag("--json", json, "print the raw JSON answer (top: one JSON object a line per interval)");
  app.add_flag("--watch", watch, "repeat until interrupted (or --count times)");
  app.add_option("--interval-ms", interval_ms, "--watch period")
      ->check(cli::Range(100U, 3'600'000U))
      ->capture_default_str();
  app.add_option("--count", count, "--watch: stop after this many answers (0: never)");
  app.add_option("--timeout-ms", timeout_ms, "how long to wait for each answer of flurryd")
      ->check(cli::Range(100U, 600'000U))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const cli::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  }
  if (cmd == "keys" && args.size() == 1 && args[0] == "hash-password") return hash_password();
  const Found found = find_control_socket(socket_path, state_dir);
  if (found.path.empty()) {
    std::string tried;
    for (const auto& candidate : found.tried) tried += "\n  " + candidate;
    std::fprintf(stderr,
                 "flurryctl: no flurryd control socket found; tried:%s\n"
                 "Start one (scripts/run), or name it: --state-dir DIR, --control-socket PATH, or the "
                 "environment's FLURRY_STATE_DIR / FLURRY_CONTROL_SOCKET\n",
                 tried.c_str());
    return 1;
  }
  socket_path = found.path;
  if (verbose) {
    std::fprintf(stderr, "flurryctl: asking %s (from %s)\n", socket_path.c_str(), found.source.c_str());
  }
  if (cmd == "keys") {
    if (args.size() != 1 || (args[0] != "list" && args[0] != "reload")) {
      std::fputs("flurryctl: keys needs one action: keys list | keys reload | keys hash-password\n", stderr);
      return 2;
    }
    cmd = "keys-" + args[0];
    args.clear();
  }
  if (cmd == "top") return run_top(socket_path, interval_ms, count, json, timeout_ms);
  const flurry::Result<nlohmann::json> request = request_of(cmd, args, seq_start, seq_mode);
  if (!request.ok()) {
    std::fprintf(stderr, "flurryctl: %s\n", request.message().c_str());
    return 2;
  }
  const bool terminal = isatty(STDOUT_FILENO) == 1;
  for (unsigned round = 0;; ++round) {
    const flurry::Result<nlohmann::json> answered = ask(socket_path, *request, timeout_ms);
    if (!answered.ok()) {
      std::fprintf(stderr, "flurryctl: %s\n", answered.message().c_str());
      return 1;
    }
    const nlohmann::json& reply = *answered;
    if (json) {
      std::puts(reply.dump().c_str());
    } else {
      if (watch && terminal) std::fputs("\x1b[H\x1b[2J", stdout);  // redraw in place
      if (watch && !terminal) fmt::print("--- {}\n", round);
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
