// dataplane/socket_backend.cc — the kernel-socket backend: the default that runs anywhere,
// and the baseline that shows what kernel bypass buys.
//
// One thread per worker, each with its own SO_REUSEPORT UDP socket (the kernel spreads
// client flows across them), pinned to the (worker % n)-th of the n CPUs the process may run
// on (dataplane/cpu_pin.h). Per burst: recvmmsg (polling for
// an adaptive window after the last burst with --poll-spin-us, dataplane/poll_governor.h,
// then blocking up to a short timeout, so the stop flag is seen), one clock read and one
// ceiling load, handle every datagram with its core::Slice (core/slice.h), sendmmsg the answers —
// consecutive answers to one peer with one length as a single UDP GSO message where the
// kernel has UDP_SEGMENT (dataplane/udp_gso.h; --udp-gso=false turns it off). With UDP_GRO on
// the socket (--udp-gro, Linux 5.0+) the kernel hands over a run of equal-size datagrams from
// one client (sent as one GSO message, or merged by the NIC's GRO) as one buffer with their
// size in a control message: one receive, one socket-queue entry and one wakeup for up to 64
// requests, which the worker cuts apart (gro_segment_size()) and answers as if they had come
// one by one.
// All buffers are sized at start; nothing is allocated after the worker starts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include "base/log.h"
#include "core/slice.h"
#include "dataplane/backend.h"
#include "dataplane/cpu_pin.h"
#include "dataplane/poll_governor.h"
#include "dataplane/udp_gso.h"

namespace flurry::dataplane {
namespace {

constexpr std::uint32_t burst_size_max = 256;
// Receive buffers are larger than any valid request, so a datagram longer than the buffer
// (cut by the kernel, MSG_TRUNC) still reaches the handler with more than datagram_size_max
// bytes and is counted there once, as too_long (or bad_magic), like every other oversize one.
constexpr std::size_t rx_buffer_size = 2048;
static_assert(rx_buffer_size > proto::datagram_size_max);
// With UDP_GRO a receive carries up to 64 KiB of datagrams; the answers of one burst are sent
// whenever answers_max of them are waiting, so a burst of full GRO buffers needs no more room.
constexpr std::size_t gro_buffer_size = 65536;
constexpr std::uint32_t answers_max = 256;
constexpr int receive_timeout_ms = 20;

enum class SocketDrop : std::uint8_t { rx_error, tx_error, count_ };
// Room for the UDP_GRO control message a receive carries.
constexpr std::size_t gro_control_size = CMSG_SPACE(sizeof(int));

constexpr std::string_view drop_name(SocketDrop drop) {
  switch (drop) {
    case SocketDrop::rx_error:
      return "rx_error";
    case SocketDrop::tx_error:
      return "tx_error";
    case SocketDrop::count_:
      break;
  }
  return "unknown";
}

struct alignas(64) SocketCounters {
  std::array<Counter, static_cast<std::size_t>(SocketDrop::count_)> drops;
  Counter gro_runs;       // receives that carried more than one datagram (UDP_GRO)
  Counter gro_datagrams;  // the datagrams those receives carried
  Counter poll_found;     // bursts found while polling (no wakeup on their path)
  Counter poll_missed;    // bursts that came after a polling window ran out (a wakeup)
  void add(SocketDrop drop, std::uint64_t n = 1) { drops[static_cast<std::size_t>(drop)].add(n); }
};

// Everything one worker touches, allocated before it starts.
struct Worker {
  std::uint32_t index = 0;
  int fd = -1;
  std::size_t buffer_size = rx_buffer_size;  // gro_buffer_size with UDP_GRO
  std::vector<std::uint8_t> buffers;         // burst x buffer_size
  bool gro = false;
  std::vector<std::array<std::uint8_t, gro_control_size>> rx_controls;
  std::vector<std::array<std::uint8_t, proto::datagram_size_max>> answers;
  std::vector<sockaddr_in> peers;
  std::vector<iovec> rx_iov;
  std::vector<iovec> tx_iov;
  std::vector<mmsghdr> rx;
  std::vector<mmsghdr> tx;
  // GSO: each answer's peer and size, the groups, one message and control block per group.
  bool gso = false;
  std::vector<const sockaddr_in*> answer_peers;
  std::vector<std::size_t> answer_sizes;
  std::vector<GsoGroup> groups;
  std::vector<mmsghdr> tx_groups;
  std::vector<std::array<std::uint8_t, gso_control_size>> controls;
  SocketCounters counters;
  std::thread thread;
};

class SocketBackend final : public Backend {
 public:
  SocketBackend(const BackendConfig& config, core::Shared& shared)
      : config_(config),
        shared_(shared),
        system_clock_(config.clock_offset_ms),
        clock_(config.clock != nullptr ? *config.clock : system_clock_) {}
  ~SocketBackend() override { stop(); }

