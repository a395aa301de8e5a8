// control/node/state_dir.cc — see state_dir.h.
#include "control/node/state_dir.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "base/log.h"
#include "proto/layout.h"

namespace flurry::control {
namespace {

// The layout as the watermark record stores it (persist/ does not depend on proto/).
persist::LayoutRecord record_of(const proto::Layout& layout) {
  persist::LayoutRecord out;
  out.epoch_ms = layout.epoch_ms;
  out.time_unit_ms = layout.time_unit_ms;
  out.time_bits = static_cast<std::uint8_t>(layout.time_bits);
  out.node_bits = static_cast<std::uint8_t>(layout.node_bits);
  out.sequence_bits = static_cast<std::uint8_t>(layout.sequence_bits);
  out.core_bits = static_cast<std::uint8_t>(layout.core_bits);
  out.core_from = layout.core_from == proto::CoreBitsFrom::node ? 1 : 0;
  return out;
}

proto::Layout layout_of(const persist::LayoutRecord& record) {
  proto::Layout out;
  out.epoch_ms = record.epoch_ms;
  out.time_unit_ms = record.time_unit_ms;
  out.time_bits = record.time_bits;
  out.node_bits = record.node_bits;
  out.sequence_bits = record.sequence_bits;
  out.core_bits = record.core_bits;
  out.core_from = record.core_from == 1 ? proto::CoreBitsFrom::node : proto::CoreBitsFrom::sequence;
  return out;
}

std::string describe_record(const persist::Record& record) {
  return "node " + std::to_string(record.node_id) + ", layout " +
         (record.layout ? proto::describe(layout_of(*record.layout))
                        : std::string("not recorded (format 1)"));
}

// A layout change under --accept-state-change: the floor in the new layout's units, or the
// sentence that refuses it.
Result<std::uint64_t> carry_layout(const Config& config, const Clock& clock, const persist::Record& loaded,
                                   std::uint64_t watermark_t) {
  const proto::Layout& to = config.id_layout;
  const auto carried = proto::carry_watermark(layout_of(*loaded.layout), watermark_t, to);
  if (!carried) {
    return Error{
        "the layout change cannot be carried: every new ID must lie above every ID the old layout (" +
            describe_record(loaded) + ", watermark " + std::to_string(watermark_t) +
            ") could have issued, and that is beyond the end of " + proto::describe(to) +
            "; keep the old layout, or start this layout under a new node id with a new --state-dir",
        StatusCode::refused};
  }
  const std::uint64_t now_t = to.time_from_unix_ms(clock.wall_ms());
  const std::uint64_t ahead_max_t = config.timings.lead_t + carry_ahead_ms_max / to.time_unit_ms;
  if (*carried > now_t + ahead_max_t) {
    return Error{
        "the layout change cannot be carried: every new ID must lie above every ID the old layout (" +
            describe_record(loaded) + ", watermark " + std::to_string(watermark_t) +
            ") could have issued, so the new IDs would start at " +
            proto::format_unix_ms(to.epoch_ms + (*carried + 1) * to.time_unit_ms) + ", " +
            std::to_string((*carried - now_t) * to.time_unit_ms / 1000) +
            " s ahead of the clock, and stay that far ahead; keep the old layout, or start this layout "
            "under a new node id with a new --state-dir",
        StatusCode::refused};
  }
  return *carried;
}

// The record belongs to another identity: adopt it, carry it, or refuse (state_dir.h).
Status reconcile_identity(const Config& config, const Clock& clock, persist::WatermarkStore& store) {
  const persist::Record& loaded = *store.loaded();
  const persist::Identity wanted = identity_of(config);
  if (loaded.node_id == wanted.node_id && loaded.layout_fingerprint == wanted.layout_fingerprint) return {};
  const bool same_node = !config.etcd.empty() || loaded.node_id == wanted.node_id;  // cluster: etcd's node id
  if (!loaded.layout && loaded.layout_fingerprint != wanted.layout_fingerprint) {
    return Error{
        "state file " + store.path() + " was written by an older flurryd under another layout and does " +
            "not record which, so its floor cannot be carried into " + proto::describe(config.id_layout) +
            ": start with the old --layout/--epoch, or use a new node id with a new --state-dir",
        StatusCode::refused};
  }
  const bool same_space = !loaded.layout || proto::same_id_space(layout_of(*loaded.layout), config.id_layout);
  const std::uint64_t watermark_t = store.durable_watermark_t();
  if (same_space && same_node) {
    log_info("state {}: was {}; the same IDs under {} (a worker-count change): watermark {} kept",
             store.path(), describe_record(loaded), proto::describe(config.id_layout), watermark_t);
    return store.adopt(wanted, watermark_t);
  }
  if (!config.accept_state_change) {
    return Error{
        "state file " + store.path() + " belongs to " + describe_record(loaded) +
            ", but this flurryd runs as node " + std::to_string(config.node_id) + ", layout " +
            proto::describe(config.id_layout) +
            ": point --state-dir at this node's own directory, or start with --accept-state-change (the "
            "watermark is kept, carried into the new layout's units, or the change refused)",
        StatusCode::refused};
  }
  std::uint64_t carried_t = watermark_t;
  if (!same_space) {
    Result<std::uint64_t> carried = carry_layout(config, clock, loaded, watermark_t);
    if (!carried.ok()) return carried.status();
    carried_t = *carried;
  }
  log_warn(
      "--accept-state-change: state {} was {} with watermark {}; now node {}, layout {}, watermark {} ({}): "
      "every new ID lies above every ID issued before",
      store.path(), describe_record(loaded), watermark_t, wanted.node_id, proto::describe(config.id_layout),
      carried_t,
      proto::format_unix_ms(config.id_layout.epoch_ms + carried_t * config.id_layout.time_unit_ms));
  return store.adopt(wanted, carried_t);
}

bool file_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 || errno != ENOENT;
}

}  // namespace

