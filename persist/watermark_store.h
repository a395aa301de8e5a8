// persist/watermark_store.h — the crash-safe local watermark: the highest time field W this
// node ever made durable (docs/architecture.md, the invariant).
//
// Contract:
// - store(W) returns true only after W is on stable storage (write, then fdatasync, both
//   checked). The watermark scheduler (on flurry-renew; on flurryd's main thread at start) publishes
//   a ceiling only after that. On false, nothing is acknowledged, the previous durable W stays valid
//   and the store stays usable.
// - The durable watermark never decreases: store() refuses a W below durable_watermark_t().
// - <dir>/watermark holds two 128-byte slots (offsets 0 and 4096) written alternately, so a
//   torn or lost write can damage only the slot being written, never the last acknowledged
//   one. open() picks the valid slot with the highest sequence. The on-disk format is
//   described at the top of watermark_store.cc.
// - One store per state directory: open() takes flock(LOCK_EX | LOCK_NB) on the file and
//   holds it for the store's lifetime.
// - Every record (format version 2) also carries the ID layout it was written under, as raw
//   numbers (LayoutRecord), so a caller can carry the watermark across a layout change:
//   open() with accept_identity_change, read loaded()->layout, then adopt() the new identity
//   with a carried watermark. Version-1 records (64-byte slots) are still read; their layout
//   is unknown (Record::layout is empty).
// - Not thread-safe: one thread at a time calls it: flurryd's main thread before the renew thread
//   (flurry-renew) starts and after it stops, that thread in between; the control loop reads only a
//   copy. store() blocks until durable.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace flurry::persist {

class Io;  // persist/io.h

namespace detail {
class SlotWriter;  // persist/slot_writer.h
}

// The ID layout a watermark was written under, as raw numbers (persist/ does not depend on
// proto/; the caller converts from and to proto::Layout and validates). Stored as is: open()
// checks only the record's CRC, never whether these numbers make a valid layout.
struct LayoutRecord {
  std::uint64_t epoch_ms = 0;      // proto::Layout::epoch_ms
  std::uint32_t time_unit_ms = 0;  // proto::Layout::time_unit_ms
  std::uint8_t time_bits = 0;
  std::uint8_t node_bits = 0;
  std::uint8_t sequence_bits = 0;
  std::uint8_t core_bits = 0;
  std::uint8_t core_from = 0;  // 0: core bits come from the sequence, 1: from the node

  friend bool operator==(const LayoutRecord&, const LayoutRecord&) = default;
};

// Who the watermark belongs to. A state directory is never reused silently under another
// node id or layout: its watermark means nothing (or too little) there. Two identities are
// "the same" when node_id and layout_fingerprint match; `layout` is recorded for the caller
// (it should be the layout the fingerprint was computed from) but not compared.
struct Identity {
  std::uint32_t node_id = 0;
  std::uint64_t layout_fingerprint = 0;  // proto::Layout::fingerprint()
  LayoutRecord layout;                   // written into every record

  friend bool operator==(const Identity&, const Identity&) = default;
};

// One decoded slot.
struct Record {
  std::uint32_t format_version = 0;  // 1 or 2: the version the slot was written in
  std::uint64_t sequence = 0;        // slot write counter, increases by 1 per store()
  std::uint64_t watermark_t = 0;     // durable watermark, in `layout`'s time units
  std::uint32_t node_id = 0;
  std::uint64_t layout_fingerprint = 0;
  std::uint64_t written_unix_ms = 0;  // wall clock at write time; informational only
  // The layout the record was written under; empty for a version-1 record (unknown).
  std::optional<LayoutRecord> layout;
};

struct OpenOptions {
  // Operator override (flurryd --accept-state-change): open a file whose record belongs to
  // another node id / layout. By default the stored watermark is kept as is and the next
  // store() writes the new identity; the caller may instead rewrite it with adopt().
  bool accept_identity_change = false;
  // Operator override (flurryd --accept-corrupt-state): a file with no valid slot is saved
  // as <dir>/watermark.corrupt-<unix_ms>, rewritten as a new file (the initial record only),
  // and the store starts as new (W = 0).
  // Dangerous: IDs issued before may be issued again; a warning says so.
  bool accept_corrupt = false;
  // false forces the pwrite + fdatasync path (tests and benchmarks use both).
  bool use_io_uring = true;
  // Every change to the disk goes through it (persist/io.h); nullptr: system_io(). Must
  // outlive the store. Tests pass a crash-simulating one.
  Io* io = nullptr;
};

class WatermarkStore {
 public:
  // Byte layout of <dir>/watermark (see watermark_store.cc).
  static constexpr std::size_t slot_size = 128;    // version 2
  static constexpr std::size_t v1_slot_size = 64;  // version 1: then 64 zero bytes
  static constexpr std::size_t slot_count = 2;
  static constexpr std::uint64_t slot_stride = 4096;  // slot i lives at i * slot_stride
  static constexpr std::uint64_t file_size = slot_count * slot_stride;
  static constexpr std::uint32_t format_version = 2;  // written; versions 1 and 2 are read
  static constexpr std::string_view file_name = "watermark";

