// client/flurry_cli.cc — `flurry`, the client CLI: get IDs, decode an ID, ping a server.
//
// Exit codes: 0 success; 1 the network or a server failed (the message names the server and
// what happened); 2 bad usage (the message names the flag).
//   flurry get -n N [--server HOST:PORT ...] [--form dec|hex|readable|base32|opaque]
//              [--tag T] [--form-key-file F] [--key-file F] [--format dec|hex|json] [--timeout-ms MS]
//   flurry decode VALUE [--form F] [--form-key-file F] [--layout snowflake|js-safe|T/N/S]
//                       [--epoch E] [--core-bits K] [--core-from sequence|node]
//                       [--time-unit-ms 1|10|1000] [--json]
//   flurry decode VALUE --server HOST:PORT [--json]    (asks the server for its layout)
// VALUE is an ID in any form (client/forms.h); --form says which when it is ambiguous.
// --form-key-file holds the opaque form's keys (client/form_keys.h); --key-file the key that
// signs requests (client::read_key_file, PROTOCOL.md "Authentication"): two different secrets.
//   flurry ping [--server HOST:PORT] [-c COUNT] [--interval-ms MS] [--timeout-ms MS]
//   flurry seq NAME -n N [--server HOST:PORT ...] [--format dec|hex|json]   (a named sequence)
#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/cli.h"
#include "client/client.h"
#include "client/form_keys.h"
#include "client/forms.h"
#include "proto/layout.h"
#include "proto/wire.h"

namespace cli = flurry::cli;

