// tests/persist/crash_sim.h — a recording, crash-simulating persist::Io, and a fake io_uring
// (persist::Ring) that runs its requests through it.
//
// The simulator performs every operation on a real directory tree (so the code under test
// reads real files), never calls fsync for real, and keeps a model of what would survive a
// power loss:
// - a write is volatile until a sync (fsync or fdatasync) of its file completes;
// - a new directory entry (mkdir, file creation, rename, link) or a removed one (rename,
//   unlink) is volatile until its directory is synced;
// - a crash drops every volatile effect. materialize() writes the state a reboot would find
//   (or variants: every effect kept, directory entries kept but unsynced data dropped, or the
//   last unsynced write torn after k bytes) into another directory.
// crash_at(k) crashes the machine just before operation k (operations count from 0): that
// operation and every later one fail with EIO and change nothing. Every operation is logged.
//
// The fake ring holds what io_uring would: entries consumed by submit() become requests;
// entries linked with IOSQE_IO_LINK inside one submit form a chain that runs in order and is
// cancelled (-ECANCELED) after a failed or short write. Requests run only when the code waits
// for a completion (or when the test calls run_ring_requests(): "the kernel caught up"), one
// at a time, in an order the knobs choose. A write reads its buffer when it runs, as the
// kernel does. Knobs: at most N entries consumed per submit (cutting chains), fsyncs before
// writes when both may run, requests that never run (stuck), failing waits.
#pragma once

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "persist/io.h"

namespace flurry::persist::testing {

class CrashSim final : public Io {
 public:
  enum class After {
    drop_volatile,           // the model's durable state: what a power loss leaves
    keep_everything,         // every effect landed (a process crash without power loss)
    keep_entries_drop_data,  // directory changes landed, unsynced file data did not
    torn_last_write,         // durable state plus the first k bytes of the last unsynced write
  };

  struct RingKnobs {
    unsigned submit_max = UINT_MAX;  // entries one submit() consumes at most
    bool fsync_first = false;        // run a runnable fsync before a runnable write
    bool stuck = false;              // requests never run (waits: -ETIME with a timeout)
    int fail_waits = 0;              // the next N waits fail with -EBADR, consuming nothing
    bool unavailable = false;        // open_ring() fails with "Function not implemented"
  };

  // `root` must exist; everything under it now counts as durable.
  explicit CrashSim(std::string root) : root_path_(std::move(root)) { root_ = scan(root_path_); }
  CrashSim(const CrashSim&) = delete;
  CrashSim& operator=(const CrashSim&) = delete;
  ~CrashSim() override;

  // --- Control. ---
  void crash_at(std::size_t op_index) { crash_at_ = op_index; }
  bool crashed() const { return crashed_; }
  std::size_t ops() const { return ops_; }
  const std::vector<std::string>& log() const { return log_; }
  std::string log_text() const {
    std::string out;
    for (const auto& line : log_) out += line + "\n";
    return out;
  }
  RingKnobs ring_knobs;
  bool rename_unsupported = false;  // rename_no_replace() fails with EINVAL (link fallback)
  int fail_syncs = 0;               // the next N syncs fail with EIO and sync nothing
  // Set when a fake ring is destroyed while requests handed to it have not run.
  bool ring_freed_with_requests_in_flight = false;
  // Fake rings alive now (a parked ring stays alive).
  std::size_t live_rings() const { return rings_.size(); }
  // Runs every request the fake rings hold: the kernel catching up.
  void run_ring_requests();
  // Size of the last write not yet covered by a completed sync of its file (0: none).
  std::size_t last_unsynced_write_bytes() const { return last_unsynced_ ? last_unsynced_->bytes.size() : 0; }

  // Writes the chosen state of the tree into `target` (an existing, empty directory).
  void materialize(const std::string& target, After after, std::size_t torn_bytes = 0) const {
    materialize_dir(root_, target, after, torn_bytes);
  }

  // --- Io. ---
  int make_directory(const std::string& path, mode_t mode) override {
    if (!begin("mkdir " + path)) return -EIO;
    if (::mkdir(path.c_str(), mode) != 0) return -errno;
    const auto slash = path.find_last_of('/');
    const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
    const int id = new_node(true, stat_key(path));
    node(node_of_path(parent)).entries[path.substr(slash + 1)] = id;
    return 0;
  }

  int create_file(int dir_fd, const std::string& name, mode_t mode) override {
    if (!begin("create " + fd_path(dir_fd) + "/" + name)) return -EIO;
    const int fd = ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return -errno;
    const int id = new_node(false, fd_key(fd));
    node(node_of_fd(dir_fd)).entries[name] = id;
    return fd;
  }