persist::Identity identity_of(const Config& config) {
  return persist::Identity{config.node_id, config.id_layout.fingerprint(), record_of(config.id_layout)};
}

namespace {

const char* const new_node_hint =
    ": if this is a new node, start it once with --init; if it is not, point --state-dir at the directory "
    "that "
    "holds its watermark (a node that starts from nothing may issue IDs it issued before)";

// The record found (or not) against --init and local mode's rule that a state dir without a
// watermark is never silently a new node. Tells whether this start is a new node.
Result<bool> check_new_node(const Config& config, const persist::WatermarkStore& store,
                            const std::string& file) {
  const bool holds_record = store.loaded().has_value();
  // --accept-corrupt-state on a file with no valid record: the operator said to start anew.
  const bool new_node = config.init || (config.accept_corrupt_state && !holds_record);
  if (config.etcd.empty() && !holds_record && !new_node) {
    return Error{"state dir " + config.state_dir + " holds no watermark record yet (" + file + " is new)" +
                     new_node_hint,
                 StatusCode::refused};
  }
  if (config.init && holds_record) {
    return Error{"--init: state dir " + config.state_dir + " already holds a watermark (" +
                     describe_record(*store.loaded()) + ", watermark " +
                     std::to_string(store.durable_watermark_t()) +
                     "): it is not a new node; start it without --init",
                 StatusCode::refused};
  }
  return new_node;
}

}  // namespace

Result<OpenedState> open_state(const Config& config, const Clock& clock, persist::Io* io) {
  const std::string file = config.state_dir + "/" + std::string(persist::WatermarkStore::file_name);
  if (config.etcd.empty() && !config.init && !file_exists(file)) {
    return Error{
        "state dir " + config.state_dir + " holds no watermark (" + file + " does not exist)" + new_node_hint,
        StatusCode::refused};
  }
  persist::OpenOptions options;
  options.accept_identity_change = true;  // reconcile_identity decides, with the operator's flags
  options.accept_corrupt = config.accept_corrupt_state;
  options.io = io;
  Result<std::unique_ptr<persist::WatermarkStore>> store =
      persist::WatermarkStore::open(config.state_dir, identity_of(config), options);
  if (!store.ok()) return store.status();
  OpenedState opened;
  opened.store = std::move(store).value();
  Result<bool> new_node = check_new_node(config, *opened.store, file);
  if (!new_node.ok()) return new_node.status();
  if (opened.store->loaded().has_value()) {
    if (Status reconciled = reconcile_identity(config, clock, *opened.store); !reconciled.ok())
      return reconciled;
  }
  opened.floor_t = opened.store->durable_watermark_t();
  if (*new_node) {
    // A new node starts a lead above the clock: above anything an earlier instance on this
    // host could have issued under this node id (run-ahead is bounded by the lead).
    opened.floor_t =
        std::max(opened.floor_t, config.id_layout.time_from_unix_ms(clock.wall_ms()) + config.timings.lead_t);
    log_info(
        "--init: new node {} in {}; its first IDs lie above {}", config.node_id, config.state_dir,
        proto::format_unix_ms(config.id_layout.epoch_ms + opened.floor_t * config.id_layout.time_unit_ms));
  }
  return opened;
}

}  // namespace flurry::control