  // Opens or creates <dir>/watermark (creating dir and missing parents with mode 0700). A new
  // file is created holding only the initial record (sequence 0, no watermark) in slot 0,
  // fsynced, and the directory fsynced, before open() returns: it is complete or absent.
  // Fails (one sentence naming the file, the errno text and the fix or override flag) when:
  // - the directory cannot be created or opened, or the file cannot be created, opened or read;
  // - <dir>/watermark is not a regular file;
  // - the file is locked by another open store (another flurryd on the same --state-dir);
  // - the file exists but holds no valid slot (both corrupt), unless accept_corrupt;
  // - the valid record's node_id or layout_fingerprint differ from `identity`, unless
  //   accept_identity_change.
  // Recoverable findings (one corrupt slot, io_uring fallback, overrides used) become
  // warnings, logged (base/log.h) once each.
  static Result<std::unique_ptr<WatermarkStore>> open(const std::string& dir, const Identity& identity,
                                                      const OpenOptions& options);

  WatermarkStore(const WatermarkStore&) = delete;
  WatermarkStore& operator=(const WatermarkStore&) = delete;
  ~WatermarkStore();

  // What open() found: the winning record, or nullopt for a new (or accepted-corrupt) file.
  // Unchanged by store() and adopt(): with accept_identity_change it is the foreign record,
  // watermark and layout included, from which the caller computes what to adopt().
  const std::optional<Record>& loaded() const { return loaded_; }
  // Highest durable W: 0 when new, then the W of the last successful store().
  std::uint64_t durable_watermark_t() const { return durable_watermark_t_; }
  // Sequence of the last durable record (0 when new).
  std::uint64_t sequence() const { return sequence_; }

  // Makes `watermark_t` durable: writes the slot not holding the latest record, then
  // fdatasync (io_uring: a write SQE linked to an IORING_FSYNC_DATASYNC fsync SQE, both
  // completions checked; see persist/slot_writer.h). Blocks until durable. Fails when:
  // - watermark_t < durable_watermark_t() (it would lower the watermark; nothing written);
  // - the write fails or is short, or the fsync fails (ENOSPC, EIO, EFBIG, ...);
  // - io_uring failed and requests it was handed earlier have not completed within
  //   slot_writer's reap timeout (nothing written: a late write could land over it).
  // After a failure the previous durable W stays valid and the next store() rewrites the
  // same slot. Storing the current W again is allowed (it rewrites the record).
  Status store(std::uint64_t watermark_t);

  // Rewrites the record under `identity` with `carried_watermark_t`, which may be LOWER or
  // higher than durable_watermark_t(): the carried value is in the new layout's time units,
  // which the never-decrease rule cannot compare with the stored ones. Made durable exactly
  // like store() (same slot rotation, same write + sync, blocks until durable); on success
  // identity() becomes `identity`, durable_watermark_t() becomes `carried_watermark_t`, and
  // from then on store() applies the never-decrease rule in the new units. The caller is
  // responsible for the carried value being above every ID the old identity could have
  // issued. Fails, writing nothing, when:
  // - open() was not given accept_identity_change;
  // - a store() or adopt() already succeeded on this store (adopt only right after open);
  // - open() found no record (a new file: use store()), or the found record already has
  //   `identity`'s node_id and layout_fingerprint (nothing to adopt: use store());
  // and, after writing, like store() when the write or the sync fails (nothing is adopted;
  // adopt() may be called again).
  Status adopt(const Identity& identity, std::uint64_t carried_watermark_t);

  // "io_uring" or "pwrite+fdatasync".
  std::string_view method() const;
  // method() is io_uring (a store opened beside this one, such as the sequence store, follows it).
  bool uses_io_uring() const;

  // Counters for metrics.
  std::uint64_t stores() const { return stores_; }                  // successful store()s and adopt()s
  std::uint64_t store_failures() const { return store_failures_; }  // they failed
  std::uint64_t last_store_latency_ns() const { return last_store_latency_ns_; }

  const std::string& path() const { return path_; }
  const Identity& identity() const { return identity_; }

 private:
  struct Opening;  // the steps of open(), watermark_store.cc

  WatermarkStore() = default;

  Status write_record(std::uint64_t watermark_t, const Identity& identity);

  std::string path_;
  Identity identity_;
  int fd_ = -1;
  Io* io_ = nullptr;
  std::unique_ptr<detail::SlotWriter> writer_;  // chosen method; null only inside open()
  std::optional<Record> loaded_;
  bool accept_identity_change_ = false;
  bool adopt_allowed_ = false;  // until the first successful store() or adopt()
  std::uint64_t durable_watermark_t_ = 0;
  std::uint64_t sequence_ = 0;
  std::uint64_t stores_ = 0;
  std::uint64_t store_failures_ = 0;
  std::uint64_t last_store_latency_ns_ = 0;
  std::array<std::uint8_t, slot_size> slot_buffer_{};  // the record being written
};

}  // namespace flurry::persist
