// persist/io.h — the one interface through which persist/ changes anything on disk.
//
// Contract:
// - Every write, sync, file creation, rename, link, unlink and mkdir that persist/ performs
//   goes through an Io: the watermark slot writes (both methods), the crash-safe file
//   creation (temporary file, write, fsync, rename without replacing, directory fsync), the
//   identity file, the --accept-corrupt-state reset and mkdir -p. Reads (open without
//   O_CREAT, pread, fstat, flock, close) change nothing durable and call the system directly.
// - system_io() is the production implementation: the system calls, EINTR retried, nothing
//   else. It is stateless and lives for the whole process.
// - The two methods of making a watermark slot durable are built on top of an Io, chosen once
//   when a store opens (persist/slot_writer.h): "pwrite+fdatasync" calls write_at() then
//   fdatasync(); "io_uring" prepares a write SQE linked to an IORING_FSYNC_DATASYNC fsync SQE
//   on a Ring from open_ring(). So a test Io (tests/persist/crash_sim.h) sees every write and
//   every sync of both methods, including those the kernel would run for the ring.
// - Results: >= 0 on success, -errno on failure. errno is not part of the interface.
// - Not thread-safe by itself: the system implementation is, a test implementation need not be.
#pragma once

#include <liburing.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"

namespace flurry::persist {

// The few liburing calls the io_uring method makes, so that a test can stand in for the
// kernel (partial submits, completion order, failures, requests that never complete). The
// SQEs are real io_uring_sqe structs prepared with liburing's io_uring_prep_* helpers.
class Ring {
 public:
  struct Completion {
    std::uint64_t user_data = 0;
    int res = 0;  // the request's result: bytes written, 0, or -errno
  };

  virtual ~Ring() = default;
  // io_uring_get_sqe: the next free submission entry, or nullptr when the queue is full.
  virtual io_uring_sqe* get_sqe() = 0;
  // io_uring_submit: hands the prepared entries to the kernel. Returns how many it consumed
  // (possibly fewer than prepared: a link chain is then cut at the boundary), or -errno.
  virtual int submit() = 0;
  // Waits for one completion and consumes it (io_uring_wait_cqe[_timeout] + cqe_seen).
  // timeout_ns < 0 waits without limit. Returns 0 and sets *out, -ETIME when the timeout
  // passed without a completion, or another -errno when the ring failed. Never submits.
  virtual int wait(Completion* out, std::int64_t timeout_ns) = 0;
};

class Io {
 public:
  virtual ~Io() = default;

  // mkdir(path, mode): 0 or -errno (-EEXIST when it exists).
  virtual int make_directory(const std::string& path, mode_t mode) = 0;
  // openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode): a descriptor the
  // caller closes with close(2), or -errno.
  virtual int create_file(int dir_fd, const std::string& name, mode_t mode) = 0;
  // One pwrite(fd, bytes, offset): the count written (maybe short), or -errno.
  virtual long write_at(int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset) = 0;
  // fsync(fd) of a file or a directory: 0 or -errno.
  virtual int fsync(int fd) = 0;
  // fdatasync(fd): 0 or -errno.
  virtual int fdatasync(int fd) = 0;
  // renameat2(dir_fd, from, dir_fd, to, RENAME_NOREPLACE): 0 or -errno (-EEXIST when `to`
  // exists; -EINVAL or -ENOSYS when the file system lacks it).
  virtual int rename_no_replace(int dir_fd, const std::string& from, const std::string& to) = 0;
  // linkat(dir_fd, from, dir_fd, to, 0): 0 or -errno.
  virtual int link(int dir_fd, const std::string& from, const std::string& to) = 0;
  // unlinkat(dir_fd, name, 0): 0 or -errno.
  virtual int unlink(int dir_fd, const std::string& name) = 0;
  // A ring of `entries` entries that supports IORING_OP_WRITE, IORING_OP_FSYNC and waits
  // with a timeout that submit nothing (IORING_FEAT_EXT_ARG); fails with the reason (an
  // errno text or the missing feature).
  virtual Result<std::unique_ptr<Ring>> open_ring(unsigned entries) = 0;
};

// The production Io: the system calls themselves.
Io& system_io();

}  // namespace flurry::persist
