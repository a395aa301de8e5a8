// dataplane/dpdk/telemetry.cc — flurry's read-only commands in DPDK's telemetry library
// (register_dpdk_telemetry in dataplane/backend.h). DPDK's telemetry thread calls answer_command;
// it asks the answer function (flurryd: its own control socket, so the facts and their
// consistency are the control loop's) and turns the JSON object into rte_tel_data:
//   - a scalar at the top stays a scalar (bool as 0/1, integers as int or u64, strings cut to
//     RTE_TEL_MAX_STRING_LEN, other numbers as their JSON text);
//   - an object at the top becomes a dict of every scalar under it, keyed by its path
//     ("request_errors/too_short"), since telemetry nests containers one level only;
//   - an array of objects at the top becomes one such dict per element ("workers/0", ...).
// Names keep to what the library accepts (letters, digits, '_' and '/'; anything else becomes
// '_'): it drops an entry with another character without a word.
// A dict holds at most RTE_TEL_MAX_DICT_ENTRIES entries; what does not fit is left out.
// Never called from a worker lcore.
#include <rte_telemetry.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstring>
#include <limits>
#include <string>

#include "dataplane/backend.h"

namespace flurry::dataplane {

namespace {

constexpr std::string_view command_prefix = "/flurry/";

// Set once, before the first command is registered; read by the telemetry thread after. Never
// destroyed: the telemetry thread may still answer while the process exits.
TelemetryAnswer& answer_function() {
  static auto* answer = new TelemetryAnswer;
  return *answer;
}

std::string clipped(const std::string& text) { return text.substr(0, RTE_TEL_MAX_STRING_LEN - 1); }

std::string entry_name(const std::string& name) {
  std::string out = clipped(name);
  for (char& c : out) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_' && c != '/') c = '_';
  }
  return out;
}

void add_scalar(rte_tel_data* data, const std::string& name, const nlohmann::json& value) {
  const std::string key = entry_name(name);
  if (value.is_boolean()) {
    rte_tel_data_add_dict_int(data, key.c_str(), value.get<bool>() ? 1 : 0);
  } else if (value.is_number_unsigned()) {
    rte_tel_data_add_dict_u64(data, key.c_str(), value.get<std::uint64_t>());
  } else if (value.is_number_integer() && value.get<std::int64_t>() >= std::numeric_limits<int>::min() &&
             value.get<std::int64_t>() <= std::numeric_limits<int>::max()) {
    rte_tel_data_add_dict_int(data, key.c_str(), static_cast<int>(value.get<std::int64_t>()));
  } else if (value.is_string()) {
    rte_tel_data_add_dict_string(data, key.c_str(), clipped(value.get<std::string>()).c_str());
  } else {
    rte_tel_data_add_dict_string(data, key.c_str(), clipped(value.dump()).c_str());
  }
}

// Every scalar under `value` into `data`, keyed by its dotted path below `prefix`.
void add_flattened(rte_tel_data* data, const std::string& prefix, const nlohmann::json& value) {
  if (value.is_object()) {
    for (const auto& [key, inner] : value.items())
      add_flattened(data, prefix.empty() ? key : prefix + "/" + key, inner);
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i)
      add_flattened(data, prefix + "/" + std::to_string(i), value[i]);
  } else {
    add_scalar(data, prefix, value);
  }
}

void add_container(rte_tel_data* data, const std::string& name, const nlohmann::json& value) {
  rte_tel_data* inner = rte_tel_data_alloc();
  if (inner == nullptr) return;
  rte_tel_data_start_dict(inner);
  add_flattened(inner, "", value);
  if (rte_tel_data_add_dict_container(data, entry_name(name).c_str(), inner, 0) != 0)
    rte_tel_data_free(inner);
}

int answer_command(const char* command, const char*, rte_tel_data* data) {
  rte_tel_data_start_dict(data);
  const std::string name = std::string(command).substr(command_prefix.size());
  const Result<std::string> answered = answer_function()(name);
  if (!answered.ok()) {
    rte_tel_data_add_dict_string(data, "error", clipped(answered.message()).c_str());
    return 0;
  }
  const nlohmann::json reply = nlohmann::json::parse(*answered, nullptr, false);
  if (!reply.is_object()) {
    rte_tel_data_add_dict_string(data, "error", "the answer is not a JSON object");
    return 0;
  }
  for (const auto& [key, value] : reply.items()) {
    if (value.is_object()) {
      add_container(data, key, value);
    } else if (value.is_array() && !value.empty() && value[0].is_object()) {
      for (std::size_t i = 0; i < value.size(); ++i)
        add_container(data, key + "/" + std::to_string(i), value[i]);
    } else if (value.is_array()) {
      add_container(data, key, value);
    } else {
      add_scalar(data, key, value);
    }
  }
  return 0;
}

}  // namespace

Status register_dpdk_telemetry(const std::vector<TelemetryCommand>& commands, TelemetryAnswer answer) {
  if (answer_function()) return Error{"DPDK telemetry commands are registered already"};
  answer_function() = std::move(answer);
  for (const TelemetryCommand& command : commands) {
    const std::string path = std::string(command_prefix) + command.name;
    // The library copies both strings (the help text up to 63 characters).
    const int registered = rte_telemetry_register_cmd(path.c_str(), answer_command, command.help.c_str());
    if (registered != 0) {
      return Error{"DPDK telemetry: cannot register " + path + " (" + std::strerror(-registered) + ")"};
    }
  }
  return {};
}

}  // namespace flurry::dataplane
