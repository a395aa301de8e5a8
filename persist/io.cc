// persist/io.cc — see io.h. The system implementation: each call is the system call it names,
// retried on EINTR; nothing is cached or reordered.
#include "persist/io.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE (glibc >= 2.28)
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "persist/file_util.h"

namespace flurry::persist {

namespace {

// Runs `call` until it does not fail with EINTR; returns its result or -errno.
template <typename Call>
long retry_eintr(Call call) {
  for (;;) {
    const long result = call();
    if (result >= 0) return result;
    if (errno != EINTR) return -errno;
  }
}

class SystemRing final : public Ring {
 public:
  SystemRing() = default;
  SystemRing(const SystemRing&) = delete;
  SystemRing& operator=(const SystemRing&) = delete;
  ~SystemRing() override {
    if (initialized_) io_uring_queue_exit(&ring_);
  }

  // Fails with the errno text or the missing feature.
  Status init(unsigned entries) {
    const int init = io_uring_queue_init(entries, &ring_, 0);
    if (init < 0) return Error{detail::errno_text(-init)};
    initialized_ = true;
    io_uring_probe* probe = io_uring_get_probe_ring(&ring_);
    const bool supported = probe != nullptr && io_uring_opcode_supported(probe, IORING_OP_WRITE) != 0 &&
                           io_uring_opcode_supported(probe, IORING_OP_FSYNC) != 0;
    if (probe != nullptr) io_uring_free_probe(probe);
    if (!supported) return Error{"the kernel lacks IORING_OP_WRITE or IORING_OP_FSYNC"};
    // Without it a wait with a timeout submits pending entries itself (liburing 2.3), and
    // the store must be able to reap in-flight requests, bounded, without submitting.
    if ((ring_.features & IORING_FEAT_EXT_ARG) == 0) {
      return Error{"the kernel lacks IORING_FEAT_EXT_ARG (Linux >= 5.11)"};
    }
    return {};
  }

  io_uring_sqe* get_sqe() override { return io_uring_get_sqe(&ring_); }

  int submit() override { return io_uring_submit(&ring_); }

  int wait(Completion* out, std::int64_t timeout_ns) override {
    io_uring_cqe* cqe = nullptr;
    int ret = 0;
    if (timeout_ns < 0) {
      ret = io_uring_wait_cqe(&ring_, &cqe);
    } else {
      __kernel_timespec timeout{};
      timeout.tv_sec = timeout_ns / 1'000'000'000;
      timeout.tv_nsec = timeout_ns % 1'000'000'000;
      ret = io_uring_wait_cqe_timeout(&ring_, &cqe, &timeout);
    }
    if (ret < 0) return ret;
    out->user_data = io_uring_cqe_get_data64(cqe);
    out->res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    return 0;
  }

 private:
  io_uring ring_{};
  bool initialized_ = false;
};

class SystemIo final : public Io {
 public:
  int make_directory(const std::string& path, mode_t mode) override {
    return static_cast<int>(retry_eintr([&] { return ::mkdir(path.c_str(), mode); }));
  }

  int create_file(int dir_fd, const std::string& name, mode_t mode) override {
    return static_cast<int>(retry_eintr(
        [&] { return ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode); }));
  }

  long write_at(int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset) override {
    return retry_eintr([&] { return ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)); });
  }

  int fsync(int fd) override {
    return static_cast<int>(retry_eintr([&] { return ::fsync(fd); }));
  }

  int fdatasync(int fd) override {
    return static_cast<int>(retry_eintr([&] { return ::fdatasync(fd); }));
  }

  int rename_no_replace(int dir_fd, const std::string& from, const std::string& to) override {
    return static_cast<int>(
        retry_eintr([&] { return ::renameat2(dir_fd, from.c_str(), dir_fd, to.c_str(), RENAME_NOREPLACE); }));
  }

  int link(int dir_fd, const std::string& from, const std::string& to) override {
    return static_cast<int>(
        retry_eintr([&] { return ::linkat(dir_fd, from.c_str(), dir_fd, to.c_str(), 0); }));
  }

  int unlink(int dir_fd, const std::string& name) override {
    return static_cast<int>(retry_eintr([&] { return ::unlinkat(dir_fd, name.c_str(), 0); }));
  }

  Result<std::unique_ptr<Ring>> open_ring(unsigned entries) override {
    auto ring = std::make_unique<SystemRing>();
    if (Status opened = ring->init(entries); !opened.ok()) return opened;
    return std::unique_ptr<Ring>(std::move(ring));
  }
};

}  // namespace

Io& system_io() {
  static SystemIo io;
  return io;
}

}  // namespace flurry::persist
