// persist/slot_writer.h — makes one watermark slot durable, by io_uring or pwrite+fdatasync,
// on top of an Io (persist/io.h). Internal to persist/; not part of its public interface.
//
// Contract:
// - The method is chosen once, at construction: io_uring when asked for and io.open_ring()
//   works, else pwrite+fdatasync with one warning naming why. At run time a failing ring is
//   retired once, with one warning, and pwrite+fdatasync is used from then on.
// - write_and_sync() succeeds only after the bytes were written in full at the offset
//   AND a data sync that started after that write had completed in full has completed
//   successfully. io_uring: a write SQE linked to an IORING_FSYNC_DATASYNC fsync SQE in one
//   submit; when a submit consumes only the write (the link is cut at the submit boundary),
//   the write's completion is reaped before the fsync is submitted.
// - No write reaches the file while an earlier request handed to the ring may still be in
//   flight: before any write (pwrite fallback included) every submitted request must have
//   completed. Reaping them waits at most reap_timeout_ms; if they cannot be reaped, nothing
//   is written and write_and_sync() fails saying so (the store is degraded until they are).
//   The destructor reaps the same way; a ring that still has requests in flight is parked
//   (kept, with the buffer they read, until the process exits) rather than freed.
// - Blocks while the device works (like fdatasync); every retry loop is bounded.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "persist/io.h"

namespace flurry::persist::detail {

class SlotWriter {
 public:
  static constexpr std::size_t bytes_max = 512;  // the largest write_and_sync() accepts
  // Two SQEs per write (write, fsync); a little headroom, never more.
  static constexpr unsigned ring_depth = 4;
  static constexpr std::chrono::milliseconds reap_timeout_ms{1000};

  // Warnings (fallback, retirement) are logged (base/log.h), one each.
  SlotWriter(Io& io, bool use_io_uring);
  SlotWriter(const SlotWriter&) = delete;
  SlotWriter& operator=(const SlotWriter&) = delete;
  ~SlotWriter();

  // See the contract above. bytes.size() <= bytes_max. A failure says what failed (errno
  // text included), without the file's name.
  Status write_and_sync(int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset);

  // "io_uring" or "pwrite+fdatasync".
  std::string_view method() const;
  bool uses_io_uring() const;  // method() is "io_uring"

 private:
  struct Uring;

  Status write_and_sync_pwrite(int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset);
  Status write_and_sync_uring(int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset);
  // Retires a failing ring (one warning naming `why`), then finishes the write with pwrite +
  // fdatasync once every request handed to the ring has completed.
  Status retire(const std::string& why, int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset);
  // Reaps every in-flight request, waiting at most reap_timeout_ms in all.
  Status reap_all();
  // Keeps a ring that still has requests in flight (and the buffer they read) until the
  // process exits: never freed, never exited. Reachable, so not a leak.
  static void park(std::unique_ptr<Uring> uring);

  Io& io_;
  std::unique_ptr<Uring> uring_;  // null: pwrite + fdatasync
};

}  // namespace flurry::persist::detail