namespace {

namespace client = flurry::client;
namespace forms = flurry::client::forms;
namespace proto = flurry::proto;

constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

#ifndef FLURRY_VERSION
#define FLURRY_VERSION "unknown"
#endif

// The fix to suggest when nothing answered.
constexpr std::string_view no_answer_hint = ": is flurryd running? start it with scripts/run";

int fail(std::string_view command, const client::Error& error) {
  const bool usage = error.code == client::ErrorCode::invalid_argument;
  fmt::print(stderr, "flurry {}: {}{}\n", command, error.message,
             error.code == client::ErrorCode::no_answer ? no_answer_hint : "");
  return usage ? exit_usage : exit_failure;
}

int usage(std::string_view command, std::string_view message) {
  fmt::print(stderr, "flurry {}: {}\n", command, message);
  return exit_usage;
}

// Syntax only; names are resolved (and failures reported, exit 1) when the client is made.
const cli::Validator server_syntax(
    [](std::string& text) -> std::string {
      const std::size_t colon = text.rfind(':');
      unsigned port = 0;
      if (colon == std::string::npos || colon == 0)
        return "'" + text + "' is not HOST:PORT, e.g. 127.0.0.1:7420";
      const char* first = text.data() + colon + 1;
      const char* last = text.data() + text.size();
      const auto [end, ec] = std::from_chars(first, last, port);
      if (first == last || ec != std::errc{} || end != last || port == 0 || port > 65535) {
        return "'" + text + "': port must be a number 1..65535";
      }
      return {};
    },
    "HOST:PORT");

const cli::Validator tag_syntax(
    [](std::string& text) -> std::string {
      const bool ok = text.size() <= forms::tag_size_max && std::all_of(text.begin(), text.end(), [](char c) {
                        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
                      });
      return ok ? std::string() : "'" + text + "' is not up to 4 chars of A-Z and 0-9";
    },
    "TAG");

// `key_file`: empty, or a client key file (client::read_key_file): every request is signed.
std::unique_ptr<client::Client> make_client(std::vector<std::string> servers, std::uint32_t timeout_ms,
                                            unsigned attempts, client::Error* error,
                                            const std::string& key_file = {}) {
  client::Options options;
  options.servers = std::move(servers);
  options.timeout = std::chrono::milliseconds{timeout_ms};
  options.attempts = attempts;
  if (!key_file.empty()) {
    client::Key key;
    if (!client::read_key_file(key_file, &key, error)) return nullptr;
    options.key = key;
  }
  return client::Client::create(options, error);
}

// ---- get ----

struct GetArgs {
  std::string sequence;  // `flurry seq NAME`: numbers of this sequence instead of IDs
  std::size_t count = 1;
  std::vector<std::string> servers{std::string(client::default_server)};
  std::string format = "dec";
  std::string form;
  std::string tag;
  std::string form_key_file;  // --form-key-file: the opaque form's keys
  std::uint32_t timeout_ms = 100;
  unsigned attempts = 5;
  std::string key_file;  // --key-file: the key that signs requests
};

// What --form needs besides the IDs: the server's layout (readable, uuid), the key file (opaque).
struct FormSetup {
  forms::Form form = forms::Form::dec;
  std::optional<forms::ReadableForm> readable;
  std::optional<forms::KeyRing> keys;
  forms::FormOptions options() const {
    return {readable ? &*readable : nullptr, {}, keys ? &*keys : nullptr};
  }
};

// Loads --form-key-file. Returns 0, or the exit code of a failure it reported.
int load_keys(std::string_view command, const std::string& key_file, FormSetup& setup) {
  flurry::Result<forms::KeyRing> keys = forms::KeyRing::load(key_file);
  if (!keys.ok()) return usage(command, "--form-key-file: " + keys.message());
  setup.keys.emplace(std::move(keys).value());
  return 0;
}

// --form, --format, --tag and --form-key-file of get, checked together; the layout comes from the
// server (INFO) for the readable and uuid forms. Returns 0, or the exit code of a failure it reported.
int setup_get_form(const GetArgs& args, client::Client& flurry, FormSetup& setup) {
  std::string form = args.form.empty() ? (args.format == "hex" ? "hex" : "dec") : args.form;
  if (args.format == "hex" && form != "hex")
    return usage("get", "--format hex and --form " + form + " disagree");
  setup.form = *forms::parse_form(form);  // CLI11 checked the name
  if (!args.tag.empty() && setup.form != forms::Form::readable)
    return usage("get", "--tag needs --form readable");
  if (setup.form == forms::Form::opaque && args.form_key_file.empty()) {
    return usage("get", "--form opaque needs --form-key-file FILE (docs/forms.md)");
  }
  if (!args.form_key_file.empty()) {
    if (const int exit_code = load_keys("get", args.form_key_file, setup); exit_code != 0) return exit_code;
  }
  if (setup.form != forms::Form::readable && setup.form != forms::Form::uuid) return 0;
  client::Error error;
  const std::optional<proto::Info> info = flurry.info(&error);
  if (!info) return fail("get", error);
  flurry::Result<forms::ReadableForm> readable = forms::ReadableForm::create(client::to_layout(*info));
  if (!readable.ok()) {
    fmt::print(stderr, "flurry get: the server's layout is not usable: {}\n", readable.message());
    return exit_failure;
  }
  setup.readable.emplace(*readable);
  return 0;
}

int run_get(const GetArgs& args) {
  const bool seq = !args.sequence.empty();
  const std::string_view command = seq ? "seq" : "get";
  client::Error error;
  auto flurry = make_client(args.servers, args.timeout_ms, args.attempts, &error, args.key_file);
  if (!flurry) return fail(command, error);
  FormSetup setup;
  if (const int exit_code = setup_get_form(args, *flurry, setup); exit_code != 0) return exit_code;
  std::vector<std::uint64_t> ids;
  const bool got =
      seq ? flurry->get_seq(args.sequence, args.count, ids, &error) : flurry->get(args.count, ids, &error);
  if (!got) return fail(command, error);
  forms::FormOptions options = setup.options();
  options.tag = args.tag;
  const bool json = args.format == "json";
  const bool quote = json && setup.form != forms::Form::dec;
  fmt::memory_buffer out;
  std::array<char, forms::text_size_max> text{};
  if (json) out.push_back('[');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const flurry::Result<std::size_t> n = forms::format_as(setup.form, ids[i], options, text);
    if (!n.ok()) return usage("get", n.message());  // a bad --tag is the only way here
    const std::string_view separator = json ? (i == 0 ? "" : ",") : "";
    fmt::format_to(std::back_inserter(out), "{}{}{}{}{}", separator, quote ? "\"" : "",
                   std::string_view(text.data(), *n), quote ? "\"" : "", json ? "" : "\n");
  }
  if (json) out.append(std::string_view("]\n"));
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    std::perror(seq ? "flurry seq: writing the numbers" : "flurry get: writing the IDs");
    return exit_failure;
  }
  return 0;
}

