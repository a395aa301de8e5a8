// persist/slot_writer.cc — see slot_writer.h.
#include "persist/slot_writer.h"

#include "base/log.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <mutex>
#include <thread>

#include "persist/file_util.h"

namespace flurry::persist::detail {

namespace {

// Bounded retries of a busy (or empty-handed) submit before giving up on io_uring.
constexpr int submit_busy_retries_max = 1000;
constexpr auto submit_busy_pause = std::chrono::microseconds(50);
// Pause between attempts to reap when the ring itself fails a wait.
constexpr auto reap_failure_pause = std::chrono::milliseconds(1);

enum class Kind : std::uint64_t { write = 1, fsync = 2 };

}  // namespace

struct SlotWriter::Uring {
  std::unique_ptr<Ring> ring;
  // Cleared when the ring fails at run time: pwrite + fdatasync from then on.
  bool usable = true;
  // Submitted (consumed by the kernel) and not reaped. Nothing is written to the file while
  // this is not 0: a request still in flight could land after, and over, a newer write.
  unsigned in_flight = 0;
  // Tags completions with the write_and_sync() call they belong to, so a completion of an
  // earlier call reaped late is never taken for one of this call.
  std::uint64_t generation = 0;
  // What the in-flight write SQE points at: owned here, so it lives as long as the ring.
  std::array<std::uint8_t, bytes_max> buffer{};

  std::uint64_t tag(Kind kind) const { return generation * 4 + static_cast<std::uint64_t>(kind); }
};

SlotWriter::SlotWriter(Io& io, bool use_io_uring) : io_(io) {
  if (!use_io_uring) return;
  Result<std::unique_ptr<Ring>> ring = io_.open_ring(ring_depth);
  if (!ring.ok()) {
    log_warn("{}", "io_uring unavailable (" + ring.message() + "); using pwrite+fdatasync");
    return;
  }
  uring_ = std::make_unique<Uring>();
  uring_->ring = std::move(ring).value();
}

SlotWriter::~SlotWriter() {
  if (uring_ == nullptr || uring_->in_flight == 0) return;
  if (!reap_all().ok()) park(std::move(uring_));
}

bool SlotWriter::uses_io_uring() const { return uring_ != nullptr && uring_->usable; }

std::string_view SlotWriter::method() const { return uses_io_uring() ? "io_uring" : "pwrite+fdatasync"; }

Status SlotWriter::write_and_sync(int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset) {
  if (bytes.size() > bytes_max) {
    return Error{"internal error: a slot write of " + std::to_string(bytes.size()) + " bytes exceeds " +
                 std::to_string(bytes_max)};
  }
  // Leftovers of an earlier call that could not be reaped then: nothing may be written
  // before they completed.
  if (uring_ != nullptr && uring_->in_flight > 0) {
    if (Status reaped = reap_all(); !reaped.ok()) return reaped;
  }
  if (uring_ != nullptr && uring_->usable) return write_and_sync_uring(fd, bytes, offset);
  return write_and_sync_pwrite(fd, bytes, offset);
}

Status SlotWriter::write_and_sync_pwrite(int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset) {
  const long written = io_.write_at(fd, bytes, offset);
  if (written < 0) return Error{"pwrite failed: " + errno_text(static_cast<int>(-written))};
  if (static_cast<std::size_t>(written) != bytes.size()) {
    return Error{"short pwrite (" + std::to_string(written) + " of " + std::to_string(bytes.size()) +
                 " bytes)"};
  }
  const int synced = io_.fdatasync(fd);
  if (synced != 0) return Error{"fdatasync failed: " + errno_text(-synced)};
  return {};
}

Status SlotWriter::reap_all() {
  Uring& u = *uring_;
  const auto deadline = std::chrono::steady_clock::now() + reap_timeout_ms;
  int last_failure = 0;
  while (u.in_flight > 0) {
    const auto remaining = deadline - std::chrono::steady_clock::now();
    if (remaining <= std::chrono::nanoseconds::zero()) break;
    Ring::Completion completion;
    const int ret =
        u.ring->wait(&completion, std::chrono::duration_cast<std::chrono::nanoseconds>(remaining).count());
    if (ret == 0) {
      --u.in_flight;  // whatever it was, it no longer touches the file
      continue;
    }
    if (ret == -EINTR) continue;
    if (ret == -ETIME) break;
    last_failure = -ret;
    std::this_thread::sleep_for(reap_failure_pause);
  }
  if (u.in_flight == 0) return {};
  return Error{std::to_string(u.in_flight) + " io_uring request(s) handed to the kernel earlier " +
               "have not completed within " + std::to_string(reap_timeout_ms.count()) + " ms" +
               (last_failure != 0 ? " (wait: " + errno_text(last_failure) + ")" : std::string()) +
               "; nothing is written until they have, because a late write could overwrite a "
               "newer record"};
}

Status SlotWriter::retire(const std::string& why, int fd, std::span<const std::uint8_t> bytes,
                          std::uint64_t offset) {
  uring_->usable = false;
  log_warn("{}", "io_uring failed (" + why + "); using pwrite+fdatasync from now on");
  if (Status reaped = reap_all(); !reaped.ok()) return reaped;
  return write_and_sync_pwrite(fd, bytes, offset);
}

namespace {

// One linked write + fsync pair in flight on a ring: submits its entries and reaps their
// completions. A failure here is a failure of the ring itself, not of the I/O.
struct LinkedPair {
  Ring& ring;
  unsigned& in_flight;
  std::uint64_t write_tag;
  std::uint64_t fsync_tag;
  unsigned unsubmitted = 2;
  int write_result = INT_MIN;
  int fsync_result = INT_MIN;

