// control/report.cc — see report.h.
#include "control/report.h"

#include <fmt/format.h>

#include <unistd.h>

#include <array>
#include <map>
#include <span>
#include <vector>

namespace flurry::control {
namespace {

std::uint64_t unix_ms_of(const proto::Layout& layout, std::uint64_t time_t_units) {
  return layout.epoch_ms + time_t_units * layout.time_unit_ms;
}

// How far the ceiling is above the time the workers issue at (negative: at or past it).
std::int64_t headroom_units(const SchedulerStats& stats) {
  return static_cast<std::int64_t>(stats.ceiling_t) -
         static_cast<std::int64_t>(std::max({stats.now_t, stats.forward_t, stats.last_t_max}));
}

// A backend counter that counts drops (socket_drops, rx_dropped, port_dropped...), as opposed
// to other transport events (socket_gro).
bool is_drop_counter(std::string_view name) { return name.ends_with("_drops") || name.ends_with("_dropped"); }

}  // namespace

nlohmann::json watermark_json(const ReportSources& s) {
  const auto& layout = s.config->id_layout;
  const auto& stats = s.scheduler.stats;
  const std::uint64_t ceiling_raw = s.shared->ceiling.load();
  const std::int64_t headroom_ms = headroom_units(stats) * static_cast<std::int64_t>(layout.time_unit_ms);
  return {
      {"durable_watermark_t", s.durable_watermark_t},
      {"durable_watermark_time", proto::format_unix_ms(unix_ms_of(layout, s.durable_watermark_t))},
      {"ceiling_t", stats.ceiling_t},
      {"ceiling_published", ceiling_raw == core::ceiling_fenced     ? nlohmann::json("fenced")
                            : ceiling_raw == core::ceiling_draining ? nlohmann::json("draining")
                                                                    : nlohmann::json(ceiling_raw)},
      {"headroom_ms", headroom_ms},
      {"lead_ms", s.config->lead_ms},
      {"last_t_max", stats.last_t_max},
      {"now_t", stats.now_t},
      {"forward_t", stats.forward_t},
      {"attempted_t", stats.attempted_t},
      {"run_ahead_ms",
       (static_cast<std::int64_t>(stats.last_t_max) - static_cast<std::int64_t>(stats.now_t)) *
           static_cast<std::int64_t>(layout.time_unit_ms)},
      {"at_ceiling", stats.at_ceiling},
      {"ceiling_reached_ticks", stats.ceiling_reached_ticks},
      {"pending_ms", s.scheduler.pending_ms},
      {"renewals", stats.renewals},
      {"renew_failures", stats.renew_failures},
      {"last_renew_us", stats.last_renew_ns / 1000},
      {"renew_us_max", stats.renew_ns_max / 1000},
      {"stalled_writes", stats.stalled_writes},
      {"store_method", s.store_method},
      {"store_writes", s.store_writes},
      {"store_failures", s.store_failures},
      {"last_error", stats.last_error},
      {"clock_steps_back", stats.clock_steps_back},
      {"clock_steps_forward", stats.clock_steps_forward},
      {"last_clock_step_ms", stats.last_clock_step_ms},
  };
}

nlohmann::json status_json(const ReportSources& s) {
  return {
      {"version", FLURRY_VERSION},
      {"state", s.scheduler.state_name},
      {"healthy", s.scheduler.healthy},
      {"cause", s.scheduler.cause},
      {"overloaded", s.scheduler.stats.at_ceiling},
      {"backend", std::string(s.backend->name())},
      {"listen", s.config->listen.text()},
      {"workers", s.config->workers},
      {"node_id", s.shared->assignment.node_id.load(std::memory_order_relaxed)},
      {"layout", proto::describe(s.config->id_layout)},
      {"started", proto::format_unix_ms(s.started_unix_ms)},
      {"pid", static_cast<long>(getpid())},
      {"lease", s.lease},
      {"watermark", watermark_json(s)},
      {"sequences_exhausted", s.sequences_exhausted},
  };
}

namespace {

// One key's counters summed over the workers.
struct KeyTotals {
  std::uint64_t requests = 0;
  std::uint64_t ids = 0;
  std::array<std::uint64_t, 16> rejected{};
};

// Counts of a worker whose slot still holds an earlier key's (generation) are not this key's:
// that worker has counted nothing for it yet.
KeyTotals key_totals(const ReportSources& s, const core::Key& key) {
  KeyTotals totals;
  for (const auto& worker : s.shared->worker_stats()) {
    const core::KeyCounters& counters = worker.keys[key.slot];
    if (counters.generation.load(std::memory_order_acquire) != key.generation) continue;
    totals.requests += counters.requests.get();
    totals.ids += counters.ids.get();
    for (std::size_t i = 0; i < totals.rejected.size(); ++i) totals.rejected[i] += counters.rejected[i].get();
  }
  return totals;
}

std::string_view auth_reason(std::size_t index) {
  return proto::to_string(static_cast<proto::RequestError>(32 + index));
}

// Per key of the current table: requests, IDs and rejections by reason (stats "keys").
nlohmann::json keys_stats_json(const ReportSources& s) {
  nlohmann::json keys = nlohmann::json::array();
  const core::KeyTable* table = s.shared->keys.load();
  if (table == nullptr) return keys;
  for (const core::Key& key : table->keys()) {
    const KeyTotals totals = key_totals(s, key);
    nlohmann::json rejected = nlohmann::json::object();
    for (std::size_t i = 0; i < totals.rejected.size(); ++i) {
      if (auth_reason(i) != "unknown") rejected[std::string(auth_reason(i))] = totals.rejected[i];
    }
    keys.push_back({{"name", key.name},
                    {"id", key.id},
                    {"requests", totals.requests},
                    {"ids_issued", totals.ids},
                    {"rejected", rejected}});
  }
  return keys;
}

// The per-source bound's counters of one slice (core/source_limit.h), by name.
std::array<std::pair<std::string_view, const Counter*>, 3> source_limit_counters(
    const core::WorkerStats& worker) {
  return {{{"limited", &worker.sources.limited},
           {"trimmed", &worker.sources.trimmed},
           {"evicted", &worker.sources.evicted}}};
}

}  // namespace

nlohmann::json stats_json(const ReportSources& s) {
  nlohmann::json workers = nlohmann::json::array();
  std::map<std::string, std::uint64_t> total;
  std::map<std::string, std::uint64_t> total_errors;
  std::map<std::string, std::uint64_t> total_limit;
  std::uint32_t index = 0;
  for (const auto& worker : s.shared->worker_stats()) {
    nlohmann::json one = {{"worker", index++}};
    for (std::size_t i = 0; i < core::outcome_count; ++i) {
      const std::string name(core::to_string(static_cast<core::Outcome>(i)));
      const std::uint64_t value = worker.outcomes[i].get();
      one[name] = value;
      total[name] += value;
    }
    nlohmann::json errors = nlohmann::json::object();
    for (std::size_t i = 0; i < proto::request_error_slots; ++i) {
      const auto error = static_cast<proto::RequestError>(i);
      const std::string_view name = proto::to_string(error);
      if (name == "unknown" || error == proto::RequestError::ok) continue;
      const std::uint64_t value = worker.request_errors[i].get();
      errors[std::string(name)] = value;
      total_errors[std::string(name)] += value;
    }
    one["request_errors"] = errors;
    one["last_t"] = worker.last_t.load(std::memory_order_relaxed);
    one["busy_ns"] = worker.busy_ns.get();
    total["busy_ns"] += worker.busy_ns.get();
    nlohmann::json limit = nlohmann::json::object();
    for (const auto& [name, counter] : source_limit_counters(worker)) {
      limit[std::string(name)] = counter->get();
      total_limit[std::string(name)] += counter->get();
    }
    one["source_limit"] = limit;
    workers.push_back(one);
  }
  nlohmann::json sum(total);
  sum["request_errors"] = nlohmann::json(total_errors);
  sum["source_limit"] = nlohmann::json(total_limit);
  // Drops under "transport", other backend events (socket_gro) under "transport_events".
  nlohmann::json transport = nlohmann::json::object();
  nlohmann::json events = nlohmann::json::object();
  s.backend->visit_counters(
      [&](std::string_view name, std::string_view reason, std::uint32_t, std::uint64_t value) {
        auto& slot = (is_drop_counter(name) ? transport : events)[std::string(name)][std::string(reason)];
        slot = (slot.is_null() ? 0 : slot.get<std::uint64_t>()) + value;
      });
  sum["transport"] = transport;
  sum["transport_events"] = events;
  nlohmann::json front_ends = nlohmann::json::object();
  for (const CounterSource* front_end : s.front_ends) {
    front_end->visit_counters(
        [&](std::string_view name, std::string_view reason, std::uint32_t core, std::uint64_t value) {
          front_ends[std::string(name)][std::string(reason)] = value;
          front_ends[std::string(name)]["core"] = core;
        });
  }
  return {{"workers", workers},
          {"total", sum},
          {"front_ends", front_ends},
          {"keys", keys_stats_json(s)},
          {"sequences",
           {{"auto_created", s.seq_auto_created}, {"auto_create_refused", s.seq_auto_create_refused}}}};
}

nlohmann::json health_json(const ReportSources& s) {
  return {{"healthy", s.scheduler.healthy},
          {"state", s.scheduler.state_name},
          {"cause", s.scheduler.cause},
          {"pending_ms", s.scheduler.pending_ms},
          {"last_error", s.scheduler.stats.last_error},
          {"sequences_exhausted", s.sequences_exhausted}};
}

namespace {

void family(std::string* out, std::string_view name, std::string_view type, std::string_view help) {
  *out += fmt::format("# HELP flurry_{} {}\n# TYPE flurry_{} {}\n", name, help, name, type);
}

// Per-worker counters and the backend's drops.
void worker_metrics(const ReportSources& s, std::string& out) {
  family(&out, "requests_total", "counter", "Datagrams by outcome, per worker.");
  std::uint32_t index = 0;
  for (const auto& worker : s.shared->worker_stats()) {
    for (std::size_t i = 0; i < core::outcome_count; ++i) {
      const auto outcome = static_cast<core::Outcome>(i);
      if (outcome == core::Outcome::ids_issued || outcome == core::Outcome::seq_ids_issued) continue;
      out += fmt::format("flurry_requests_total{{worker=\"{}\",outcome=\"{}\"}} {}\n", index,
                         core::to_string(outcome), worker.outcomes[i].get());
    }
    ++index;
  }
  family(
      &out, "worker_busy_seconds_total", "counter",
      "Time each worker spent on bursts that carried packets (rate() is the fraction of a core it needs; a "
      "poll-mode core shows 100 % CPU whatever its load).");
  index = 0;
  for (const auto& worker : s.shared->worker_stats()) {
    out += fmt::format("flurry_worker_busy_seconds_total{{worker=\"{}\"}} {:.9f}\n", index++,
                       static_cast<double>(worker.busy_ns.get()) / 1e9);
  }
  family(&out, "ids_issued_total", "counter", "IDs issued, per worker.");
  index = 0;
  for (const auto& worker : s.shared->worker_stats()) {
    out += fmt::format("flurry_ids_issued_total{{worker=\"{}\"}} {}\n", index++,
                       worker.get(core::Outcome::ids_issued));
  }
  family(&out, "seq_ids_issued_total", "counter", "Numbers of named sequences issued (GET_SEQ), per worker.");
  index = 0;
  for (const auto& worker : s.shared->worker_stats()) {
    out += fmt::format("flurry_seq_ids_issued_total{{worker=\"{}\"}} {}\n", index++,
                       worker.get(core::Outcome::seq_ids_issued));
  }
  family(&out, "request_errors_total", "counter", "Rejected datagrams by reason, per worker.");
  index = 0;
  for (const auto& worker : s.shared->worker_stats()) {
    for (std::size_t i = 1; i < proto::request_error_slots; ++i) {
      const std::string_view name = proto::to_string(static_cast<proto::RequestError>(i));
      if (name == "unknown") continue;
      out += fmt::format("flurry_request_errors_total{{worker=\"{}\",reason=\"{}\"}} {}\n", index, name,
                         worker.request_errors[i].get());
    }
    ++index;
  }
  family(&out, "source_limit_total", "counter",
         "The per-source bound of unsigned requests (--source-share), per core slice: limited (answered "
         "RETRY, the address's bucket empty), trimmed (answered with fewer numbers than asked), evicted (an "
         "address that still owed lost its place in a full table).");
  index = 0;
  for (const auto& worker : s.shared->worker_stats()) {
    for (const auto& [name, counter] : source_limit_counters(worker)) {
      out += fmt::format("flurry_source_limit_total{{worker=\"{}\",event=\"{}\"}} {}\n", index, name,
                         counter->get());
    }
    ++index;
  }
  // The backend's counters: drops (names ending in _drops) and other transport events (the
  // socket backend's UDP_GRO receives), each family's samples together.
  std::string events;
  family(&out, "transport_drops_total", "counter", "Packets dropped by the backend, by reason, per worker.");
  s.backend->visit_counters([&](std::string_view name, std::string_view reason, std::uint32_t worker,
                                std::uint64_t value) {
    if (is_drop_counter(name)) {
      out += fmt::format("flurry_transport_drops_total{{counter=\"{}\",reason=\"{}\",worker=\"{}\"}} {}\n",
                         name, reason, worker, value);
    } else {
      events += fmt::format("flurry_transport_events_total{{counter=\"{}\",event=\"{}\",worker=\"{}\"}} {}\n",
                            name, reason, worker, value);
    }
  });
  family(&out, "transport_events_total", "counter",
         "Backend events that are not drops, per worker: socket_gro runs (receives that carried several "
         "datagrams, UDP_GRO) and the datagrams they carried.");
  out += events;
  family(
      &out, "front_end_events_total", "counter",
      "RESP, HTTP and memcached front ends (--resp-listen, --http-listen, --memcache-listen): connections, "
      "requests and answers by kind.");
  for (const CounterSource* front_end : s.front_ends) {
    front_end->visit_counters([&](std::string_view name, std::string_view event, std::uint32_t core,
                                  std::uint64_t value) {
      out += fmt::format("flurry_front_end_events_total{{front_end=\"{}\",event=\"{}\",worker=\"{}\"}} {}\n",
                         name, event, core, value);
    });
  }
}

// Per key of the current table, summed over the workers; each family's samples together.
void key_metrics(const ReportSources& s, std::string& out) {
  const core::KeyTable* table = s.shared->keys.load();
  const std::span<const core::Key> keys = table == nullptr ? std::span<const core::Key>() : table->keys();
  std::vector<KeyTotals> totals;
  for (const core::Key& key : keys) totals.push_back(key_totals(s, key));
  family(&out, "key_requests_total", "counter", "Signed requests naming a known key, per key.");
  for (std::size_t k = 0; k < keys.size(); ++k) {
    out += fmt::format("flurry_key_requests_total{{key=\"{}\",id=\"{}\"}} {}\n", keys[k].name, keys[k].id,
                       totals[k].requests);
  }
  family(&out, "key_ids_issued_total", "counter", "IDs issued to signed requests, per key.");
  for (std::size_t k = 0; k < keys.size(); ++k) {
    out += fmt::format("flurry_key_ids_issued_total{{key=\"{}\",id=\"{}\"}} {}\n", keys[k].name, keys[k].id,
                       totals[k].ids);
  }
  family(&out, "key_rejections_total", "counter",
         "Signed requests of a known key refused, per key and reason (stale_timestamp, bad_mac, replay, "
         "not_permitted, rate_limited...).");
  for (std::size_t k = 0; k < keys.size(); ++k) {
    for (std::size_t i = 0; i < totals[k].rejected.size(); ++i) {
      if (auth_reason(i) == "unknown") continue;
      out += fmt::format("flurry_key_rejections_total{{key=\"{}\",id=\"{}\",reason=\"{}\"}} {}\n",
                         keys[k].name, keys[k].id, auth_reason(i), totals[k].rejected[i]);
    }
  }
}

// The watermark, the ceiling and the clock.
void scheduler_metrics(const ReportSources& s, std::string& out) {
  const auto& stats = s.scheduler.stats;
  const auto& layout = s.config->id_layout;
  family(&out, "ceiling_headroom_seconds", "gauge", "Time left before workers reach the durable ceiling.");
  const double headroom_s = static_cast<double>(headroom_units(stats)) * layout.time_unit_ms / 1000.0;
  out += fmt::format("flurry_ceiling_headroom_seconds {:.3f}\n", headroom_s);
  family(&out, "watermark_writes_total", "counter", "Durable watermark writes, by result.");
  out += fmt::format("flurry_watermark_writes_total{{result=\"ok\"}} {}\n", stats.renewals);
  out += fmt::format("flurry_watermark_writes_total{{result=\"failed\"}} {}\n", stats.renew_failures);
  family(&out, "watermark_write_seconds", "gauge", "Latency of the last and the slowest watermark write.");
  out += fmt::format("flurry_watermark_write_seconds{{which=\"last\"}} {:.6f}\n", stats.last_renew_ns / 1e9);
  out += fmt::format("flurry_watermark_write_seconds{{which=\"max\"}} {:.6f}\n", stats.renew_ns_max / 1e9);
  family(&out, "watermark_write_stalls_total", "counter",
         "Watermark writes that took the stall threshold or longer.");
  out += fmt::format("flurry_watermark_write_stalls_total {}\n", stats.stalled_writes);
  family(&out, "clock_steps_total", "counter", "Wall-clock steps against the monotonic clock (alarm).");
  out += fmt::format("flurry_clock_steps_total{{direction=\"back\"}} {}\n", stats.clock_steps_back);
  out += fmt::format("flurry_clock_steps_total{{direction=\"forward\"}} {}\n", stats.clock_steps_forward);
  family(&out, "ceiling_reached", "gauge",
         "1 while workers have issued up to the ceiling (demand above the layout's capacity, or a held "
         "ceiling): GET_IDS answered RETRY until time catches up.");
  out += fmt::format("flurry_ceiling_reached {}\n", stats.at_ceiling ? 1 : 0);
  family(&out, "ceiling_reached_ticks_total", "counter",
         "Scheduler ticks on which the workers were at the ceiling.");
  out += fmt::format("flurry_ceiling_reached_ticks_total {}\n", stats.ceiling_reached_ticks);
  family(&out, "run_ahead_seconds", "gauge",
         "How far the newest issued time field is ahead of the wall clock.");
  out += fmt::format("flurry_run_ahead_seconds {:.3f}\n",
                     (static_cast<double>(stats.last_t_max) - static_cast<double>(stats.now_t)) *
                         layout.time_unit_ms / 1000.0);
  family(&out, "watermark_write_pending_seconds", "gauge",
         "How long the current watermark write has been waiting.");
  out += fmt::format("flurry_watermark_write_pending_seconds {:.3f}\n", s.scheduler.pending_ms / 1000.0);
  family(&out, "healthy", "gauge", "1 when serving and able to issue (what `flurryctl health` says).");
  out += fmt::format("flurry_healthy {}\n", s.scheduler.healthy ? 1 : 0);
}

}  // namespace

std::string metrics_text(const ReportSources& s) {
  std::string out;
  family(&out, "build_info", "gauge", "Always 1; the version label says which flurryd serves.");
  out += fmt::format("flurry_build_info{{version=\"{}\"}} 1\n", FLURRY_VERSION);
  worker_metrics(s, out);
  key_metrics(s, out);
  scheduler_metrics(s, out);
  family(&out, "state", "gauge", "1 for the current serving state.");
  for (const ServeState state : serve_states) {
    out += fmt::format("flurry_state{{state=\"{}\"}} {}\n", to_string(state),
                       s.scheduler.state == state ? 1 : 0);
  }
  family(&out, "degraded_cause", "gauge",
         "1 for the degraded state the node is in (degraded_disk, degraded_etcd), 0 for the others.");
  for (const DegradedCause cause : degraded_causes) {
    out += fmt::format("flurry_degraded_cause{{state=\"{}\"}} {}\n", to_string(cause),
                       s.scheduler.degraded == cause ? 1 : 0);
  }
  family(
      &out, "layout_time_left_seconds", "gauge",
      "Time left before the ID layout's time field runs out (then nothing can be issued: plan a new epoch).");
  const auto& id_layout = s.config->id_layout;
  const std::uint64_t left_t = id_layout.time_max() > s.scheduler.stats.forward_t
                                   ? id_layout.time_max() - s.scheduler.stats.forward_t
                                   : 0;
  out += fmt::format("flurry_layout_time_left_seconds {:.0f}\n",
                     static_cast<double>(left_t) * id_layout.time_unit_ms / 1000.0);
  family(&out, "node_id", "gauge", "The node id this instance serves.");
  out += fmt::format("flurry_node_id {}\n", s.shared->assignment.node_id.load(std::memory_order_relaxed));
  family(&out, "seq_auto_created_total", "counter",
         "Named sequences a front door created on first use (--seq-auto-create), since start.");
  out += fmt::format("flurry_seq_auto_created_total {}\n", s.seq_auto_created);
  family(&out, "seq_auto_create_refused_total", "counter",
         "Unknown sequence names --seq-auto-create did not create: the node held --seq-auto-create-max "
         "sequences, or the create failed (the log says which), since start.");
  out += fmt::format("flurry_seq_auto_create_refused_total {}\n", s.seq_auto_create_refused);
  family(&out, "control_bad_requests_total", "counter", "Malformed control-socket requests.");
  out += fmt::format("flurry_control_bad_requests_total {}\n", s.control_bad_requests);
  family(&out, "control_refused_peers_total", "counter",
         "Control-socket clients refused because their uid is neither flurryd's nor root's.");
  out += fmt::format("flurry_control_refused_peers_total {}\n", s.control_refused_peers);
  family(
      &out, "front_door_events_total", "counter",
      "Connections the front doors (resp, http, memcache, metrics, control) closed: "
      "shed_peer (an address at its limit opened another: its own longest-waiting closed), shed (full: the "
      "longest-waiting closed for a new client), "
      "idle_timeout, request_timeout (a request still incomplete: slowloris).");
  for (const auto& [name, door] : s.doors) {
    door->visit([&, door_name = name](std::string_view event, std::uint64_t value) {
      out += fmt::format("flurry_front_door_events_total{{door=\"{}\",event=\"{}\"}} {}\n", door_name, event,
                         value);
    });
  }
  return out;
}

}  // namespace flurry::control