// ---- decode ----

struct DecodeArgs {
  std::string id_text;
  std::string layout = "snowflake";
  std::string epoch;
  std::optional<unsigned> core_bits;
  std::string core_from;
  std::optional<std::uint32_t> time_unit_ms;
  std::string server;
  std::uint32_t timeout_ms = 100;
  bool json = false;
  std::string form;
  std::string form_key_file;
};

// The layout an ID is decoded with, and where it came from (for messages).
struct DecodeLayout {
  proto::Layout layout;
  std::string source;
};

// Asks args.server (INFO). Returns 0, or the exit code of a failure it reported.
int layout_from_server(const DecodeArgs& args, DecodeLayout& out) {
  client::Error error;
  auto flurry = make_client({args.server}, args.timeout_ms, 5, &error);
  if (!flurry) return fail("decode", error);
  const std::optional<proto::Info> info = flurry->info(&error);
  if (!info) return fail("decode", error);
  out.layout = client::to_layout(*info);
  out.source = "the layout " + args.server + " reported";
  return 0;
}

// --layout and the flags that adjust it. Returns 0, or the exit code of a usage error.
int layout_from_flags(const DecodeArgs& args, DecodeLayout& out) {
  const flurry::Result<proto::Layout> parsed = proto::parse_layout(args.layout);
  if (!parsed.ok()) return usage("decode", "--layout: " + parsed.message());
  out.layout = *parsed;
  if (!args.epoch.empty()) {
    const std::optional<std::uint64_t> epoch = proto::parse_epoch(args.epoch);
    if (!epoch) {
      return usage("decode", "--epoch: '" + args.epoch +
                                 "' is neither Unix milliseconds nor a UTC date such as "
                                 "2024-01-01 or 2024-01-01T00:00:00Z");
    }
    out.layout.epoch_ms = *epoch;
  }
  if (args.core_bits) out.layout.core_bits = *args.core_bits;
  if (args.core_from == "node") out.layout.core_from = proto::CoreBitsFrom::node;
  if (args.time_unit_ms) out.layout.time_unit_ms = *args.time_unit_ms;
  out.source = "--layout " + args.layout;
  return 0;
}

// Checks widths, unit and core bits as flurryd would, but "now" is placed at the epoch: the
// clock-dependent checks (epoch in the future, layout run out) do not matter for decoding.
// Returns 0, or the exit code of a failure it reported.
int check_layout(const DecodeArgs& args, const DecodeLayout& chosen) {
  const std::string invalid = proto::validate(chosen.layout, 0, chosen.layout.epoch_ms).message();
  if (invalid.empty()) return 0;
  if (!args.server.empty()) {
    fmt::print(stderr, "flurry decode: {} is not usable: {}\n", chosen.source, invalid);
    return exit_failure;
  }
  return usage("decode", invalid);
}

// Reads VALUE in --form, or in whichever form reads it. Returns 0, or the exit code of a
// failure it reported.
int parse_value(const DecodeArgs& args, const DecodeLayout& chosen, forms::Parsed& parsed) {
  FormSetup setup;
  if (!args.form_key_file.empty()) {
    if (const int exit_code = load_keys("decode", args.form_key_file, setup); exit_code != 0)
      return exit_code;
  }
  setup.readable.emplace(*forms::ReadableForm::create(chosen.layout));  // check_layout passed
  const forms::FormOptions options = setup.options();
  flurry::Result<forms::Parsed> read =
      args.form.empty() ? forms::parse_any(args.id_text, options)
                        : forms::parse_as(*forms::parse_form(args.form), args.id_text, options);
  if (!read.ok()) {
    const bool needs_key = read.message().find("needs a key file") != std::string::npos;
    const bool ambiguous = read.message().find("say which form") != std::string::npos;
    return usage("decode", read.message() + (needs_key   ? ": pass --form-key-file"
                                             : ambiguous ? " with --form"
                                                         : ""));
  }
  parsed = *read;
  const unsigned id_bits = chosen.layout.time_bits + chosen.layout.node_bits + chosen.layout.sequence_bits;
  if ((parsed.value.id >> id_bits) != 0) {
    return usage("decode", fmt::format("ID {} has bits above the {} bits of {}; is it from "
                                       "another layout? pass --layout or --server",
                                       parsed.value.id, id_bits, chosen.source));
  }
  return 0;
}

