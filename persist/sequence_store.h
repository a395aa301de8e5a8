// persist/sequence_store.h — the crash-safe local state of the named sequences: for each of
// entries_max slots, the sequence it holds (name, mode) and the upper bound of the highest
// block ever reserved for it. Every number below that bound may have been issued; none above.
//
// Contract:
// - write() returns OK only after the record is on stable storage (the SlotWriter of
//   persist/slot_writer.h: io_uring write linked to an fdatasync, or pwrite + fdatasync).
//   The sequence thread (flurry-seq) publishes a block of a sequence only after that.
// - <dir>/sequences holds, per entry, two 128-byte slots (offsets (2 * entry + k) * 4096),
//   written alternately, so a torn write can damage only the slot being written, never the
//   last acknowledged record of that entry. Each record is checksummed (CRC-32); open()
//   takes, per entry, the valid slot with the highest sequence. Format at the top of
//   sequence_store.cc.
// - The file is created complete (an initial record per entry) before open() returns: it is
//   complete or absent.
// - open() fails when an entry has no valid slot but a nonzero one (damage to both): the
//   sequence's bound would be lost, and numbers could be issued twice.
// - A deleted sequence leaves its record in the entry, not in use (a tombstone): its name and
//   its upper bound, the floor below which numbers of that name may have been issued. The
//   sequence manager refuses to create the name again below it (never twice across a delete), so
//   the tombstone stays until the name is created again at or above it, which reuses the entry.
// - Written by the sequence thread (flurry-seq) and by the control loop (seq create/delete), one at a
//   time under SequenceManager's mutex; the caller holds the state dir's lock (the watermark store's
//   flock). Not thread-safe.
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

class Io;
namespace detail {
class SlotWriter;
}

struct SequenceRecord {
  bool in_use = false;
  std::uint8_t mode = 0;    // core::SeqMode, as a number (persist/ does not depend on core/)
  std::string name;         // 1..32 bytes
  std::uint64_t upper = 0;  // every number below may have been issued; none at or above
  std::uint64_t step = 0;   // the block size last used (the dynamic step survives restarts)
};

class SequenceStore {
 public:
  static constexpr std::size_t entries_max = 64;
  static constexpr std::size_t slot_size = 128;
  static constexpr std::uint64_t slot_stride = 4096;
  static constexpr std::uint64_t file_size = entries_max * 2 * slot_stride;
  static constexpr std::size_t name_size_max = 32;
  static constexpr std::string_view file_name = "sequences";

  // Opens or creates <dir>/sequences (dir must exist). io nullptr: system_io().
  static Result<std::unique_ptr<SequenceStore>> open(const std::string& dir, bool use_io_uring,
                                                     Io* io = nullptr);
  SequenceStore(const SequenceStore&) = delete;
  SequenceStore& operator=(const SequenceStore&) = delete;
  ~SequenceStore();

  // The record of each entry in use (nullopt: never written, or deleted).
  const std::optional<SequenceRecord>& record(std::size_t entry) const { return records_[entry]; }
  // The tombstone of a deleted sequence (not in use, its name and upper kept; nullopt: none).
  const std::optional<SequenceRecord>& tombstone(std::size_t entry) const { return tombstones_[entry]; }
  // Makes `record` the durable record of `entry`; on failure the previous one stays valid. A
  // record not in use with a name is a tombstone; with no name, the entry is free.
  Status write(std::size_t entry, const SequenceRecord& record);

  std::string_view method() const;
  const std::string& path() const { return path_; }

 private:
  SequenceStore() = default;

  std::string path_;
  int fd_ = -1;
  std::unique_ptr<detail::SlotWriter> writer_;
  std::array<std::optional<SequenceRecord>, entries_max> records_;
  std::array<std::optional<SequenceRecord>, entries_max> tombstones_;
  std::array<std::uint64_t, entries_max> sequences_{};  // slot write counter per entry
};

}  // namespace flurry::persist