  // Submits until at least one more entry was consumed.
  Status submit_more() {
    int busy_retries = 0;
    for (;;) {
      const int ret = ring.submit();
      if (ret > 0) {
        const unsigned consumed = std::min(static_cast<unsigned>(ret), unsubmitted);
        unsubmitted -= consumed;
        in_flight += consumed;
        return {};
      }
      if (ret == -EINTR) continue;
      if ((ret == 0 || ret == -EAGAIN || ret == -EBUSY) && ++busy_retries < submit_busy_retries_max) {
        std::this_thread::sleep_for(submit_busy_pause);
        continue;
      }
      return Error{"submit: " + (ret < 0 ? errno_text(-ret) : std::string("nothing submitted"))};
    }
  }

  // Waits for one completion of this pair.
  Status reap_one() {
    for (;;) {
      Ring::Completion completion;
      const int ret = ring.wait(&completion, -1);
      if (ret == -EINTR) continue;
      if (ret < 0) return Error{"wait: " + errno_text(-ret)};
      --in_flight;
      if (completion.user_data == write_tag) write_result = completion.res;
      if (completion.user_data == fsync_tag) fsync_result = completion.res;
      return {};
    }
  }

  // Submits both entries and reaps both completions.
  Status run() {
    if (Status submitted = submit_more(); !submitted.ok()) return submitted;
    if (unsubmitted > 0) {
      // Only the write was consumed: the link to the fsync is cut, and an fsync submitted now
      // could run before the write and miss it. Reap the write first, then submit the fsync
      // (always, even after a failed write, so no entry is left behind in the queue).
      while (write_result == INT_MIN) {
        if (Status reaped = reap_one(); !reaped.ok()) return reaped;
      }
      if (Status submitted = submit_more(); !submitted.ok()) return submitted;
    }
    while (write_result == INT_MIN || fsync_result == INT_MIN) {
      if (Status reaped = reap_one(); !reaped.ok()) return reaped;
    }
    return {};
  }

  // The I/O's own outcome, once run() succeeded.
  Status outcome(std::size_t size) const {
    if (write_result < 0) return Error{"write failed: " + errno_text(-write_result) + " (io_uring)"};
    if (static_cast<std::size_t>(write_result) != size) {
      return Error{"short write (" + std::to_string(write_result) + " of " + std::to_string(size) +
                   " bytes, io_uring)"};
    }
    if (fsync_result < 0) return Error{"fdatasync failed: " + errno_text(-fsync_result) + " (io_uring)"};
    return {};
  }
};

}  // namespace

Status SlotWriter::write_and_sync_uring(int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset) {
  Uring& u = *uring_;
  ++u.generation;
  LinkedPair pair{*u.ring, u.in_flight, u.tag(Kind::write), u.tag(Kind::fsync)};
  std::copy(bytes.begin(), bytes.end(), u.buffer.begin());
  io_uring_sqe* write_sqe = u.ring->get_sqe();
  io_uring_sqe* fsync_sqe = write_sqe != nullptr ? u.ring->get_sqe() : nullptr;
  if (write_sqe == nullptr || fsync_sqe == nullptr) {
    // An entry taken but not prepared holds what an earlier call left there: make it a no-op
    // in case anything ever submits it.
    if (write_sqe != nullptr) io_uring_prep_nop(write_sqe);
    return retire("submission queue full", fd, bytes, offset);
  }
  io_uring_prep_write(write_sqe, fd, u.buffer.data(), static_cast<unsigned>(bytes.size()), offset);
  // Submitted together, the fsync starts only after the write completed in full; a failed
  // or short write cancels it (-ECANCELED).
  write_sqe->flags |= IOSQE_IO_LINK;
  io_uring_sqe_set_data64(write_sqe, pair.write_tag);
  io_uring_prep_fsync(fsync_sqe, fd, IORING_FSYNC_DATASYNC);
  io_uring_sqe_set_data64(fsync_sqe, pair.fsync_tag);
  // Any failure of the ring itself (not of the I/O) retires it.
  if (Status ran = pair.run(); !ran.ok()) return retire(ran.message(), fd, bytes, offset);
  return pair.outcome(bytes.size());
}

void SlotWriter::park(std::unique_ptr<Uring> uring) {
  static std::mutex mutex;
  static auto* parked = new std::vector<std::unique_ptr<Uring>>();
  const std::lock_guard<std::mutex> lock(mutex);
  parked->push_back(std::move(uring));
}

}  // namespace flurry::persist::detail