void print_decoded(const forms::Parsed& parsed, const proto::Layout& layout, bool json) {
  const std::uint64_t id = parsed.value.id;
  const proto::Decoded decoded = layout.decode(id);
  const std::string_view form = forms::to_string(parsed.form);
  const std::string time = proto::format_unix_ms(decoded.unix_ms);
  if (json) {
    const std::string widths =
        fmt::format("{}/{}/{}", layout.time_bits, layout.node_bits, layout.sequence_bits);
    const char* core_from = layout.core_from == proto::CoreBitsFrom::node ? "node" : "sequence";
    fmt::print(
        "{{\"id\":{},\"id_hex\":\"0x{:016x}\",\"time\":\"{}\",\"unix_ms\":{},\"time_raw\":{},"
        "\"time_unit_ms\":{},\"epoch_ms\":{},\"node\":{},\"core\":{},\"counter\":{},"
        "\"layout\":\"{}\",\"core_bits\":{},\"core_from\":\"{}\",\"form\":\"{}\",\"tag\":\"{}\","
        "\"key_id\":\"{}\"}}\n",
        id, id, time, decoded.unix_ms, decoded.time, layout.time_unit_ms, layout.epoch_ms, decoded.node,
        decoded.core, decoded.counter, widths, layout.core_bits, core_from, form, parsed.value.tag_view(),
        parsed.key_id);
    return;
  }
  fmt::print("id       {} (0x{:016x})\n", id, id);
  fmt::print("form     {}{}{}{}{}\n", form, parsed.value.tag_size == 0 ? "" : ", tag ",
             parsed.value.tag_view(), parsed.key_id.empty() ? "" : ", key ", parsed.key_id);
  fmt::print("time     {} (raw {} x {} ms since {})\n", time, decoded.time, layout.time_unit_ms,
             proto::format_unix_ms(layout.epoch_ms));
  fmt::print("unix_ms  {}\n", decoded.unix_ms);
  fmt::print("node     {}\n", decoded.node);
  fmt::print("core     {}\n", decoded.core);
  fmt::print("counter  {}\n", decoded.counter);
  fmt::print("layout   {}\n", proto::describe(layout));
}

int run_decode(const DecodeArgs& args) {
  DecodeLayout chosen;
  const int chosen_exit =
      args.server.empty() ? layout_from_flags(args, chosen) : layout_from_server(args, chosen);
  if (chosen_exit != 0) return chosen_exit;
  if (const int exit_code = check_layout(args, chosen); exit_code != 0) return exit_code;
  forms::Parsed parsed;
  if (const int exit_code = parse_value(args, chosen, parsed); exit_code != 0) return exit_code;
  print_decoded(parsed, chosen.layout, args.json);
  return 0;
}

// ---- ping ----

struct PingArgs {
  std::string server{client::default_server};
  unsigned count = 4;
  std::uint32_t interval_ms = 200;
  std::uint32_t timeout_ms = 100;
};