  Status start() override;
  void stop() override;
  std::string_view name() const override { return "socket"; }
  void visit_counters(const CounterVisitor& visit) const override {
    for (const auto& worker : workers_) {
      for (std::size_t i = 0; i < worker->counters.drops.size(); ++i) {
        visit("socket_drops", drop_name(static_cast<SocketDrop>(i)), worker->index,
              worker->counters.drops[i].get());
      }
      visit("socket_gro", "runs", worker->index, worker->counters.gro_runs.get());
      visit("socket_gro", "datagrams", worker->index, worker->counters.gro_datagrams.get());
      visit("socket_poll", "found", worker->index, worker->counters.poll_found.get());
      visit("socket_poll", "missed", worker->index, worker->counters.poll_missed.get());
    }
  }

 private:
  Status open_socket(Worker& worker);
  // Answers the datagram (or the run of GRO segments) of message i into worker.answers.
  unsigned handle_message(Worker& worker, core::Slice& slice, const core::Burst& state, int i,
                          unsigned answers);
  unsigned queue_answer(Worker& worker, std::size_t size, int i, unsigned answers);
  Status open_workers();
  void run(Worker& worker);
  void send_answers(Worker& worker, unsigned answers);
  unsigned send_groups(Worker& worker, unsigned answers);

  BackendConfig config_;
  core::Shared& shared_;
  SystemClock system_clock_;
  const Clock& clock_;  // config_.clock, or system_clock_
  std::vector<std::unique_ptr<Worker>> workers_;
};

Status SocketBackend::open_socket(Worker& worker) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(config_.listen.port);
  if (inet_pton(AF_INET, config_.listen.address.c_str(), &address.sin_addr) != 1) {
    return Error{"--listen address '" + config_.listen.address + "' is not an IPv4 address"};
  }
  worker.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (worker.fd < 0) return Error{std::string("cannot create a UDP socket: ") + std::strerror(errno)};
  const int one = 1;
  setsockopt(worker.fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  const int buffer_bytes = 4 << 20;
  setsockopt(worker.fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
  setsockopt(worker.fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
  timeval timeout{0, receive_timeout_ms * 1000};
  setsockopt(worker.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  // UDP_SEGMENT 0 on the socket changes nothing but tells whether the kernel has GSO for UDP.
  const int no_segment = 0;
  worker.gso =
      config_.udp_gso && setsockopt(worker.fd, SOL_UDP, UDP_SEGMENT, &no_segment, sizeof no_segment) == 0;
  worker.gro = config_.udp_gro && setsockopt(worker.fd, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
  if (bind(worker.fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const int saved = errno;
    return Error{"cannot bind UDP " + config_.listen.address + ":" + std::to_string(config_.listen.port) +
                 ": " + std::strerror(saved) +
                 (saved == EADDRINUSE ? " (is another flurryd running? pick another --listen port)" : "")};
  }
  return {};
}

// Every worker's buffers and socket, before any thread starts.
Status SocketBackend::open_workers() {
  const std::uint32_t burst = std::min(config_.burst_size, burst_size_max);
  for (std::uint32_t i = 0; i < config_.workers; ++i) {
    auto worker = std::make_unique<Worker>();
    worker->index = i;
    if (Status opened = open_socket(*worker); !opened.ok()) {
      if (worker->fd >= 0) close(worker->fd);
      return opened;
    }
    // Without GRO every datagram has its own buffer, so a burst has at most `burst` answers.
    const std::uint32_t answers = worker->gro ? answers_max : burst;
    worker->buffer_size = worker->gro ? gro_buffer_size : rx_buffer_size;
    worker->buffers.resize(std::size_t{burst} * worker->buffer_size);
    worker->rx_controls.resize(burst);
    worker->peers.resize(burst);
    worker->rx_iov.resize(burst);
    worker->rx.resize(burst);
    worker->answers.resize(answers);
    worker->tx_iov.resize(answers);
    worker->tx.resize(answers);
    worker->answer_peers.resize(answers);
    worker->answer_sizes.resize(answers);
    worker->groups.resize(answers);
    worker->tx_groups.resize(answers);
    worker->controls.resize(answers);
    workers_.push_back(std::move(worker));
  }
  return {};
}

Status SocketBackend::start() {
  if (Status opened = open_workers(); !opened.ok()) {
    stop();
    return opened;
  }
  const std::vector<int> cpus = config_.pin_workers ? allowed_cpus() : std::vector<int>{};
  for (auto& worker : workers_) {
    Worker* raw = worker.get();
    raw->thread = std::thread([this, raw] { run(*raw); });
    char name[16];  // seen in top -H and /proc/<pid>/task/*/comm
    std::snprintf(name, sizeof name, "flurry-w%u", raw->index);
    pthread_setname_np(raw->thread.native_handle(), name);
    const int cpu = worker_cpu(cpus, raw->index);
    if (cpu < 0) continue;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (const int error = pthread_setaffinity_np(raw->thread.native_handle(), sizeof set, &set); error != 0) {
      log_warn("cannot pin worker {} to CPU {}: {}; it runs unpinned", raw->index, cpu, std::strerror(error));
    }
  }
  return {};
}

void SocketBackend::stop() {
  shared_.stop.store(true, std::memory_order_relaxed);
  for (auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
    if (worker->fd >= 0) close(worker->fd);
    worker->fd = -1;
  }
}

void SocketBackend::run(Worker& worker) {
  const std::uint32_t burst = static_cast<std::uint32_t>(worker.rx.size());
  core::WorkerStats& stats = shared_.stats[worker.index];
  core::SliceConfig slice_config;
  slice_config.layout = config_.layout;
  slice_config.core = worker.index;
  slice_config.workers = config_.workers;
  slice_config.retry_hint_us = config_.retry_hint_us;
  slice_config.auth = config_.auth;
  // Its handler is (re)built in place whenever a new assignment is published: at start
  // (flurryd's main thread) and after a re-claim (the renew thread, flurry-renew).
  core::Slice slice(slice_config, shared_);

  // --poll-spin-us: the most the worker polls after a burst; how long it does adapts to the
  // gaps between bursts (dataplane/poll_governor.h). Timed by the real monotonic clock, whatever
  // clock_ is: polling spends CPU in real time (a test's stepped clock would make it spin).
  const bool governed = config_.poll_spin_us != 0;
  PollGovernor governor(std::uint64_t{config_.poll_spin_us} * 1000);
  std::uint64_t gap_from_ns = governed ? system_clock_.mono_ns() : 0;  // the end of the last burst
  bool headers_ready = false;  // rx headers as set below, untouched by an empty receive

  while (!shared_.stop.load(std::memory_order_relaxed)) {
    shared_.keys.quiesce(worker.index);  // between bursts: holds no key table
    for (std::uint32_t i = 0; i < burst && !headers_ready; ++i) {
      worker.rx_iov[i] = {worker.buffers.data() + std::size_t{i} * worker.buffer_size, worker.buffer_size};
      worker.rx[i].msg_hdr = {};
      worker.rx[i].msg_hdr.msg_name = &worker.peers[i];
      worker.rx[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
      worker.rx[i].msg_hdr.msg_iov = &worker.rx_iov[i];
      worker.rx[i].msg_hdr.msg_iovlen = 1;
      if (worker.gro) {
        worker.rx[i].msg_hdr.msg_control = worker.rx_controls[i].data();
        worker.rx[i].msg_hdr.msg_controllen = gro_control_size;
      }
    }
    headers_ready = true;
    // Within the window after a burst, look again without sleeping, so a client that sends
    // again soon finds the worker awake (no wakeup on its path).
    const std::uint64_t window_ns = governor.window_ns();
    const bool polling = window_ns != 0 && system_clock_.mono_ns() - gap_from_ns < window_ns;
    const int received =
        recvmmsg(worker.fd, worker.rx.data(), burst, polling ? MSG_DONTWAIT : MSG_WAITFORONE, nullptr);
    if (received <= 0) {
      if (received < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        worker.counters.add(SocketDrop::rx_error);
      }
      continue;
    }
    headers_ready = false;
    const std::uint64_t busy_from_ns = clock_.mono_ns();
    if (governed) {
      governor.on_gap(system_clock_.mono_ns() - gap_from_ns);
      if (polling) {
        worker.counters.poll_found.add(1);
      } else if (window_ns != 0) {
        worker.counters.poll_missed.add(1);  // the window ran out: the worker slept for it
      }
    }
    // Once per burst: the clock and the ceiling.
    core::Burst state;
    state.now_unix_ms = clock_.wall_ms();
    state.now_t = config_.layout.time_from_unix_ms(state.now_unix_ms);
    state.keys = shared_.keys.load();
    state.ceiling_t = slice.load_ceiling();

    unsigned answers = 0;
    for (int i = 0; i < received; ++i) answers = handle_message(worker, slice, state, i, answers);
    send_answers(worker, answers);
    slice.publish();
    stats.busy_ns.add(clock_.mono_ns() - busy_from_ns);
    if (governed) gap_from_ns = system_clock_.mono_ns();
  }
  shared_.keys.leave(worker.index);
}

unsigned SocketBackend::handle_message(Worker& worker, core::Slice& slice, const core::Burst& state, int i,
                                       unsigned answers) {
  const msghdr& message = worker.rx[i].msg_hdr;
  const std::uint8_t* data = static_cast<const std::uint8_t*>(message.msg_iov->iov_base);
  std::size_t length = worker.rx[i].msg_len;
  // One datagram, or a GRO run cut every `step` bytes (the last piece may be shorter).
  const std::size_t step = worker.gro ? gro_segment_size(message, length) : length;
  if ((message.msg_flags & MSG_TRUNC) != 0 && step != length) {
    // A merged run longer than the buffer (the kernel stops merging at 64 KiB, so not seen):
    // only whole datagrams are answered; the cut one and the lost tail count once.
    worker.counters.add(SocketDrop::rx_error);
    length -= length % step;
  }
  if (step < length) {
    worker.counters.gro_runs.add(1);
    worker.counters.gro_datagrams.add((length + step - 1) / step);
  }
  // A GRO run comes from one peer: one source for every segment (the per-source bound).
  const core::Source source = core::Source::ipv4(ntohl(worker.peers[i].sin_addr.s_addr));
  std::size_t offset = 0;
  do {
    if (answers == worker.answers.size()) {  // a burst of GRO runs: send what is ready
      send_answers(worker, answers);
      answers = 0;
    }
    const std::size_t size = std::min(step, length - offset);
    const std::size_t answer = slice.handle(std::span<const std::uint8_t>(data + offset, size),
                                            std::span(worker.answers[answers]), state, source);
    if (answer != 0) answers = queue_answer(worker, answer, i, answers);
    offset += step;
  } while (offset < length);
  return answers;
}

unsigned SocketBackend::queue_answer(Worker& worker, std::size_t size, int i, unsigned answers) {
  worker.tx_iov[answers] = {worker.answers[answers].data(), size};
  worker.tx[answers].msg_hdr = {};
  worker.tx[answers].msg_hdr.msg_name = &worker.peers[i];
  worker.tx[answers].msg_hdr.msg_namelen = worker.rx[i].msg_hdr.msg_namelen;
  worker.tx[answers].msg_hdr.msg_iov = &worker.tx_iov[answers];
  worker.tx[answers].msg_hdr.msg_iovlen = 1;
  worker.answer_peers[answers] = &worker.peers[i];
  worker.answer_sizes[answers] = size;
  return answers + 1;
}

// Sends answers [0, answers): as GSO groups while the kernel takes them, then one message per
// answer for whatever is left (no GSO, or a GSO send refused: the worker stops using it).
void SocketBackend::send_answers(Worker& worker, unsigned answers) {
  unsigned sent = worker.gso ? send_groups(worker, answers) : 0;
  while (sent < answers) {
    const int result = sendmmsg(worker.fd, worker.tx.data() + sent, answers - sent, 0);
    if (result <= 0) {
      if (result < 0 && errno == EINTR) continue;
      // The IDs in unsent answers are never reused (last_t already moved past them).
      worker.counters.add(SocketDrop::tx_error, answers - sent);
      break;
    }
    sent += static_cast<unsigned>(result);
  }
}

// Returns how many answers went out in groups; on a refused GSO send (EIO: a device without
// checksum offload; EINVAL) turns GSO off for this worker and leaves the rest to the caller.
unsigned SocketBackend::send_groups(Worker& worker, unsigned answers) {
  const std::size_t group_count =
      group_answers(std::span(worker.answer_peers.data(), answers),
                    std::span(worker.answer_sizes.data(), answers), std::span(worker.groups));
  for (std::size_t g = 0; g < group_count; ++g) {
    const GsoGroup& group = worker.groups[g];
    msghdr& message = worker.tx_groups[g].msg_hdr;
    message = worker.tx[group.first].msg_hdr;
    message.msg_iovlen = group.count;  // the group's answers are consecutive in tx_iov
    if (group.count > 1) {
      set_udp_segment(message, worker.controls[g],
                      static_cast<std::uint16_t>(worker.answer_sizes[group.first]));
    }
  }
  unsigned sent_groups = 0, sent_answers = 0;
  while (sent_groups < group_count) {
    const int result = sendmmsg(worker.fd, worker.tx_groups.data() + sent_groups,
                                static_cast<unsigned>(group_count - sent_groups), 0);
    if (result < 0 && errno == EINTR) continue;
    if (result <= 0) {
      if (result < 0 && (errno == EIO || errno == EINVAL)) worker.gso = false;
      break;
    }
    for (int g = 0; g < result; ++g) sent_answers += worker.groups[sent_groups + g].count;
    sent_groups += static_cast<unsigned>(result);
  }
  return sent_answers;
}

}  // namespace

std::unique_ptr<Backend> make_socket_backend(const BackendConfig& config, core::Shared& shared) {
  return std::make_unique<SocketBackend>(config, shared);
}

}  // namespace flurry::dataplane