  long write_at(int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset) override {
    return do_write(fd, bytes, offset, "");
  }

  int fsync(int fd) override { return do_sync(fd, "fsync", ""); }
  int fdatasync(int fd) override { return do_sync(fd, "fdatasync", ""); }

  int rename_no_replace(int dir_fd, const std::string& from, const std::string& to) override {
    if (!begin("rename " + fd_path(dir_fd) + "/" + from + " -> " + to)) return -EIO;
    if (rename_unsupported) return -EINVAL;
    if (::renameat2(dir_fd, from.c_str(), dir_fd, to.c_str(), RENAME_NOREPLACE) != 0) {
      return -errno;
    }
    auto& entries = node(node_of_fd(dir_fd)).entries;
    entries[to] = entries.at(from);
    entries.erase(from);
    return 0;
  }

  int link(int dir_fd, const std::string& from, const std::string& to) override {
    if (!begin("link " + fd_path(dir_fd) + "/" + from + " -> " + to)) return -EIO;
    if (::linkat(dir_fd, from.c_str(), dir_fd, to.c_str(), 0) != 0) return -errno;
    auto& entries = node(node_of_fd(dir_fd)).entries;
    entries[to] = entries.at(from);
    return 0;
  }

  int unlink(int dir_fd, const std::string& name) override {
    if (!begin("unlink " + fd_path(dir_fd) + "/" + name)) return -EIO;
    if (::unlinkat(dir_fd, name.c_str(), 0) != 0) return -errno;
    node(node_of_fd(dir_fd)).entries.erase(name);
    return 0;
  }

  Result<std::unique_ptr<Ring>> open_ring(unsigned entries) override;

 private:
  class FakeRing;
  friend class FakeRing;
  using Key = std::pair<dev_t, ino_t>;

  struct Node {
    bool dir = false;
    std::vector<std::uint8_t> data, durable_data;         // files
    std::map<std::string, int> entries, durable_entries;  // directories
  };
  struct Write {
    int node = -1;
    std::uint64_t offset = 0;
    std::vector<std::uint8_t> bytes;
  };

  bool begin(const std::string& what) {
    if (crashed_) return false;
    if (ops_ >= crash_at_) {
      crashed_ = true;
      log_.push_back("#" + std::to_string(ops_) + " CRASH (power lost) before: " + what);
      return false;
    }
    log_.push_back("#" + std::to_string(ops_) + " " + what);
    ++ops_;
    return true;
  }