int run_ping(const PingArgs& args) {
  client::Error error;
  // One attempt per ping: a lost answer is reported, not hidden by a retransmission.
  auto flurry = make_client({args.server}, args.timeout_ms, 1, &error);
  if (!flurry) return fail("ping", error);
  unsigned answered = 0;
  double min_ms = 0;
  double max_ms = 0;
  double sum_ms = 0;
  for (unsigned seq = 1; seq <= args.count; ++seq) {
    if (seq > 1) std::this_thread::sleep_for(std::chrono::milliseconds{args.interval_ms});
    const std::optional<client::PingResult> result = flurry->ping(&error);
    if (!result) {
      if (error.code != client::ErrorCode::no_answer) return fail("ping", error);
      fmt::print("no answer from {} within {} ms: seq={}\n", args.server, args.timeout_ms, seq);
      std::fflush(stdout);
      continue;
    }
    const double ms = std::chrono::duration<double, std::milli>(result->rtt).count();
    min_ms = answered == 0 ? ms : std::min(min_ms, ms);
    max_ms = answered == 0 ? ms : std::max(max_ms, ms);
    sum_ms += ms;
    ++answered;
    fmt::print("answer from {} node {}: seq={} rtt={:.3f} ms\n", result->server, result->node, seq, ms);
    std::fflush(stdout);
  }
  const unsigned lost = args.count - answered;
  fmt::print("{} sent, {} answered, {}% lost", args.count, answered, lost * 100 / args.count);
  if (answered > 0) {
    fmt::print(", rtt min/avg/max = {:.3f}/{:.3f}/{:.3f} ms", min_ms, sum_ms / answered, max_ms);
  }
  fmt::print("\n");
  if (answered == 0) {
    fmt::print(stderr, "flurry ping: no answer from {} to {} pings of {} ms{}\n", args.server, args.count,
               args.timeout_ms, no_answer_hint);
    return exit_failure;
  }
  return 0;
}

// --timeout-ms of every command.
cli::Validator timeout_range() {
  return cli::Range(static_cast<std::uint32_t>(client::timeout_min.count()),
                    static_cast<std::uint32_t>(client::timeout_max.count()));
}

// The options `get` and `seq` share.
void add_fetch_options(cli::App* get, GetArgs& args) {
  get->add_option("-n,--count", args.count, "How many")
      ->capture_default_str()
      ->check(cli::Range(std::size_t{1}, client::get_count_max));
  get->add_option("--server", args.servers, "HOST:PORT of a flurryd; repeat for failover, tried in order")
      ->capture_default_str()
      ->check(server_syntax);
  get->add_option("--format", args.format, "Output format (json: an array; of strings for a form but dec)")
      ->capture_default_str()
      ->check(cli::IsMember({"dec", "hex", "json"}));
  get->add_option("--timeout-ms", args.timeout_ms, "Wait per attempt, in ms")
      ->capture_default_str()
      ->check(timeout_range());
  get->add_option("--attempts", args.attempts,
                  "Attempts per request; each timeout or FENCED answer moves to the next server")
      ->capture_default_str()
      ->check(cli::Range(1U, client::attempts_max));
  get->add_option(
      "--key-file", args.key_file,
      "Sign requests with this key (file: id = N, secret = \"32 hex digits\"; mode 0600) and accept "
      "only answers signed with it");
}

cli::App* add_get(cli::App& app, GetArgs& args) {
  cli::App* get = app.add_subcommand("get", "Print N unique IDs, one per line (json: an array).");
  add_fetch_options(get, args);
  get->add_option("--form", args.form, "Form of each ID (docs/forms.md); default dec")
      ->check(cli::IsMember({"dec", "hex", "readable", "base32", "opaque", "uuid"}));
  get->add_option("--tag", args.tag, "Business tag of the readable form: up to 4 of A-Z, 0-9")
      ->check(tag_syntax);
  get->add_option("--form-key-file", args.form_key_file, "TOML key file of the opaque form (mode 0600)");
  return get;
}

cli::App* add_seq(cli::App& app, GetArgs& args) {
  cli::App* seq = app.add_subcommand(
      "seq",
      "Print N numbers of a named sequence (flurryctl seq create NAME), one per line (json: an array).");
  seq->add_option("NAME", args.sequence, "The sequence: 1 to 32 characters from A-Z a-z 0-9 _ . - :")
      ->required()
      ->check(cli::Validator(
          [](std::string& name) -> std::string {
            return proto::valid_seq_name(name)
                       ? ""
                       : "'" + name + "': 1 to 32 characters from A-Z a-z 0-9 _ . - :";
          },
          "NAME"));
  add_fetch_options(seq, args);
  return seq;
}

cli::App* add_decode(cli::App& app, DecodeArgs& args) {
  cli::App* decode = app.add_subcommand("decode", "Show the time, node, core and counter of an ID.");
  decode
      ->add_option(
          "VALUE", args.id_text,
          "The ID in any form: decimal, 0x-hexadecimal, base32, readable, opaque (with --form-key-file)")
      ->required();
  decode->add_option("--form", args.form, "The form of VALUE, when it reads as more than one")
      ->check(cli::IsMember({"dec", "hex", "readable", "base32", "opaque", "uuid"}));
  decode->add_option("--form-key-file", args.form_key_file,
                     "TOML key file to decode an opaque VALUE (mode 0600)");
  auto* layout = decode
                     ->add_option("--layout", args.layout,
                                  "snowflake (41/10/12), js-safe (37/5/11, 10 ms) or T/N/S widths")
                     ->capture_default_str();
  auto* epoch =
      decode->add_option("--epoch", args.epoch, "Epoch: Unix ms or UTC date (default 2024-01-01T00:00:00Z)");
  auto* core_bits = decode->add_option("--core-bits", args.core_bits, "Core bits of the server (default 0)")
                        ->check(cli::Range(0U, 31U));
  auto* core_from = decode
                        ->add_option("--core-from", args.core_from,
                                     "Field the core bits are carved from (default sequence)")
                        ->check(cli::IsMember({"sequence", "node"}));
  auto* unit = decode
                   ->add_option("--time-unit-ms", args.time_unit_ms,
                                "Time unit in ms (default: the layout's, 1 or js-safe's 10)")
                   ->check(cli::IsMember({1U, 10U, 1000U}));
  decode->add_option("--server", args.server, "Ask this flurryd (HOST:PORT) for its layout instead")
      ->check(server_syntax)
      ->excludes(layout)
      ->excludes(epoch)
      ->excludes(core_bits)
      ->excludes(core_from)
      ->excludes(unit);
  decode->add_option("--timeout-ms", args.timeout_ms, "Wait per attempt with --server, in ms")
      ->capture_default_str()
      ->check(timeout_range());
  decode->add_flag("--json", args.json, "Print one JSON object");
  return decode;
}

cli::App* add_ping(cli::App& app, PingArgs& args) {
  cli::App* ping = app.add_subcommand("ping", "Measure the round trip of PING requests.");
  ping->add_option("--server", args.server, "HOST:PORT of a flurryd")
      ->capture_default_str()
      ->check(server_syntax);
  ping->add_option("-c,--count", args.count, "How many pings")
      ->capture_default_str()
      ->check(cli::Range(1U, 1'000'000U));
  ping->add_option("--interval-ms", args.interval_ms, "Pause between pings, in ms")
      ->capture_default_str()
      ->check(cli::Range(0U, 60'000U));
  ping->add_option("--timeout-ms", args.timeout_ms, "Wait per ping, in ms")
      ->capture_default_str()
      ->check(timeout_range());
  return ping;
}

}  // namespace

int main(int argc, char** argv) {
  cli::App app{
      "flurry: get unique 64-bit IDs from flurryd, decode them, ping a server.\n"
      "Exit status: 0 ok, 1 network or server failure, 2 bad usage.",
      "flurry"};
  app.set_version_flag("--version", "flurry " FLURRY_VERSION);
  app.require_subcommand(1);
  app.failure_message([](const std::string& what) {
    return fmt::format(
        "flurry: {}\nRun 'flurry --help' (or 'flurry COMMAND --help') for the "
        "options.\n",
        what);
  });
  GetArgs get_args;
  GetArgs seq_args;
  DecodeArgs decode_args;
  PingArgs ping_args;
  const cli::App* get = add_get(app, get_args);
  const cli::App* seq = add_seq(app, seq_args);
  const cli::App* decode = add_decode(app, decode_args);
  const cli::App* ping = add_ping(app, ping_args);
  try {
    app.parse(argc, argv);
  } catch (const cli::ParseError& e) {
    return app.exit(e) == 0 ? 0 : exit_usage;
  }
  if (*get) return run_get(get_args);
  if (*seq) return run_get(seq_args);
  if (*decode) return run_decode(decode_args);
  if (*ping) return run_ping(ping_args);
  return exit_usage;  // require_subcommand(1) makes this unreachable
}