  long do_write(int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset,
                const std::string& origin) {
    if (!begin(origin + "write " + fd_path(fd) + " @" + std::to_string(offset) + " " +
               std::to_string(bytes.size()) + " bytes")) {
      return -EIO;
    }
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0) return -errno;
    const int id = node_of_fd(fd);
    auto& data = node(id).data;
    const std::size_t end = static_cast<std::size_t>(offset) + static_cast<std::size_t>(n);
    if (data.size() < end) data.resize(end, 0);
    std::copy(bytes.begin(), bytes.begin() + n, data.begin() + static_cast<long>(offset));
    last_unsynced_ = Write{id, offset, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + n)};
    return n;
  }

  int do_sync(int fd, const std::string& what, const std::string& origin) {
    if (!begin(origin + what + " " + fd_path(fd))) return -EIO;
    if (fail_syncs > 0) {
      --fail_syncs;
      log_.back() += " -> EIO (injected)";
      return -EIO;
    }
    const int id = node_of_fd(fd);
    Node& n = node(id);
    if (n.dir) {
      n.durable_entries = n.entries;
    } else {
      n.durable_data = n.data;
      if (last_unsynced_ && last_unsynced_->node == id) last_unsynced_.reset();
    }
    return 0;
  }

  Node& node(int id) { return nodes_.at(static_cast<std::size_t>(id)); }
  const Node& node(int id) const { return nodes_.at(static_cast<std::size_t>(id)); }

  int new_node(bool dir, Key key) {
    Node n;
    n.dir = dir;
    nodes_.push_back(std::move(n));
    const int id = static_cast<int>(nodes_.size() - 1);
    by_key_[key] = id;  // a reused inode number now means the new file
    return id;
  }

  static Key stat_key(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw std::runtime_error("crash_sim: cannot stat " + path);
    return {st.st_dev, st.st_ino};
  }
  static Key fd_key(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw std::runtime_error("crash_sim: cannot fstat");
    return {st.st_dev, st.st_ino};
  }
  int node_of_fd(int fd) const {
    const auto it = by_key_.find(fd_key(fd));
    if (it == by_key_.end()) throw std::runtime_error("crash_sim: unknown file " + fd_path(fd));
    return it->second;
  }
  int node_of_path(const std::string& path) const {
    const auto it = by_key_.find(stat_key(path));
    if (it == by_key_.end()) throw std::runtime_error("crash_sim: unknown directory " + path);
    return it->second;
  }
  static std::string fd_path(int fd) {
    char target[512] = {};
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : "fd " + std::to_string(fd);
  }

  int scan(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw std::runtime_error("crash_sim: cannot stat " + path);
    const int id = new_node(S_ISDIR(st.st_mode), {st.st_dev, st.st_ino});
    if (S_ISDIR(st.st_mode)) {
      std::map<std::string, int> entries;
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        const std::string name = entry.path().filename().string();
        entries[name] = scan(path + "/" + name);
      }
      node(id).entries = entries;
      node(id).durable_entries = entries;
    } else {
      std::vector<std::uint8_t> data;
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      std::uint8_t chunk[4096];
      ssize_t n = 0;
      while (fd >= 0 && (n = ::read(fd, chunk, sizeof chunk)) > 0) {
        data.insert(data.end(), chunk, chunk + n);
      }
      if (fd >= 0) ::close(fd);
      node(id).data = data;
      node(id).durable_data = data;
    }
    return id;
  }

  void materialize_dir(int id, const std::string& path, After after, std::size_t torn_bytes) const {
    const Node& d = node(id);
    const bool entries_now = after == After::keep_everything || after == After::keep_entries_drop_data;
    for (const auto& [name, child_id] : entries_now ? d.entries : d.durable_entries) {
      const Node& child = node(child_id);
      const std::string child_path = path + "/" + name;
      if (child.dir) {
        if (::mkdir(child_path.c_str(), 0700) != 0) {
          throw std::runtime_error("crash_sim: cannot create " + child_path);
        }
        materialize_dir(child_id, child_path, after, torn_bytes);
        continue;
      }
      std::vector<std::uint8_t> data = after == After::keep_everything ? child.data : child.durable_data;
      if (after == After::torn_last_write && last_unsynced_ && last_unsynced_->node == child_id) {
        const std::size_t k = std::min(torn_bytes, last_unsynced_->bytes.size());
        const std::size_t at = static_cast<std::size_t>(last_unsynced_->offset);
        if (data.size() < at + k) data.resize(at + k, 0);
        std::copy(last_unsynced_->bytes.begin(), last_unsynced_->bytes.begin() + static_cast<long>(k),
                  data.begin() + static_cast<long>(at));
      }
      const int fd = ::open(child_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0) throw std::runtime_error("crash_sim: cannot create " + child_path);
      const ssize_t n = ::write(fd, data.data(), data.size());
      ::close(fd);
      if (n != static_cast<ssize_t>(data.size())) {
        throw std::runtime_error("crash_sim: short write to " + child_path);
      }
    }
  }

  std::string root_path_;
  int root_ = -1;
  std::vector<Node> nodes_;
  std::map<Key, int> by_key_;
  std::optional<Write> last_unsynced_;
  std::size_t ops_ = 0;
  std::size_t crash_at_ = SIZE_MAX;
  bool crashed_ = false;
  std::vector<std::string> log_;
  std::set<FakeRing*> rings_;
};

class CrashSim::FakeRing final : public Ring {
 public:
  FakeRing(CrashSim& sim, unsigned entries) : sim_(sim), sq_(entries) { sim_.rings_.insert(this); }
  FakeRing(const FakeRing&) = delete;
  FakeRing& operator=(const FakeRing&) = delete;
  ~FakeRing() override {
    if (!sim_alive_) return;
    if (pending() > 0) sim_.ring_freed_with_requests_in_flight = true;
    sim_.rings_.erase(this);
  }

  io_uring_sqe* get_sqe() override {
    if (tail_ - head_ >= sq_.size()) return nullptr;
    io_uring_sqe* sqe = &sq_[tail_ % sq_.size()];
    std::memset(sqe, 0, sizeof *sqe);
    ++tail_;
    return sqe;
  }

  int submit() override {
    const std::size_t n = std::min<std::size_t>(tail_ - head_, sim_.ring_knobs.submit_max);
    bool linked_to_previous = false;
    for (std::size_t i = 0; i < n; ++i) {
      const io_uring_sqe& raw = sq_[head_ % sq_.size()];
      const Entry sqe{raw.opcode, raw.flags, raw.fd,          raw.addr,
                      raw.len,    raw.off,   raw.fsync_flags, raw.user_data};
      ++head_;
      if (!linked_to_previous) ++next_chain_;
      requests_.push_back({sqe, next_chain_, false});
      // A link reaches only the next entry of the same submit: at the end of the batch the
      // chain is cut.
      linked_to_previous = (sqe.flags & IOSQE_IO_LINK) != 0;
    }
    sim_.log_.push_back("   ring: submit consumed " + std::to_string(n) + " of " +
                        std::to_string(n + (tail_ - head_)) + " entries");
    return static_cast<int>(n);
  }

  int wait(Completion* out, std::int64_t timeout_ns) override {
    if (sim_.ring_knobs.fail_waits > 0) {
      --sim_.ring_knobs.fail_waits;
      sim_.log_.push_back("   ring: wait -> EBADR (injected)");
      return -EBADR;
    }
    while (completions_.empty()) {
      if (sim_.ring_knobs.stuck || !run_one()) {
        // A real wait without a timeout would block forever; a fake cannot.
        return timeout_ns >= 0 ? -ETIME : (pending() > 0 ? -EBADR : -EDEADLK);
      }
    }
    *out = completions_.front();
    completions_.pop_front();
    return 0;
  }

  std::size_t pending() const {
    return static_cast<std::size_t>(
        std::count_if(requests_.begin(), requests_.end(), [](const Request& r) { return !r.done; }));
  }

  // Runs one request that may run now; false when none may.
  bool run_one() {
    Request* chosen = nullptr;
    std::set<std::uint64_t> blocked_chains;  // a chain runs in order
    for (auto& r : requests_) {
      if (r.done) continue;
      if (blocked_chains.count(r.chain) != 0) continue;
      blocked_chains.insert(r.chain);
      if (chosen == nullptr) chosen = &r;
      if (sim_.ring_knobs.fsync_first && r.sqe.opcode == IORING_OP_FSYNC &&
          chosen->sqe.opcode != IORING_OP_FSYNC) {
        chosen = &r;
      }
    }
    if (chosen == nullptr) return false;
    run(*chosen);
    return true;
  }

  void detach() { sim_alive_ = false; }

 private:
  // What the kernel copies out of an entry when submit() consumes it.
  struct Entry {
    std::uint8_t opcode = 0;
    std::uint8_t flags = 0;
    int fd = -1;
    std::uint64_t addr = 0;
    std::uint32_t len = 0;
    std::uint64_t off = 0;
    std::uint32_t fsync_flags = 0;
    std::uint64_t user_data = 0;
  };
  struct Request {
    Entry sqe;
    std::uint64_t chain;
    bool done;
  };

  void run(Request& r) {
    r.done = true;
    int res = 0;
    if (broken_chains_.count(r.chain) != 0) {
      res = -ECANCELED;
      sim_.log_.push_back("   ring: request cancelled (its link chain broke)");
    } else if (r.sqe.opcode == IORING_OP_WRITE) {
      const auto* at = reinterpret_cast<const std::uint8_t*>(r.sqe.addr);
      res = static_cast<int>(
          sim_.do_write(r.sqe.fd, std::span<const std::uint8_t>(at, r.sqe.len), r.sqe.off, "ring "));
      if (res != static_cast<int>(r.sqe.len)) broken_chains_.insert(r.chain);
    } else if (r.sqe.opcode == IORING_OP_FSYNC) {
      const bool data_only = (r.sqe.fsync_flags & IORING_FSYNC_DATASYNC) != 0;
      res = sim_.do_sync(r.sqe.fd, data_only ? "fdatasync" : "fsync", "ring ");
      if (res < 0) broken_chains_.insert(r.chain);
    } else {
      res = -EINVAL;
      sim_.log_.push_back("   ring: unexpected opcode " + std::to_string(r.sqe.opcode));
    }
    completions_.push_back({r.sqe.user_data, res});
  }

  CrashSim& sim_;
  bool sim_alive_ = true;
  std::vector<io_uring_sqe> sq_;
  std::size_t head_ = 0;  // next entry submit() consumes
  std::size_t tail_ = 0;  // next entry get_sqe() hands out
  std::uint64_t next_chain_ = 0;
  std::deque<Request> requests_;
  std::set<std::uint64_t> broken_chains_;
  std::deque<Completion> completions_;
};

inline CrashSim::~CrashSim() {
  // A parked ring outlives the simulator; it must never call back into it.
  for (FakeRing* ring : rings_) ring->detach();
}

inline void CrashSim::run_ring_requests() {
  for (FakeRing* ring : rings_) {
    while (ring->run_one()) {
    }
  }
}

inline Result<std::unique_ptr<Ring>> CrashSim::open_ring(unsigned entries) {
  if (ring_knobs.unavailable) return Error{"Function not implemented"};
  return std::unique_ptr<Ring>(std::make_unique<FakeRing>(*this, entries));
}

}  // namespace flurry::persist::testing
